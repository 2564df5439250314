package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/profile"
)

// ProfileRecordOptions are the flags of `sluice profile record`.
type ProfileRecordOptions struct {
	Job        string
	Name       string        // default: the job and the time
	Dir        string        // the report's default directory
	Duration   time.Duration // how long to record
	MaxRecords uint64
	Detach     bool // start the recording and return
	Quiet      bool
	// Settle is how long to wait after the end for clients to ship their
	// last records (default 3 s: two client polls and a shipment).
	Settle time.Duration
}

// ProfileRecord records a job's I/O: it starts a recording, waits until
// it ends (or ctx is cancelled: the recording is stopped early), then
// waits for the clients' last records and prints what was recorded.
func (e *Env) ProfileRecord(ctx context.Context, o ProfileRecordOptions) error {
	if o.Job == "" {
		return errs.New(errs.Invalid, "profile record needs --job NAME (the clients' $%s or --qos-job)", client.EnvQosJob)
	}
	if o.Name == "" {
		o.Name = fmt.Sprintf("%s-%s", sanitizeName(o.Job), time.Now().UTC().Format("20060102-150405"))
	}
	if o.Dir != "" {
		o.Dir = path.Clean("/" + o.Dir)
	}
	if o.Settle <= 0 {
		o.Settle = 3 * time.Second
	}
	if err := e.Client.ProfileStart(ctx, o.Name, o.Job, o.Dir, o.Duration, o.MaxRecords); err != nil {
		return err
	}
	if o.Detach {
		fmt.Fprintf(e.Stdout, "recording %s: job %s until %s\n", o.Name, o.Job, time.Now().Add(o.Duration).Format(time.RFC3339))
		return nil
	}
	if !o.Quiet {
		fmt.Fprintf(e.Stderr, "recording %s: job %s for %v (Ctrl-C stops it early)\n", o.Name, o.Job, o.Duration)
	}
	end := time.NewTimer(o.Duration)
	defer end.Stop()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-end.C:
			break wait
		case <-ctx.Done():
			break wait
		case <-tick.C:
			if s, err := e.Client.Profile(ctx, o.Name); err == nil && !o.Quiet {
				fmt.Fprintf(e.Stderr, "  %d clients, %d records\n", s.Clients, s.Records)
			}
		}
	}
	// Stop it (also when interrupted: the context may be cancelled).
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := e.Client.ProfileStop(sctx, o.Name); err != nil {
		return err
	}
	time.Sleep(o.Settle)
	s, err := e.Client.Profile(sctx, o.Name)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "recorded %s: %d records from %d clients", s.Name, s.Records, s.Clients)
	if s.Dropped > 0 {
		fmt.Fprintf(e.Stdout, " (%d dropped)", s.Dropped)
	}
	fmt.Fprintf(e.Stdout, "\nsluice profile report %s\n", s.Name)
	return nil
}

func sanitizeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)[:min(len(s), 40)]
}

// ProfileReportOptions are the flags of `sluice profile report`.
type ProfileReportOptions struct {
	Dir  string // only files under it ("": the recording's directory, else all)
	JSON bool
	// MaxNames bounds the namespace entries visited to name files.
	MaxNames int
}

// LoadProfile reads recording name and summarises it: the records of its
// time, of the files under dir (or the recording's directory) when one is
// given, with the files named by a walk of that directory.
func (e *Env) LoadProfile(ctx context.Context, name, dir string, maxNames int) (client.ProfileSession, profile.Report, error) {
	s, r, _, err := e.loadProfile(ctx, name, dir, maxNames)
	return s, r, err
}

// profileBatches reads recording s's batches, each keeping only the
// records that started while it ran (clients notice its end within their
// poll).
func (e *Env) profileBatches(ctx context.Context, s client.ProfileSession) ([]profile.Batch, error) {
	var batches []profile.Batch
	err := e.Client.ReadProfile(ctx, s.Name, func(p []byte) error {
		b, err := profile.Decode(p)
		if err != nil {
			return errs.New(errs.Corruption, "profile %s: %v", s.Name, err)
		}
		keep := b.Records[:0]
		for _, r := range b.Records {
			if r.Start >= s.Start.UnixNano() && r.Start < s.Until.UnixNano() {
				keep = append(keep, r)
			}
		}
		b.Records = keep
		batches = append(batches, b)
		return nil
	})
	return batches, err
}

