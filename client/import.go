package client

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/tier"
	"github.com/sluice-fs/sluice/internal/wire"
)

// ImportStats counts what TierImport did.
type ImportStats struct {
	Files   int   // released files made
	Bytes   int64 // their size
	Empty   int   // empty objects, made empty files
	Present int   // objects an earlier import made files of already
	// Updated: objects an earlier import made files of that changed in
	// the bucket since (another ETag or size); their files, still
	// released, are now the new objects (ImportOptions.KeepChanged).
	Updated int
	// Changed: the same, but the file was restored (its bytes are on the
	// targets: kept, and an archived one becomes dirty, to be archived
	// again before a release) or was being restored (a re-run once its
	// restore ended updates one still released).
	Changed int
	// Own: files an earlier import made that are files of their own
	// since (written and archived again, or their record removed): kept,
	// not replaced, and no failure (before 2026-12-04, and against an
	// older metadata service, they count as Failed).
	Own     int
	Skipped int // keys that name a directory (ending in "/"), or nothing
	// Removed: files an earlier import made of objects that are gone
	// from the bucket now, still released: removed (ImportOptions.Delete).
	Removed int
	// Orphaned: the same, but the file was restored (kept, and an
	// archived one becomes dirty, to be archived again before a release)
	// or was being restored (kept; a re-run once its restore ended
	// removes it).
	Orphaned int
	// RemovedDirs: directories below the import's directory that those
	// removals left empty, removed too (a class directory of a data set
	// left with no samples would otherwise stay, empty).
	RemovedDirs int
	Failed      int
}

// errImported says that the file of an object is there from an earlier
// import (the same backend and key): a re-run picks up only new objects.
var errImported = errs.New(errs.Exists, "client: tier import: imported already")

// errImportUpdated and errImportChanged say that the file of an object
// is there from an earlier import, and the object changed since: the
// file was updated to it, or kept (ImportStats.Updated, Changed).
var (
	errImportUpdated = errs.New(errs.Exists, "client: tier import: imported before, updated to the changed object")
	errImportChanged = errs.New(errs.Exists, "client: tier import: imported before; the object changed, the file was restored and is kept")
)

// errImportOwn says that the file of an object is there from an earlier
// import and is a file of its own since (ImportStats.Own).
var errImportOwn = errs.New(errs.Exists, "client: tier import: imported before; a file of its own since (written and archived again): kept")

// importTempPrefix begins the temporary name of a file imported on its
// own until its record is in.
const importTempPrefix = ".sluice-import-"

// importPiece is the size of the ranged GETs that checksum an object.
const importPiece = 8 << 20

// ImportOptions are the choices of TierImportWith.
type ImportOptions struct {
	// Parallel objects are imported at once (at least 1).
	Parallel int
	// Checksums reads every object once to take its checksums (the CRC32C
	// of each MiB, which every later read is checked against, and its
	// SHA-256). Without it the import copies the listing alone: each
	// file's record keeps the object's ETag, every read of the object is
	// pinned to it (If-Match) and its first restore takes the block
	// checksums. An object the listing gives no ETag for is read either
	// way.
	Checksums bool
	// KeepChanged leaves the files of objects that an earlier import
	// made and that changed in the bucket since as they are (counted as
	// Present). Without it, a re-run makes each such file that is still
	// released (no bytes on the targets, no restore running) the new
	// object: its size, mtime and ETag (ImportStats.Updated); one that
	// was restored keeps its bytes and becomes dirty (ImportStats.Changed).
	// With Checksums too (since 2026-12-04; such a file's checksums are
	// then taken by its first restore, as a listing import's); for
	// objects listed without an ETag and against a metadata service
	// before it, such files count as Present.
	KeepChanged bool
	// Delete removes the files that an earlier import of the same backend
	// and prefix made below the directory of objects that are gone from
	// the bucket (a HEAD of each confirms it; those past the last listed
	// key only once the whole listing was read), while they are released
	// and no restore runs
	// (ImportStats.Removed); a restored one keeps its bytes and becomes
	// dirty, one being restored is kept (ImportStats.Orphaned). Other
	// files, and files written since their restore, are never removed;
	// directories below dir that the removals leave empty are removed
	// (ImportStats.RemovedDirs).
	Delete bool
	// Report, if not nil, is called after each object whose file was
	// made or updated to it (err nil) or failed, with the file's path,
	// the object's size and the error; not for files an earlier import
	// made that are left as they are (counted in ImportStats), so that a
	// re-run over a large bucket reports only what it did (before
	// 2026-12-04 those were reported too, with a nil error).
	Report func(p string, size int64, err error)
	// Updated, if not nil, is called instead of Report for each file an
	// earlier import made that was updated to its object, changed in the
	// bucket since (in a dry run: that would be).
	Updated func(p string, size int64)
	// Gone, if not nil, is called (with Delete) for each file of an
	// object gone from the bucket: removed, or kept.
	Gone func(p string, removed bool)
	// DryRun changes nothing: it counts in ImportStats, and reports, what
	// a run would do (tierImportDry): the metadata service answers for
	// each object what the import would do with it (OpTierImportDry:
	// make its file, leave it, update it to a changed object, keep it,
	// fail), and with Delete the listing is merged with a walk of the
	// directory to find (and pass to Gone) the files it would remove or
	// keep (Removed, Orphaned), each checked as a real run checks it.
	DryRun bool
}

