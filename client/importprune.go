package client

import (
	"cmp"
	"context"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/tier"
	"github.com/sluice-fs/sluice/internal/wire"
)

// An import with ImportOptions.Delete merges the bucket's listing with a
// walk of the import's directory in the same order: S3 lists keys in byte
// order, and the walk gives the regular files below the directory in the
// byte order of the keys an import would have made them of (the prefix,
// then the path below the directory; a directory's files come where its
// name followed by "/" sorts). A file whose key is not in the listing is a
// candidate: if its HSM record says an import made it of an object of the
// backend under the prefix, and a HEAD of that object's key (which is what
// decides, so that a listing in another order, a key that the import
// cleaned into another path, or a file renamed since cannot remove a file
// whose object is there) finds nothing, the metadata service removes it
// in one transaction while it is still that import, released and not
// being restored (OpTierForget); a restored one keeps its bytes and becomes
// dirty.

// errImportRemoved and errImportOrphaned say what became of the file of an
// object gone from the bucket: removed, or kept (restored or being
// restored).
var (
	errImportRemoved  = errs.New(errs.NotFound, "client: tier import: the object is gone from the bucket: its file was removed")
	errImportOrphaned = errs.New(errs.NotFound, "client: tier import: the object is gone from the bucket: its file was restored and is kept")
)

// importWalk yields the regular files below an import's directory in the
// order of their keys. It reads each directory a page at a time (in name
// order, as the metadata service gives it) and holds back only the
// subdirectories whose keys ("NAME/") sort after the next entry's name
// (siblings named NAME followed by a byte below "/", as "d1.x" after
// "d1"): memory stays at a page and those few per level, whatever the
// directories' sizes.
type importWalk struct {
	// read returns the page of directory ino's entries after cursor
	// (the client's listing; a test's tree).
	read   func(ino uint64, cursor string) (DirPage, error)
	prefix string
	stack  []*walkFrame
	peeked *walkFile
	err    error
}

// walkFrame is a directory being walked.
type walkFrame struct {
	ino     uint64
	path    string
	rel     string // below the import's directory: "" or ending in "/"
	page    []InodeDirEntry
	i       int             // the next entry of page
	cursor  string          // where the next page starts
	eof     bool            // no page after this one
	pending []InodeDirEntry // subdirectories not entered yet, in key order
}

// walkFile is a regular file the walk found, with the key an import of it
// would have had.
type walkFile struct {
	key    string
	path   string
	parent uint64
	name   string
	ino    uint64
}

func newImportWalk(ctx context.Context, c *Client, prefix, dir string) *importWalk {
	w := &importWalk{prefix: prefix, read: func(ino uint64, cursor string) (DirPage, error) {
		return c.readDirPage(ctx, &wire.ReadDirReq{Ino: ino, Cursor: cursor, Limit: 1024})
	}}
	a, err := c.resolve(ctx, dir, true)
	if err != nil {
		w.err = err
		return w
	}
	w.stack = []*walkFrame{{ino: a.Ino, path: dir}}
	return w
}

// isDirEntry says whether e is a directory.
func isDirEntry(e InodeDirEntry) bool { return e.Mode&syscall.S_IFMT == syscall.S_IFDIR }

// nextEntry returns f's next entry in key order (a directory's key is its
// name followed by "/"), reading pages as needed; false at the end.
func (w *importWalk) nextEntry(f *walkFrame) (InodeDirEntry, bool) {
	for {
		if f.i == len(f.page) && !f.eof {
			page, err := w.read(f.ino, f.cursor)
			if err != nil {
				w.err = opErr("tier import: walk", f.path, err)
				return InodeDirEntry{}, false
			}
			f.page, f.i, f.cursor = page.Entries, 0, page.Cursor
			f.eof = page.EOF || len(page.Entries) == 0
			continue
		}
		if f.i == len(f.page) {
			if len(f.pending) == 0 {
				return InodeDirEntry{}, false
			}
			d := f.pending[0]
			f.pending = f.pending[1:]
			return d, true
		}
		// Every entry left has a key at least e's name.
		e := f.page[f.i]
		if len(f.pending) > 0 && f.pending[0].Name+"/" < e.Name {
			d := f.pending[0]
			f.pending = f.pending[1:]
			return d, true
		}
		f.i++
		if !isDirEntry(e) {
			return e, true
		}
		at, _ := slices.BinarySearchFunc(f.pending, e.Name+"/", func(d InodeDirEntry, k string) int { return cmp.Compare(d.Name+"/", k) })
		f.pending = slices.Insert(f.pending, at, e)
	}
}

