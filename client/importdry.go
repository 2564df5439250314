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
	"github.com/sluice-fs/sluice/internal/wire"
)

// tierImportDry is TierImportWith with o.DryRun: it lists the bucket and
// changes nothing. The objects of each directory go, as in a real run,
// in batches to the metadata service, which answers for each what the
// import would do with its file (OpTierImportDry: the decisions of
// OpTierImport, in a read-only transaction): make it, leave it (imported
// before), update it to the changed object, keep it (restored, or a file
// of its own), fail (another file has the name, the entry is invalid).
// Every object of a directory that does not exist yet would be made.
// Objects a real run imports one at a time (empty, listed without an
// ETag, or all of them with o.Checksums: read for their checksums) and
// every object against a metadata service without OpTierImportDry are
// told apart by the walk of dir alone: a file with the object's key (the
// prefix and the path below dir) counts as imported before, whatever it
// is; a key an import cleans into another path ("a//b" into a/b) counts
// as new. With o.Delete, each file the listing lacks is checked as a real
// run checks it (its record, a HEAD of its object) and reported as one
// the run would remove or keep.
func (c *Client) tierImportDry(ctx context.Context, store tier.Store, backend, prefix, dir string, o ImportOptions) (ImportStats, error) {
	var st ImportStats
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(max(o.Parallel, 1))
	count := importCounter(&mu, &st, &o)
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
	var batch *importBatch // of one directory, not sent yet
	flush := func() {
		if b := batch; b != nil {
			batch = nil
			g.Go(func() error {
				c.sendImportDry(ctx, backend, b, !o.KeepChanged, count)
				return nil
			})
		}
	}
	listErr := store.List(ctx, prefix, func(obj tier.ObjectInfo) error {
		exists := prune.seen(obj.Key)
		rest := strings.TrimPrefix(obj.Key, prefix)
		if rest == "" || strings.HasSuffix(rest, "/") {
			mu.Lock()
			st.Skipped++
			mu.Unlock()
			return nil
		}
		p := path.Join(dir, path.Clean("/"+rest))
		if o.Checksums || obj.ETag == "" || obj.Size == 0 {
			count(p, obj, walkedOutcome(exists))
			return ctx.Err()
		}
		if d := path.Dir(p); batch == nil || batch.dir != d {
			flush()
			batch = &importBatch{dir: d}
		}
		batch.items = append(batch.items, importItem{path: p, obj: obj, exists: exists})
		if len(batch.items) == importBatchSize {
			flush()
		}
		return ctx.Err()
	})
	if listErr == nil {
		prune.end()
	}
	flush()
	g.Wait()
	switch {
	case listErr != nil:
		return st, fmt.Errorf("tier import: list backend %q: %w", backend, listErr)
	case w.err != nil:
		return st, fmt.Errorf("tier import: dry run: %w", w.err)
	case st.Failed > 0:
		return st, fmt.Errorf("tier import: dry run: %d objects would fail or could not be checked", st.Failed)
	}
	return st, nil
}

// walkedOutcome is what a dry run that cannot ask the metadata service
// counts for an object: imported before if the walk found a file with its
// key, else made.
func walkedOutcome(exists bool) error {
	if exists {
		return errImported
	}
	return nil
}

// sendImportDry asks the metadata service what an import would do with
// the files of b (OpTierImportDry) and counts each: made, if b's
// directory does not exist; as the walk found it, against a service
// without the request.
func (c *Client) sendImportDry(ctx context.Context, backend string, b *importBatch, refresh bool, count func(string, tier.ObjectInfo, error)) {
	each := func(outcome func(importItem) error) {
		for _, it := range b.items {
			count(it.path, it.obj, outcome(it))
		}
	}
	if c.noTierImportDry.Load() {
		each(func(it importItem) error { return walkedOutcome(it.exists) })
		return
	}
	a, err := c.resolve(ctx, b.dir, true)
	switch {
	case errs.CodeOf(err) == errs.NotFound:
		each(func(importItem) error { return nil })
		return
	case err != nil:
		each(func(it importItem) error { return opErr("tier import: dry run", it.path, err) })
		return
	}
	resp, err := c.importBatchCall(ctx, wire.OpTierImportDry, a.Ino, backend, b, refresh)
	if errs.CodeOf(err) == errs.NotSupported {
		c.noTierImportDry.Store(true) // an older service
		each(func(it importItem) error { return walkedOutcome(it.exists) })
		return
	}
	if err != nil {
		each(func(it importItem) error { return opErr("tier import: dry run", it.path, err) })
		return
	}
	why := resp.Errors
	for i, it := range b.items {
		count(it.path, it.obj, importResult(resp.Results[i], it.path, &why))
	}
}
