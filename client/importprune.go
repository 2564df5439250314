package client

import (
	"cmp"
	"context"
	"path"
	"slices"
	"strings"
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
// order of their keys. Each directory is read whole when the walk enters
// it, so memory grows with the largest directory and the depth.
type importWalk struct {
	c      *Client
	ctx    context.Context
	prefix string
	stack  []walkFrame
	err    error
}

type walkFrame struct {
	ino     uint64
	path    string
	rel     string // below the import's directory: "" or ending in "/"
	entries []InodeDirEntry
	i       int
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
	w := &importWalk{c: c, ctx: ctx, prefix: prefix}
	a, err := c.resolve(ctx, dir, true)
	if err != nil {
		w.err = err
		return w
	}
	w.push(a.Ino, dir, "")
	return w
}

// push enters directory ino, reading its entries in key order.
func (w *importWalk) push(ino uint64, p, rel string) {
	f := walkFrame{ino: ino, path: p, rel: rel}
	cursor := ""
	for {
		page, err := w.c.readDirPage(w.ctx, &wire.ReadDirReq{Ino: ino, Cursor: cursor, Limit: 1024})
		if err != nil {
			w.err = opErr("tier import: walk", p, err)
			w.stack = nil
			return
		}
		f.entries = append(f.entries, page.Entries...)
		if page.EOF || len(page.Entries) == 0 {
			break
		}
		cursor = page.Cursor
	}
	slices.SortFunc(f.entries, func(a, b InodeDirEntry) int { return cmp.Compare(walkName(a), walkName(b)) })
	w.stack = append(w.stack, f)
}

// walkName is where an entry's keys sort among its siblings': a
// directory's as its name followed by "/".
func walkName(e InodeDirEntry) string {
	if e.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return e.Name + "/"
	}
	return e.Name
}

// peek returns the next file, without taking it; false at the end (or
// after an error: w.err).
func (w *importWalk) peek() (walkFile, bool) {
	for len(w.stack) > 0 && w.err == nil {
		top := &w.stack[len(w.stack)-1]
		if top.i == len(top.entries) {
			w.stack = w.stack[:len(w.stack)-1]
			continue
		}
		e := top.entries[top.i]
		switch {
		case e.Mode&syscall.S_IFMT == syscall.S_IFDIR:
			top.i++
			w.push(e.Ino, path.Join(top.path, e.Name), top.rel+e.Name+"/")
		case e.Mode&syscall.S_IFMT != syscall.S_IFREG || strings.HasPrefix(e.Name, importTempPrefix):
			top.i++
		default:
			return walkFile{key: w.prefix + top.rel + e.Name, path: path.Join(top.path, e.Name), parent: top.ino, name: e.Name, ino: e.Ino}, true
		}
	}
	return walkFile{}, false
}

// next takes the file peek returned.
func (w *importWalk) next() { w.stack[len(w.stack)-1].i++ }

// importPrune merges the listing's keys with the walk, handing each file
// whose key the listing lacks to gone.
type importPrune struct {
	walk *importWalk
	gone func(walkFile)
}

// seen takes the listing's next key: every file before it is not in the
// bucket (as listed), a file of that key is.
func (p *importPrune) seen(key string) {
	for {
		f, ok := p.walk.peek()
		if !ok || f.key > key {
			return
		}
		p.walk.next()
		if f.key == key {
			return
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
// its object is there.
func (c *Client) forgetGone(ctx context.Context, store tier.Store, backend, prefix string, f walkFile) error {
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
