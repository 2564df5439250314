package cli

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pause"
)

// stageWait is `stage --wait`: it returns once no file of paths is
// released, restoring those that still are (a restore that failed, a file
// released again since it was staged) at most o.Parallel at once, again
// after 1 s, then 2 s, ... up to 30 s between rounds while restores fail.
// A file another client is restoring is waited for through its restore
// lease (client.StageIno), not restored twice. When ctx ends or
// o.WaitTimeout passes first, or a file is gone, it prints each file not
// on the targets and fails. counts (the run's, reported by rep) grows by
// the restores it runs.
func (e *Env) stageWait(ctx context.Context, paths []string, o StageOptions, rep *stageReporter, counts *client.StageCounts) error {
	wctx := ctx
	if o.WaitTimeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, o.WaitTimeout)
		defer cancel()
	}
	backoff := time.Second
	for {
		pending, gone := e.notStaged(wctx, paths)
		if len(pending) == 0 && len(gone) == 0 {
			return nil
		}
		if len(gone) > 0 || wctx.Err() != nil {
			return e.listNotStaged(ctx, paths, len(paths))
		}
		fmt.Fprintf(e.Stdout, "waiting for %d files to be on the targets\n", len(pending))
		var (
			mu     sync.Mutex // guards failed and counts
			failed int
			g      errgroup.Group
		)
		g.SetLimit(max(o.Parallel, 1))
		for _, f := range pending {
			if f.ino == 0 { // its state could not be read: look again next round
				failed++
				continue
			}
			g.Go(func() error {
				err := e.Client.StageIno(wctx, f.ino)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					fmt.Fprintf(e.Stderr, "sluice: stage %s: %v\n", f.path, err)
					failed++
					counts.Failed++
					return nil
				}
				counts.Restored++
				counts.RestoredBytes += f.size
				return nil
			})
		}
		g.Wait()
		rep.report(ctx, *counts, 0, false)
		if failed == 0 {
			backoff = time.Second
			continue // look again: one may have been released meanwhile
		}
		_ = pause.For(wctx, backoff) // wctx's end shows at the loop's top
		backoff = min(2*backoff, 30*time.Second)
	}
}

type stagedFile struct {
	path string
	ino  uint64
	size int64
}

// pathStat is what statPaths found at a path.
type pathStat struct {
	fi  *client.FileInfo
	err error
}

// statLookups is how many path lookups statPaths keeps in flight.
const statLookups = 16

// statPaths looks up every path (following symlinks), statLookups at
// once, and returns what it found in the order of paths. A file's
// attributes say whether it is released, so a long list of files is
// sorted into released and not without a request per file beyond its
// lookup.
func (e *Env) statPaths(ctx context.Context, paths []string) []pathStat {
	out := make([]pathStat, len(paths))
	var g errgroup.Group
	g.SetLimit(statLookups)
	for i, p := range paths {
		g.Go(func() error {
			out[i].fi, out[i].err = e.Client.Stat(ctx, p)
			return nil
		})
	}
	g.Wait()
	return out
}

// notStaged returns the files of paths that are released, and the paths
// whose state cannot be read because they are gone (or are not regular
// files). Other lookup errors count the file as released (tried again).
func (e *Env) notStaged(ctx context.Context, paths []string) (released []stagedFile, gone []string) {
	seen := map[uint64]bool{}
	for i, st := range e.statPaths(ctx, paths) {
		p, fi, err := paths[i], st.fi, st.err
		if err != nil {
			if c := errs.CodeOf(err); c == errs.NotFound || c == errs.NotDir {
				gone = append(gone, p)
			} else {
				released = append(released, stagedFile{path: p})
			}
			continue
		}
		ino := fi.Attr().Ino
		if !fi.Mode().IsRegular() {
			gone = append(gone, p)
			continue
		}
		if seen[ino] {
			continue
		}
		seen[ino] = true
		if fi.Attr().Released {
			released = append(released, stagedFile{path: p, ino: ino, size: fi.Size()})
		}
	}
	return released, gone
}

// listNotStaged prints the files of paths that are not on the targets,
// each with its state or error, and returns the error that says how many.
func (e *Env) listNotStaged(ctx context.Context, paths []string, total int) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	n := 0
	for _, p := range paths {
		info, err := e.Client.HsmState(ctx, p)
		switch {
		case err != nil:
			fmt.Fprintf(e.Stderr, "sluice: stage: not on the targets: %s: %v\n", p, err)
		case info.State == "released":
			fmt.Fprintf(e.Stderr, "sluice: stage: not on the targets: %s (released)\n", p)
		default:
			continue
		}
		n++
	}
	return errs.New(errs.Unavailable, "stage --wait: %d of %d files are not on the targets", n, total)
}