// peek returns the next file, without taking it; false at the end (or
// after an error: w.err).
func (w *importWalk) peek() (walkFile, bool) {
	for w.peeked == nil && len(w.stack) > 0 && w.err == nil {
		top := w.stack[len(w.stack)-1]
		e, ok := w.nextEntry(top)
		switch {
		case !ok:
			w.stack = w.stack[:len(w.stack)-1]
		case isDirEntry(e):
			w.stack = append(w.stack, &walkFrame{ino: e.Ino, path: path.Join(top.path, e.Name), rel: top.rel + e.Name + "/"})
		case e.Mode&syscall.S_IFMT == syscall.S_IFREG && !strings.HasPrefix(e.Name, importTempPrefix):
			w.peeked = &walkFile{key: w.prefix + top.rel + e.Name, path: path.Join(top.path, e.Name), parent: top.ino, name: e.Name, ino: e.Ino}
		}
	}
	if w.err != nil || w.peeked == nil {
		w.stack = nil
		return walkFile{}, false
	}
	return *w.peeked, true
}

// next takes the file peek returned.
func (w *importWalk) next() { w.peeked = nil }

// importPrune merges the listing's keys with the walk, handing each file
// whose key the listing lacks to gone.
type importPrune struct {
	walk *importWalk
	gone func(walkFile)
}

// seen takes the listing's next key: every file before it is not in the
// bucket (as listed), a file of that key is (then seen says true).
func (p *importPrune) seen(key string) bool {
	for {
		f, ok := p.walk.peek()
		if !ok || f.key > key {
			return false
		}
		p.walk.next()
		if f.key == key {
			return true
		}
		p.gone(f)
	}
}

// end takes the end of the listing: every file left is not in the bucket.
func (p *importPrune) end() {
	for {
		f, ok := p.walk.peek()
		if !ok {
			return
		}
		p.walk.next()
		p.gone(f)
	}
}

// forgetGone removes file f if an import made it of an object of backend
// under prefix that is gone from the bucket (store), or keeps it
// (OpTierForget). It returns nil when the file is not such an import, or
// its object is there. With dry it changes nothing and says what it
// would do (a released file removed, an archived one kept; it cannot
// tell a file whose restore runs, which the removal would keep).
func (c *Client) forgetGone(ctx context.Context, store tier.Store, backend, prefix string, f walkFile, dry bool) error {
	rec, err := c.hsmGet(ctx, f.ino)
	switch {
	case errs.CodeOf(err) == errs.NotFound:
		return nil
	case err != nil:
		return opErr("tier import: hsm state", f.path, err)
	case rec.Gen != tier.ImportedGen || rec.Backend != backend || !strings.HasPrefix(rec.Key, prefix):
		return nil
	case rec.State != wire.HsmReleased && rec.State != wire.HsmArchived:
		return nil // resident, or written since its restore: the user's
	}
	if _, _, err := store.Head(ctx, rec.Key); err == nil {
		return nil
	} else if errs.CodeOf(err) != errs.NotFound {
		return opErr("tier import: head "+rec.Key, f.path, err)
	}
	if dry {
		if rec.State == wire.HsmReleased {
			return errImportRemoved
		}
		return errImportOrphaned
	}
	req := &wire.TierForgetReq{Parent: f.parent, Name: f.name, Backend: backend, Key: rec.Key, Size: rec.Size, Mtime: rec.Mtime, ETag: rec.ETag, Cred: c.cred()}
	var resp wire.TierForgetResp
	if err := c.metaCall(ctx, wire.OpTierForget, req, &resp); err != nil {
		if errs.CodeOf(err) == errs.NotSupported {
			err = errs.New(errs.NotSupported, "the metadata service is older than --delete")
		}
		return opErr("tier import: remove the file of a deleted object", f.path, err)
	}
	switch resp.Result {
	case wire.ForgetRemoved:
		return errImportRemoved
	case wire.ForgetKept:
		return errImportOrphaned
	}
	return nil
}

// tallyGone counts in st (under mu) what forgetGone said of file f, notes
// the directory of a removed file in emptied (if not nil), and hands the
// file to o.Gone (removed or kept) or its error to o.Report.
func tallyGone(mu *sync.Mutex, st *ImportStats, o *ImportOptions, emptied map[string]bool, f walkFile, err error) {
	mu.Lock()
	switch err {
	case nil:
	case errImportRemoved:
		st.Removed++
		if emptied != nil {
			emptied[path.Dir(f.path)] = true
		}
	case errImportOrphaned:
		st.Orphaned++
	default:
		st.Failed++
	}
	mu.Unlock()
	switch {
	case err == errImportRemoved || err == errImportOrphaned:
		if o.Gone != nil {
			o.Gone(f.path, err == errImportRemoved)
		}
	case err != nil && o.Report != nil:
		o.Report(f.path, 0, err)
	}
}