// TierImport is TierImportWith importing the listing alone (no object is
// read), parallel objects at once.
func (c *Client) TierImport(ctx context.Context, backend, prefix, dir string, parallel int, report func(p string, size int64, err error)) (ImportStats, error) {
	return c.TierImportWith(ctx, backend, prefix, dir, ImportOptions{Parallel: parallel, Report: report})
}

// TierImportWith makes, for every object of tier backend whose key (below
// the backend's prefix) starts with prefix, a file at dir/REST (REST: the
// key without prefix; directories are made as needed) that is released:
// its bytes stay in the object, which Sluice never deletes or writes over
// (its HSM record has generation 0), and are read and restored like any
// released file's. Its size and mtime are the object's. Either way
// (o.Checksums) an object replaced in the bucket afterwards reads as
// corrupt, never as other bytes, until a re-run (o.KeepChanged) updates
// its file. An existing file is never replaced: one that an earlier import
// made of the same object counts as Present (so a re-run picks up the new
// objects, and resumes one that stopped), any other fails with
// errs.Exists. With o.Delete the files of objects gone from the bucket
// since an earlier import are removed (importprune.go).
//
// From the listing, the files of consecutive objects in one directory are
// made in batches, up to importBatchSize per request (OpTierImport), each in
// one transaction of the metadata service (nothing half made). With
// o.Checksums, for an object without an ETag, for an empty one, and
// against a metadata service without OpTierImport (which refuses records
// without checksums), a file is made on its own, the object read for its
// checksums, under a temporary name (".sluice-import-" and random hex) and
// renamed into place once its record is in; one left behind by a crash
// may be removed.
func (c *Client) TierImportWith(ctx context.Context, backend, prefix, dir string, o ImportOptions) (ImportStats, error) {
	var st ImportStats
	if backend == "" {
		return st, errs.New(errs.Invalid, "client: tier import: no backend named")
	}
	store, err := c.tierStore(ctx, backend)
	if err != nil {
		return st, err
	}
	dir = clean(dir)
	if o.DryRun {
		return c.tierImportDry(ctx, store, backend, prefix, dir, o)
	}
	if err := c.MkdirAll(ctx, dir, 0o755); err != nil {
		return st, err
	}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(max(o.Parallel, 1))
	var made sync.Map // directories made or found, so each is made once
	made.Store(dir, true)
	count := importCounter(&mu, &st, &o)
	var batch *importBatch // of one directory, not sent yet
	flush := func() {
		if b := batch; b != nil {
			batch = nil
			g.Go(func() error {
				c.sendImportBatch(ctx, store, backend, b, !o.KeepChanged, &made, count)
				return nil
			})
		}
	}
	var prune *importPrune
	emptied := map[string]bool{} // directories of removed files; under mu
	if o.Delete {
		prune = &importPrune{walk: newImportWalk(ctx, c, prefix, dir), gone: func(f walkFile) {
			g.Go(func() error {
				tallyGone(&mu, &st, &o, emptied, f, c.forgetGone(ctx, store, backend, prefix, f, false))
				return nil
			})
		}}
	}
	listErr := store.List(ctx, prefix, func(obj tier.ObjectInfo) error {
		if prune != nil {
			prune.seen(obj.Key)
		}
		rest := strings.TrimPrefix(obj.Key, prefix)
		if rest == "" || strings.HasSuffix(rest, "/") {
			mu.Lock()
			st.Skipped++
			mu.Unlock()
			return nil
		}
		p := path.Join(dir, path.Clean("/"+rest))
		if !o.Checksums && obj.ETag != "" && obj.Size > 0 && !c.noTierImport.Load() {
			d := path.Dir(p)
			if batch != nil && batch.dir != d {
				flush()
			}
			if batch == nil {
				batch = &importBatch{dir: d}
			}
			batch.items = append(batch.items, importItem{path: p, obj: obj})
			if len(batch.items) == importBatchSize {
				flush()
			}
			return ctx.Err()
		}
		g.Go(func() error {
			count(p, obj, c.importObject(ctx, store, backend, obj, p, !o.KeepChanged, &made))
			return nil
		})
		return ctx.Err()
	})
	if prune != nil && listErr == nil {
		prune.end()
	}
	flush()
	g.Wait()
	if listErr != nil {
		return st, fmt.Errorf("tier import: list backend %q: %w", backend, listErr)
	}
	if prune != nil && prune.walk.err != nil {
		return st, fmt.Errorf("tier import: --delete: %w", prune.walk.err)
	}
	if len(emptied) > 0 {
		n, failed := c.removeEmptied(ctx, dir, emptied, o)
		st.RemovedDirs += n
		st.Failed += failed
	}
	if st.Failed > 0 {
		return st, fmt.Errorf("tier import: %d of %d objects failed", st.Failed, st.Failed+st.Files+st.Empty)
	}
	return st, nil
}

