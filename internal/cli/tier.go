package cli

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/mover"
	"github.com/sluice-fs/sluice/internal/pause"
)

// TierCreds says where `tier add` takes a backend's credentials from: the
// flags, else the file, else the environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY).
type TierCreds struct {
	AccessKey, SecretKey string
	File                 string
}

// Resolve returns the access key pair. A file holds key = value lines:
// aws_access_key_id and aws_secret_access_key (as ~/.aws/credentials; the
// first of each counts) or access_key and secret_key.
func (c TierCreds) Resolve(getenv func(string) string) (access, secret string, err error) {
	access, secret = c.AccessKey, c.SecretKey
	if c.File != "" && (access == "" || secret == "") {
		a, s, err := readCredsFile(c.File)
		if err != nil {
			return "", "", err
		}
		access, secret = cmpOr(access, a), cmpOr(secret, s)
	}
	access = cmpOr(access, getenv("AWS_ACCESS_KEY_ID"))
	secret = cmpOr(secret, getenv("AWS_SECRET_ACCESS_KEY"))
	if (access == "") != (secret == "") {
		return "", "", errs.New(errs.Invalid, "tier: an access key needs its secret key and the other way round")
	}
	return access, secret, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func readCredsFile(name string) (access, secret string, err error) {
	f, err := os.Open(name)
	if err != nil {
		return "", "", fmt.Errorf("tier: credentials file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || t[0] == '#' || t[0] == ';' || t[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			// Never echo the line: it may hold a secret.
			return "", "", errs.New(errs.Invalid, "tier: credentials file %s line %d: want key = value", name, line)
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		switch k {
		case "aws_access_key_id", "access_key":
			access = cmpOr(access, v)
		case "aws_secret_access_key", "secret_key":
			secret = cmpOr(secret, v)
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("tier: credentials file %s: %w", name, err)
	}
	if access == "" || secret == "" {
		return "", "", errs.New(errs.Invalid, "tier: credentials file %s has no aws_access_key_id and aws_secret_access_key", name)
	}
	return access, secret, nil
}

// TierAdd registers a backend after checking it (unless force).
func (e *Env) TierAdd(ctx context.Context, b client.TierBackend, force bool) error {
	if err := e.Client.TierAdd(ctx, b, force); err != nil {
		return fmt.Errorf("tier add %s (%s bucket %q): %w", b.Name, b.Endpoint, b.Bucket, err)
	}
	state := "reachable"
	if force {
		state = "not checked"
	}
	fmt.Fprintf(e.Stdout, "tier backend %s added: %s bucket %s (%s)\n", b.Name, b.Endpoint, b.Bucket, state)
	return nil
}

// TierLs lists the backends, without their credentials; with check, each
// is tried (a HEAD of its bucket) and its state shown.
func (e *Env) TierLs(ctx context.Context, check bool) error {
	bs, err := e.Client.TierList(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "NAME\tENDPOINT\tBUCKET\tPREFIX\tREGION\tCREDENTIALS")
	if check {
		fmt.Fprint(tw, "\tSTATE")
	}
	fmt.Fprintln(tw)
	for _, b := range bs {
		creds := "none"
		if b.AccessKey != "" {
			creds = "set"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", b.Name, b.Endpoint, b.Bucket, cmpOr(b.Prefix, "-"), cmpOr(b.Region, "-"), creds)
		if check {
			fmt.Fprintf(tw, "\t%s", e.tierState(ctx, b.Name))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// tierState tries a backend for at most 5 s and says how it went.
func (e *Env) tierState(ctx context.Context, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.Client.TierCheck(ctx, name); err != nil {
		return "FAILED: " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return "ok"
}

// TierRm removes a backend.
func (e *Env) TierRm(ctx context.Context, names []string) error {
	for _, n := range names {
		if err := e.Client.TierRemove(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// TierGC deletes the queued objects of removed files.
func (e *Env) TierGC(ctx context.Context) error {
	del, kept, err := e.Client.TierGC(ctx)
	fmt.Fprintf(e.Stdout, "%d objects deleted, %d kept (written over by a later archive)\n", del, kept)
	return err
}

// HSM actions of `sluice hsm`.
const (
	HsmArchive = "archive"
	HsmRelease = "release"
	HsmRestore = "restore"
	HsmState   = "state"
	HsmRemove  = "remove"
)

// Hsm runs action on each path (with recursive, on every regular file
// below a directory), up to parallel files at a time, and prints each
// file's state after it. A file that fails is reported on stderr and the
// others go on; the error says how many failed.
func (e *Env) Hsm(ctx context.Context, action string, paths []string, recursive bool, backend string, parallel int) error {
	var do func(context.Context, string) (client.HsmInfo, error)
	switch action {
	case HsmArchive:
		do = func(ctx context.Context, p string) (client.HsmInfo, error) {
			return e.Client.HsmArchive(ctx, p, backend)
		}
	case HsmRelease:
		do = e.Client.HsmRelease
	case HsmRestore:
		do = e.Client.HsmRestore
	case HsmState:
		do = e.Client.HsmState
	case HsmRemove:
		do = e.Client.HsmRemove
	default:
		return errs.New(errs.Invalid, "hsm: unknown action %q", action)
	}
	var (
		mu            sync.Mutex // guards files, failed and the output
		files, failed int
		g             errgroup.Group
	)
	if action == HsmState {
		parallel = 1 // a listing, in walk order
	}
	g.SetLimit(max(parallel, 1))
	one := func(p string) {
		g.Go(func() error {
			info, err := do(ctx, p)
			mu.Lock()
			defer mu.Unlock()
			files++
			switch {
			case action == HsmRelease && errs.CodeOf(err) == errs.NotSupported:
				// A small file held inline in the metadata has no
				// target space to free: it stays archived, no failure.
				fmt.Fprintf(e.Stdout, "archived\t%s\t(inline in the metadata: nothing to release)\n", p)
			case err != nil:
				failed++
				fmt.Fprintf(e.Stderr, "sluice: %v\n", err)
			case action == HsmState && info.State != "resident":
				fmt.Fprintf(e.Stdout, "%s\t%s\tbackend %s key %s\n", info.State, p, info.Backend, info.Key)
			default:
				fmt.Fprintf(e.Stdout, "%s\t%s\n", info.State, p)
			}
			return nil
		})
	}
	for _, p := range paths {
		fi, err := e.Client.Stat(ctx, p)
		if err != nil {
			g.Wait()
			return err
		}
		if !fi.IsDir() {
			one(p)
			continue
		}
		if !recursive {
			g.Wait()
			return fmt.Errorf("hsm %s %s: %w (use -r)", action, p, errs.ErrIsDir)
		}
		err = e.Client.Walk(ctx, p, func(q string, fi *client.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if fi.Mode().IsRegular() {
				one(q)
			}
			return nil
		})
		if err != nil {
			g.Wait()
			return err
		}
	}
	g.Wait()
	if failed > 0 {
		return fmt.Errorf("hsm %s: %d of %d files failed", action, failed, files)
	}
	return nil
}

// StageOptions configure Stage.
type StageOptions struct {
	FromFile string // a file of paths, one per line, after the arguments
	// FromProfile names a profiler recording (docs/profile.md): the files
	// it read follow, in the order each was first read (an epoch's order,
	// for the next epoch); ProfileDir limits them to a directory.
	FromProfile string
	ProfileDir  string
	Rate        int64 // bytes per second restored at most (0: no cap)
	Parallel    int   // files restored at once (default 4)
	DryRun      bool  // print the files in order and stage nothing
	// Follow names the job whose readers the staging keeps ahead of
	// (stageFollow): Depth files ahead of the furthest file they reached,
	// doubled at each miss up to MaxDepth.
	Follow          string
	Depth, MaxDepth int
	FollowPoll      time.Duration // how often the readers' progress is read (default 200 ms)
	FollowIdle      time.Duration // how long readers may read nothing new once all is staged (default 10 s)
	// Wait makes Stage return only once every file is on the targets
	// (stageWait): failed restores are retried, files released again are
	// restored again, and the files still not there when ctx ends or
	// WaitTimeout (0: none) passes are listed, and Stage fails.
	Wait        bool
	WaitTimeout time.Duration
	// Job labels the staging metrics (sluice_stage_*{job}); default the
	// job of Follow. ReportEvery is how often they are reported (1 s).
	Job         string
	ReportEvery time.Duration
}

// Stage restores released files ahead of a job, starting them in the order
// given (arguments, then the lines of FromFile, then FromProfile's), at
// most o.Parallel at once and o.Rate bytes per second, or ahead of Follow's
// readers (stageFollow). Files not released are skipped. It returns when
// every file is staged; a file that fails is reported and the others go
// on. With o.Wait it then makes sure every file is on the targets
// (stageWait). It reports its counts to the metadata service as it goes
// (sluice_stage_*, stageReporter).
func (e *Env) Stage(ctx context.Context, paths []string, o StageOptions) error {
	if o.FromFile != "" {
		b, err := os.ReadFile(o.FromFile)
		if err != nil {
			return fmt.Errorf("stage: %w", err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				paths = append(paths, l)
			}
		}
	}
	if o.FromProfile != "" {
		order, err := e.ProfileReadOrder(ctx, o.FromProfile, o.ProfileDir)
		if err != nil {
			return fmt.Errorf("stage: %w", err)
		}
		paths = append(paths, order...)
	}
	if len(paths) == 0 {
		return errs.New(errs.Invalid, "stage: no files given")
	}
	if o.DryRun {
		for _, p := range paths {
			fmt.Fprintln(e.Stdout, p)
		}
		return nil
	}
	job := cmp.Or(o.Job, o.Follow)
	// The restores of this process outside a follow run (which reports
	// its own), for the staging metrics.
	var counts client.StageCounts
	rep := e.newStageReporter(job, "", o.ReportEvery)
	if o.Follow == "" || o.Wait {
		defer func() { rep.report(ctx, counts, 0, true) }()
	}
	var err error
	if o.Follow != "" {
		var r StageFollowResult
		if r, err = e.stageFollow(ctx, paths, o, job); err != nil {
			err = fmt.Errorf("stage: %w", err)
		} else {
			err = e.printFollow(r)
		}
	} else {
		err = e.stageOrder(ctx, paths, o, rep, &counts)
	}
	if o.Wait {
		// What --wait answers is whether every file is on the targets
		// now: a restore that failed above and succeeded since is fine
		// (and when ctx has ended, it lists those that are not).
		return e.stageWait(ctx, paths, o, rep, &counts)
	}
	return err
}

// stageOrder restores the released files of paths in order, at most
// o.Parallel at once and o.Rate bytes per second, counting them in counts
// and reporting those through rep. Each file's lookup runs in its
// restore's slot: one path lookup says whether it is released (its
// attributes carry the flag) and its size, so that looking files up never
// holds the restores back.
func (e *Env) stageOrder(ctx context.Context, paths []string, o StageOptions, rep *stageReporter, counts *client.StageCounts) error {
	var (
		mu                     sync.Mutex // guards the counters, counts and pace
		staged, skipped, fails int
		bytes                  int64
		g                      errgroup.Group
	)
	snapshot := func() client.StageCounts { mu.Lock(); defer mu.Unlock(); return *counts }
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		fails++
		counts.Failed++
		fmt.Fprintf(e.Stderr, "sluice: %v\n", err)
	}
	g.SetLimit(max(o.Parallel, 1))
	start := time.Now()
	pace := mover.Pacer{Start: start, Rate: float64(o.Rate)}
	for _, p := range paths {
		rep.report(ctx, snapshot(), 0, false)
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			fi, err := e.Client.Stat(ctx, p)
			if err != nil {
				fail(fmt.Errorf("stage: %w", err))
				return nil
			}
			if !fi.Mode().IsRegular() {
				fail(errs.New(errs.Invalid, "stage %s: not a regular file", p))
				return nil
			}
			a, size := fi.Attr(), fi.Size()
			if !a.Released {
				mu.Lock()
				skipped++
				mu.Unlock()
				return nil
			}
			if o.Rate > 0 {
				// Start this file no earlier than the cap allows for
				// the bytes started before it.
				mu.Lock()
				due := pace.Due()
				pace.Add(float64(size))
				mu.Unlock()
				if d := time.Until(due); d > 0 {
					if pause.For(ctx, d) != nil {
						return nil
					}
				}
			}
			if err := e.Client.StageIno(ctx, a.Ino); err != nil {
				fail(fmt.Errorf("stage %s: %w", p, err))
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			staged++
			bytes += size
			counts.Restored++
			counts.RestoredBytes += size
			return nil
		})
	}
	g.Wait()
	fmt.Fprintf(e.Stdout, "staged %d files (%s) in %v; %d not released\n", staged, human(bytes), time.Since(start).Round(time.Millisecond), skipped)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("stage: stopped before every file was tried: %w", err)
	}
	if fails > 0 {
		return fmt.Errorf("stage: %d of %d files failed", fails, len(paths))
	}
	return nil
}
