package cli

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/mover"
)

// TierPolicySet sets directory dir's tier policy (an empty policy stops
// the inheritance of its parent's).
func (e *Env) TierPolicySet(ctx context.Context, dir string, p mover.Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	fi, err := e.Client.Stat(ctx, dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return errs.New(errs.Invalid, "tier policy: %s is not a directory", dir)
	}
	if err := e.Client.SetXattr(ctx, dir, mover.PolicyXattr, p.Encode()); err != nil {
		return fmt.Errorf("tier policy %s: %w", dir, err)
	}
	return nil
}

// TierPolicyRm removes directory dir's own tier policy (its parent's
// applies again).
func (e *Env) TierPolicyRm(ctx context.Context, dir string) error {
	err := e.Client.RemoveXattr(ctx, dir, mover.PolicyXattr)
	if errs.CodeOf(err) == errs.NoData {
		return errs.New(errs.NotFound, "tier policy: %s has no policy of its own", dir)
	}
	return err
}

// TierPolicyGet prints the policy that applies to each path and the
// directory it comes from.
func (e *Env) TierPolicyGet(ctx context.Context, paths []string) error {
	w := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PATH\tPOLICY\tFROM")
	for _, p := range paths {
		p = path.Clean("/" + p)
		fi, err := e.Client.Stat(ctx, p)
		if err != nil {
			return err
		}
		d := p
		if !fi.IsDir() {
			d = path.Dir(p)
		}
		pol, from := mover.Policy{}, "-"
		for {
			b, err := e.Client.GetXattr(ctx, d, mover.PolicyXattr)
			if err == nil {
				if pol, err = mover.ParsePolicy(b); err != nil {
					return fmt.Errorf("tier policy of %s: %w", d, err)
				}
				from = d
				break
			}
			if errs.CodeOf(err) != errs.NoData {
				return err
			}
			if d == "/" {
				break
			}
			d = path.Dir(d)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", p, pol, from)
	}
	return w.Flush()
}

// MoverOptions configure `sluice mover`.
type MoverOptions struct {
	mover.Options
	Once  bool
	Every time.Duration
}

// Mover runs the tier mover: one pass (Once), printing what it did, or
// passes every o.Every until ctx ends.
func (e *Env) Mover(ctx context.Context, o MoverOptions) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(e.Stderr, nil))
	}
	if o.Once && !o.DryRun {
		// Each move as it is done (failures go to the log).
		var mu sync.Mutex
		o.OnMove = func(a mover.Action, err error) {
			if err == nil {
				mu.Lock()
				fmt.Fprintf(e.Stdout, "%sd %s (%d bytes): %s\n", a.Kind, a.File.Path, a.File.Size, a.Reason)
				mu.Unlock()
			}
		}
	}
	m := mover.New(e.Client, o.Options)
	if !o.Once {
		return m.Run(ctx, o.Every)
	}
	r, err := m.Pass(ctx)
	if o.DryRun {
		for _, a := range r.Planned {
			fmt.Fprintf(e.Stdout, "would %s %s (%d bytes): %s\n", a.Kind, a.File.Path, a.File.Size, a.Reason)
		}
	}
	fmt.Fprintf(e.Stdout, "mover: %d directories, %d files under policies; archived %d (%d bytes), released %d (%d bytes), failed %d in %v\n",
		r.Dirs, r.Files, r.Archived, r.ArchivedBytes, r.Released, r.ReleasedBytes, r.Failed, r.Took.Round(time.Millisecond))
	if err != nil {
		return err
	}
	if r.Failed > 0 {
		return fmt.Errorf("mover: %d of %d moves failed", r.Failed, len(r.Planned))
	}
	return nil
}

// TierImport imports the objects of backend under prefix as released
// files under dir (client.TierImportWith with o, whose Report and Gone it
// sets), printing each file made (unless quiet), each file of an object
// gone from the bucket (o.Delete), each error and a summary.
func (e *Env) TierImport(ctx context.Context, backend, prefix, dir string, o client.ImportOptions, quiet bool) error {
	var mu sync.Mutex
	o.Report = func(p string, size int64, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			fmt.Fprintf(e.Stderr, "sluice: %v\n", err)
		case quiet:
		case o.DryRun:
			fmt.Fprintf(e.Stdout, "would import\t%s\t%d\n", p, size)
		default:
			fmt.Fprintf(e.Stdout, "%s\t%d\n", p, size)
		}
	}
	if o.DryRun {
		o.Updated = func(p string, size int64) {
			if quiet {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(e.Stdout, "would update\t%s\t%d\n", p, size)
		}
	}
	o.Gone = func(p string, removed bool) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case quiet:
		case o.DryRun && removed:
			fmt.Fprintf(e.Stdout, "would remove\t%s\n", p)
		case o.DryRun:
			fmt.Fprintf(e.Stdout, "would keep\t%s\t(restored; its object is gone)\n", p)
		case removed:
			fmt.Fprintf(e.Stdout, "removed\t%s\n", p)
		default:
			fmt.Fprintf(e.Stdout, "kept\t%s\t(restored or being restored; its object is gone)\n", p)
		}
	}
	st, err := e.Client.TierImportWith(ctx, backend, prefix, dir, o)
	if o.DryRun {
		fmt.Fprintf(e.Stdout, "dry run, nothing changed: would import %d files (%s) and %d empty ones; %d imported before, %d keys skipped, %d would fail\n", st.Files, human(st.Bytes), st.Empty, st.Present, st.Skipped, st.Failed)
		if st.Updated+st.Changed > 0 {
			fmt.Fprintf(e.Stdout, "dry run: objects changed in the bucket since they were imported: %d files would be updated to them, %d kept (restored or being restored)\n", st.Updated, st.Changed)
		}
		if st.Own > 0 {
			fmt.Fprintf(e.Stdout, "dry run: files an earlier import made that are files of their own since (written and archived again): %d would be kept\n", st.Own)
		}
		if o.Delete {
			fmt.Fprintf(e.Stdout, "dry run: objects removed from the bucket since they were imported: %d files would be removed, %d kept (restored)\n", st.Removed, st.Orphaned)
		}
		return err
	}
	fmt.Fprintf(e.Stdout, "imported %d files (%s) and %d empty ones; %d imported before, %d keys skipped, %d failed\n", st.Files, human(st.Bytes), st.Empty, st.Present, st.Skipped, st.Failed)
	if st.Updated+st.Changed > 0 {
		fmt.Fprintf(e.Stdout, "objects changed in the bucket since they were imported: %d files updated to them, %d kept (restored or being restored)\n", st.Updated, st.Changed)
	}
	if st.Own > 0 {
		fmt.Fprintf(e.Stdout, "files an earlier import made that are files of their own since (written and archived again): %d kept\n", st.Own)
	}
	if o.Delete {
		fmt.Fprintf(e.Stdout, "objects removed from the bucket since they were imported: %d files removed, %d kept (restored or being restored); %d directories they left empty removed\n", st.Removed, st.Orphaned, st.RemovedDirs)
	}
	return err
}