// importCounter returns the function that counts in st, under mu, what
// became (or, in a dry run, would become) of each object's file p, err
// being its outcome (nil: made; errImported and its kin: a file an
// earlier import made), and reports it through o.
func importCounter(mu *sync.Mutex, st *ImportStats, o *ImportOptions) func(p string, obj tier.ObjectInfo, err error) {
	return func(p string, obj tier.ObjectInfo, err error) {
		mu.Lock()
		report := o.Report != nil
		updated := false
		switch {
		case err == errImported:
			st.Present++
			report = false
		case err == errImportUpdated:
			st.Updated++
			err, updated = nil, true
		case err == errImportChanged:
			st.Changed++
			report = false
		case err == errImportOwn:
			st.Own++
			report = false
		case err != nil:
			st.Failed++
		case obj.Size == 0:
			st.Empty++
		default:
			st.Files++
			st.Bytes += obj.Size
		}
		mu.Unlock()
		switch {
		case updated && o.Updated != nil:
			o.Updated(p, obj.Size)
		case report:
			o.Report(p, obj.Size, err)
		}
	}
}

// removeEmptied removes each directory of dirs, below top, that is empty
// now, and then each directory above it that this leaves empty, up to
// top (which stays): the directories whose files an import with
// ImportOptions.Delete removed. A directory that is not empty (a file of
// the user's, one made since) stays. It returns how many it removed and
// how many removals failed otherwise (reported through o.Report).
func (c *Client) removeEmptied(ctx context.Context, top string, dirs map[string]bool, o ImportOptions) (removed, failed int) {
	deepest := make([]string, 0, len(dirs))
	for d := range dirs {
		deepest = append(deepest, d)
	}
	slices.SortFunc(deepest, func(a, b string) int {
		return cmp.Or(cmp.Compare(strings.Count(b, "/"), strings.Count(a, "/")), cmp.Compare(a, b))
	})
	gone := map[string]bool{}
	for _, d := range deepest {
		for ; d != top && strings.HasPrefix(d, strings.TrimSuffix(top, "/")+"/") && !gone[d]; d = path.Dir(d) {
			parent, name, err := c.nameParent(ctx, d)
			if err == nil {
				err = c.RmdirIno(ctx, parent, name)
			}
			if code := errs.CodeOf(err); code == errs.NotEmpty || code == errs.NotFound || code == errs.NotDir {
				break
			} else if err != nil {
				failed++
				if o.Report != nil {
					o.Report(d, 0, opErr("tier import: rmdir", d, err))
				}
				break
			}
			gone[d] = true
			removed++
			if o.Gone != nil {
				o.Gone(d+"/", true)
			}
		}
	}
	return removed, failed
}

// importBatchSize is the most objects one OpTierImport carries.
const importBatchSize = 256

// importBatch is objects whose files go in one directory.
type importBatch struct {
	dir   string
	items []importItem
}

type importItem struct {
	path   string
	obj    tier.ObjectInfo
	exists bool // a dry run's walk found a file with its key
}

