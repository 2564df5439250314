package client

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/tier"
)

// tierImportDry is TierImportWith with o.DryRun: it lists the bucket,
// merges the listing with a walk of dir (importPrune) and changes
// nothing. A listed object whose key no file below dir has (as the walk
// derives keys: the prefix and the path below dir) is one an import would
// make a file of; one whose key a file has is counted as existing (the
// file may be its import, a changed object's or another file: a real run
// tells them apart). A key that an import cleans into another path
// ("a//b" into a/b) counts as new. With o.Delete, each file the listing
// lacks is checked as a real run checks it (its record, a HEAD of its
// object) and reported as one the run would remove or keep.
func (c *Client) tierImportDry(ctx context.Context, store tier.Store, backend, prefix, dir string, o ImportOptions) (ImportStats, error) {
	var st ImportStats
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(max(o.Parallel, 1))
	w := newImportWalk(ctx, c, prefix, dir)
	if errs.CodeOf(w.err) == errs.NotFound {
		w.err = nil // no directory yet: no file exists
	}
	prune := &importPrune{walk: w, gone: func(f walkFile) {
		if !o.Delete {
			return
		}
		g.Go(func() error {
			tallyGone(&mu, &st, &o, nil, f, c.forgetGone(ctx, store, backend, prefix, f, true))
			return nil
		})
	}}
	listErr := store.List(ctx, prefix, func(obj tier.ObjectInfo) error {
		exists := prune.seen(obj.Key)
		rest := strings.TrimPrefix(obj.Key, prefix)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case rest == "" || strings.HasSuffix(rest, "/"):
			st.Skipped++
			return nil
		case exists:
			st.Present++
			return ctx.Err()
		case obj.Size == 0:
			st.Empty++
		default:
			st.Files++
			st.Bytes += obj.Size
		}
		if o.Report != nil {
			o.Report(path.Join(dir, path.Clean("/"+rest)), obj.Size, nil)
		}
		return ctx.Err()
	})
	if listErr == nil {
		prune.end()
	}
	g.Wait()
	switch {
	case listErr != nil:
		return st, fmt.Errorf("tier import: list backend %q: %w", backend, listErr)
	case w.err != nil:
		return st, fmt.Errorf("tier import: dry run: %w", w.err)
	case st.Failed > 0:
		return st, fmt.Errorf("tier import: dry run: %d files could not be checked", st.Failed)
	}
	return st, nil
}