// loadProfile is LoadProfile, also returning the records summarised.
func (e *Env) loadProfile(ctx context.Context, name, dir string, maxNames int) (client.ProfileSession, profile.Report, []profile.Batch, error) {
	s, err := e.Client.Profile(ctx, name)
	if err != nil {
		return s, profile.Report{}, nil, err
	}
	batches, err := e.profileBatches(ctx, s)
	if err != nil {
		return s, profile.Report{}, nil, err
	}
	touched := map[uint64]bool{}
	for _, b := range batches {
		for _, r := range b.Records {
			touched[r.Ino] = true
		}
	}
	if dir == "" {
		dir = s.Dir
	}
	filter := dir != "" && dir != "/"
	if dir == "" {
		dir = "/"
	}
	if maxNames <= 0 {
		maxNames = 1 << 20
	}
	names, dirs, err := e.nameInodes(ctx, path.Clean("/"+dir), touched, maxNames)
	if err != nil {
		return s, profile.Report{}, nil, err
	}
	if filter {
		// Files and directories created or looked up under dir count as
		// under it even if they are gone now.
		in := map[uint64]bool{}
		for ino := range names {
			in[ino] = true
		}
		for changed := true; changed; {
			changed = false
			for i := range batches {
				for _, r := range batches[i].Records {
					switch r.Op {
					case profile.OpCreate, profile.OpMkdir, profile.OpLookup:
						if dirs[r.Parent] && r.Ino != 0 && !in[r.Ino] {
							in[r.Ino] = true
							if r.Op == profile.OpMkdir {
								dirs[r.Ino] = true
							}
							changed = true
						}
					}
				}
			}
		}
		for i := range batches {
			keep := batches[i].Records[:0]
			for _, r := range batches[i].Records {
				if in[r.Ino] || dirs[r.Parent] || dirs[r.Ino] {
					keep = append(keep, r)
				}
			}
			batches[i].Records = keep
		}
	}
	rep := profile.Summarize(batches, func(ino uint64) (string, bool) {
		p, ok := names[ino]
		return p, ok
	})
	return s, rep, batches, nil
}

// ProfileReadOrder returns the files recording name read, in the order
// each was first read: those under dir (or the recording's directory, else
// all) that still exist, by path.
func (e *Env) ProfileReadOrder(ctx context.Context, name, dir string) ([]string, error) {
	s, err := e.Client.Profile(ctx, name)
	if err != nil {
		return nil, err
	}
	batches, err := e.profileBatches(ctx, s)
	if err != nil {
		return nil, err
	}
	first := map[uint64]int64{}
	for _, b := range batches {
		for _, r := range b.Records {
			if t, ok := first[r.Ino]; r.Op == profile.OpRead && (!ok || r.Start < t) {
				first[r.Ino] = r.Start
			}
		}
	}
	want := map[uint64]bool{}
	for ino := range first {
		want[ino] = true
	}
	names, _, err := e.nameInodes(ctx, path.Clean("/"+cmp.Or(dir, s.Dir, "/")), want, 1<<20)
	if err != nil {
		return nil, err
	}
	inos := make([]uint64, 0, len(names))
	for ino := range names {
		inos = append(inos, ino)
	}
	slices.SortFunc(inos, func(a, b uint64) int { return cmp.Or(cmp.Compare(first[a], first[b]), cmp.Compare(a, b)) })
	out := make([]string, len(inos))
	for i, ino := range inos {
		out[i] = names[ino]
	}
	return out, nil
}

// nameInodes walks dir (by listings, without a stat per entry) and returns
// the paths of the inodes in want it found, and the directories under dir
// (dir included), visiting at most max entries; it stops early once every
// wanted inode is named, unless the directories are needed to filter.
func (e *Env) nameInodes(ctx context.Context, dir string, want map[uint64]bool, max int) (map[uint64]string, map[uint64]bool, error) {
	names := map[uint64]string{}
	dirs := map[uint64]bool{}
	fi, err := e.Client.Lstat(ctx, dir)
	if err != nil {
		return nil, nil, err
	}
	dirs[fi.Attr().Ino] = true
	visited := 0
	queue := []string{dir}
	for len(queue) > 0 && visited < max {
		d := queue[0]
		queue = queue[1:]
		for ent, err := range e.Client.ReadDir(ctx, d) {
			if err != nil {
				if errs.CodeOf(err) == errs.NotFound {
					break // removed meanwhile
				}
				return nil, nil, err
			}
			visited++
			p := strings.TrimSuffix(d, "/") + "/" + ent.Name
			if want[ent.Ino] {
				names[ent.Ino] = p
			}
			if ent.Mode.IsDir() {
				dirs[ent.Ino] = true
				queue = append(queue, p)
			}
		}
	}
	return names, dirs, nil
}

// ProfileReport prints the summary of recording name.
func (e *Env) ProfileReport(ctx context.Context, name string, o ProfileReportOptions) error {
	s, rep, err := e.LoadProfile(ctx, name, o.Dir, o.MaxNames)
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Recording client.ProfileSession
			Report    profile.Report
		}{s, rep})
	}
	fmt.Fprintf(e.Stdout, "recording %s: job %s, %s to %s", s.Name, s.Job, s.Start.Format(time.RFC3339), s.Until.Format(time.RFC3339))
	if s.Running(time.Now()) {
		fmt.Fprint(e.Stdout, " (still running)")
	}
	if s.Dropped > 0 {
		fmt.Fprintf(e.Stdout, ", %d records dropped", s.Dropped)
	}
	fmt.Fprintln(e.Stdout)
	profile.Format(e.Stdout, &rep)
	return nil
}

// ProfileList prints the recordings.
func (e *Env) ProfileList(ctx context.Context) error {
	l, err := e.Client.Profiles(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tJOB\tDIR\tSTART\tSTATE\tCLIENTS\tRECORDS\tDROPPED")
	for _, s := range l {
		state := "done"
		if s.Running(now) {
			state = "recording"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", s.Name, s.Job, cmp.Or(s.Dir, "/"), s.Start.Format(time.RFC3339), state, s.Clients, s.Records, s.Dropped)
	}
	return tw.Flush()
}