// sendImportBatch makes the files of b in one request, or each on its own
// (reading it for its checksums) against a metadata service without
// OpTierImport, and counts each.
func (c *Client) sendImportBatch(ctx context.Context, store tier.Store, backend string, b *importBatch, refresh bool, made *sync.Map, count func(string, tier.ObjectInfo, error)) {
	fail := func(err error) {
		for _, it := range b.items {
			count(it.path, it.obj, opErr("tier import", it.path, err))
		}
	}
	if err := c.importDir(ctx, b.dir, made); err != nil {
		fail(err)
		return
	}
	a, err := c.resolve(ctx, b.dir, true)
	if err != nil {
		fail(err)
		return
	}
	resp, err := c.importBatchCall(ctx, wire.OpTierImport, a.Ino, backend, b, refresh)
	if errs.CodeOf(err) == errs.NotSupported {
		c.noTierImport.Store(true) // an older service: one object at a time
		for _, it := range b.items {
			count(it.path, it.obj, c.importObject(ctx, store, backend, it.obj, it.path, refresh, made))
		}
		return
	}
	if err != nil {
		fail(err)
		return
	}
	why := resp.Errors
	for i, it := range b.items {
		count(it.path, it.obj, importResult(resp.Results[i], it.path, &why))
	}
}

// importBatchCall sends the entries of b's objects for directory parent
// as op (OpTierImport, or OpTierImportDry) and returns the answer, one
// result per object.
func (c *Client) importBatchCall(ctx context.Context, op wire.Op, parent uint64, backend string, b *importBatch, refresh bool) (wire.TierImportResp, error) {
	req := &wire.TierImportReq{Parent: parent, Backend: backend, Mode: 0o644, Cred: c.cred(), Entries: make([]wire.TierImportEntry, len(b.items)), Refresh: refresh}
	for i, it := range b.items {
		req.Entries[i] = importEntry(it.path, it.obj)
	}
	var resp wire.TierImportResp
	err := c.metaCall(ctx, op, req, &resp)
	if err == nil && len(resp.Results) != len(b.items) {
		err = errs.New(errs.Internal, "client: tier import: %d results for %d objects", len(resp.Results), len(b.items))
	}
	return resp, err
}

// importResult is what result res of OpTierImport says of the file at p:
// nil if it was made, else why not (errImported and its kin for a file an
// earlier import made; an invalid entry takes the next reason of why).
func importResult(res uint8, p string, why *[]string) error {
	switch res {
	case wire.ImportMade:
		return nil
	case wire.ImportPresent:
		return errImported
	case wire.ImportUpdated:
		return errImportUpdated
	case wire.ImportChanged:
		return errImportChanged
	case wire.ImportOwn:
		return errImportOwn
	case wire.ImportExists:
		return errs.New(errs.Exists, "client: tier import: %s exists already (not replaced)", p)
	}
	msg := "refused"
	if len(*why) > 0 {
		msg, *why = (*why)[0], (*why)[1:]
	}
	return errs.New(errs.Invalid, "client: tier import: %s: %s", p, msg)
}

// importEntry is the OpTierImport entry of object o's file p.
func importEntry(p string, o tier.ObjectInfo) wire.TierImportEntry {
	return wire.TierImportEntry{Name: path.Base(p), Key: o.Key, Size: uint64(o.Size), Mtime: o.Modified.UnixNano(), ETag: o.ETag}
}

// importExisting asks the metadata service what the existing file p is to
// an import of object o (OpTierImport of one entry, without Refresh,
// which replaces no file): the import's own (errImportOwn), or another
// file (errs.Exists); if the name went meanwhile, the file is made then
// (nil).
func (c *Client) importExisting(ctx context.Context, backend, p string, o tier.ObjectInfo) error {
	err := c.importOne(ctx, backend, p, o, false)
	if errs.CodeOf(err) == errs.NotSupported {
		return errs.New(errs.Exists, "client: tier import: %s exists already (not replaced)", p)
	}
	return err
}

// refreshImported makes the file p that an earlier import made of object
// o (now another object, listed with an ETag) the new object, as a re-run
// from the listing does (OpTierImport with Refresh): its record pinned to
// the new ETag, its checksums taken by its first restore.
func (c *Client) refreshImported(ctx context.Context, backend, p string, o tier.ObjectInfo) error {
	err := c.importOne(ctx, backend, p, o, true)
	if errs.CodeOf(err) == errs.NotSupported {
		return errImported // an older service: as before
	}
	return err
}

// importOne sends object o's entry for file p alone (OpTierImport),
// with or without Refresh.
func (c *Client) importOne(ctx context.Context, backend, p string, o tier.ObjectInfo, refresh bool) error {
	a, err := c.resolve(ctx, path.Dir(p), true)
	if err != nil {
		return err
	}
	resp, err := c.importBatchCall(ctx, wire.OpTierImport, a.Ino, backend, &importBatch{items: []importItem{{path: p, obj: o}}}, refresh)
	switch {
	case errs.CodeOf(err) == errs.NotSupported:
		return err
	case err != nil:
		return opErr("tier import", p, err)
	}
	return importResult(resp.Results[0], p, &resp.Errors)
}

// importDir makes directory d (and those above it) once per import.
func (c *Client) importDir(ctx context.Context, d string, made *sync.Map) error {
	if mapHas(made, d) {
		return nil
	}
	if err := c.MkdirAll(ctx, d, 0o755); err != nil {
		return err
	}
	made.Store(d, true)
	return nil
}

// importObject makes the released file p for object o on its own, its
// record from one read of the object: the checksums, and o's ETag if any
// (a metadata service without OpTierImport also refuses a record without
// checksums).
func (c *Client) importObject(ctx context.Context, store tier.Store, backend string, o tier.ObjectInfo, p string, refresh bool, made *sync.Map) error {
	if err := c.importDir(ctx, path.Dir(p), made); err != nil {
		return err
	}
	// Refuse early, before reading the object, when the name is taken
	// (the rename below refuses a file made meanwhile).
	if fi, err := c.Lstat(ctx, p); err == nil {
		if fi.Mode().IsRegular() {
			if o.Size == 0 && fi.Size() == 0 {
				return errImported // an empty object's file has no record
			}
			r, err := c.hsmGet(ctx, fi.Attr().Ino)
			if err == nil && r.Gen == tier.ImportedGen && r.Backend == backend && r.Key == o.Key {
				if refresh && o.ETag != "" && !tier.SameImport(r, wire.HsmRecord{Size: uint64(o.Size), Mtime: o.Modified.UnixNano(), ETag: o.ETag}) {
					return c.refreshImported(ctx, backend, p, o)
				}
				return errImported
			}
			if err == nil && o.ETag != "" && o.Size > 0 {
				// The metadata service tells a file an import made
				// (ImportOwn) from another's; it changes neither.
				return c.importExisting(ctx, backend, p, o)
			}
		}
		return errs.New(errs.Exists, "client: tier import: %s exists already (not replaced)", p)
	} else if errs.CodeOf(err) != errs.NotFound {
		return err
	}
	if o.Size == 0 {
		f, err := c.OpenFile(ctx, p, O_WRONLY|O_CREATE|O_EXCL, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	}
	// The checksums, from one pass over the object (pinned to the listed
	// ETag, if any).
	rec := wire.HsmRecord{Backend: backend, Key: o.Key, Gen: tier.ImportedGen, Mtime: o.Modified.UnixNano(), ETag: o.ETag}
	sum := tier.NewSummer(tier.BlockSize)
	buf := make([]byte, min(o.Size, importPiece))
	for off := int64(0); off < o.Size; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), o.Size-off)]
		if _, err := store.GetRange(ctx, o.Key, off, b, o.ETag); err != nil {
			return err
		}
		sum.Write(b)
	}
	sum.Fill(&rec)
	if int64(rec.Size) != o.Size {
		return errs.New(errs.Busy, "client: object %s changed while it was imported (%d bytes, listed %d)", o.Key, rec.Size, o.Size)
	}

	parent, name, err := c.parent(ctx, p)
	if err != nil {
		return opErr("tier import", p, err)
	}
	var r [8]byte
	rand.Read(r[:])
	tmp := importTempPrefix + hex.EncodeToString(r[:])
	var a wire.Attr
	req := &wire.CreateReq{Parent: parent, Name: tmp, Mode: syscall.S_IFREG | 0o644, Cred: c.cred(), Exclusive: true}
	if err := c.metaCall(ctx, wire.OpCreate, req, &a); err != nil {
		return opErr("tier import", p, err)
	}
	if _, err := c.hsmUpdate(ctx, a.Ino, wire.HsmActImport, rec); err != nil {
		c.UnlinkIno(ctx, parent, tmp)
		return opErr("tier import", p, err)
	}
	if err := c.RenameIno(ctx, parent, tmp, parent, name, RenameNoReplace); err != nil {
		c.UnlinkIno(ctx, parent, tmp)
		return opErr("tier import", p, err)
	}
	return nil
}

func mapHas(m *sync.Map, k string) bool { _, ok := m.Load(k); return ok }
