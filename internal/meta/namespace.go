package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// entryErr wraps err with the operation and the directory entry it was on.
func entryErr(op string, parent uint64, name string, err error) error {
	return fmt.Errorf("meta: %s %d/%q: %w", op, parent, name, err)
}

// inoErr wraps err with the operation and the inode it was on.
func inoErr(op string, ino uint64, err error) error {
	return fmt.Errorf("meta: %s inode %d: %w", op, ino, err)
}

// validName checks a directory entry name.
func validName(name string) error {
	switch {
	case len(name) > MaxNameLen:
		return errs.New(errs.NameTooLong, "name of %d bytes is over the limit of %d", len(name), MaxNameLen)
	case name == "":
		return errs.New(errs.Invalid, "empty name")
	case name == "." || name == "..":
		return errs.New(errs.Invalid, "name %q is reserved", name)
	case strings.ContainsAny(name, "/\x00"):
		return errs.New(errs.Invalid, "name contains '/' or NUL")
	}
	return nil
}

// getInode reads an inode record.
func getInode(tx kv.Txn, ino uint64) (*inode, error) {
	v, err := tx.Get(inodeKey(ino))
	if err != nil {
		if errors.Is(err, kv.ErrNotFound) {
			return nil, errs.New(errs.NotFound, "no inode %d", ino)
		}
		return nil, err
	}
	return decodeInode(ino, v)
}

// getDir reads an inode record that must be a directory.
func getDir(tx kv.Txn, ino uint64) (*inode, error) {
	n, err := getInode(tx, ino)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, errs.New(errs.NotDir, "inode %d is not a directory", ino)
	}
	return n, nil
}

// lookup reads a directory entry; ok is false if there is none.
func lookup(tx kv.Txn, parent uint64, name string) (e dirent, ok bool, err error) {
	v, err := tx.Get(direntKey(parent, name))
	if err != nil {
		if errors.Is(err, kv.ErrNotFound) {
			return dirent{}, false, nil
		}
		return dirent{}, false, err
	}
	e, err = decodeDirent(v)
	return e, err == nil, err
}

// missingEntry explains why parent/name does not exist: the parent is
// missing or not a directory, or the entry is not there.
func missingEntry(tx kv.Txn, parent uint64, name string) error {
	if _, err := getDir(tx, parent); err != nil {
		return err
	}
	return errs.New(errs.NotFound, "no entry %q in directory %d", name, parent)
}

// mustLookup reads a directory entry that must exist.
func mustLookup(tx kv.Txn, parent uint64, name string) (dirent, error) {
	e, ok, err := lookup(tx, parent, name)
	if err != nil {
		return dirent{}, err
	}
	if !ok {
		return dirent{}, missingEntry(tx, parent, name)
	}
	return e, nil
}

// attrOf builds the attributes of inode n, reading a directory's times.
func attrOf(tx kv.Txn, ino uint64, n *inode) (wire.Attr, error) {
	a := wire.Attr{
		Ino: ino, Mode: n.Mode, Nlink: n.Nlink, Uid: n.Uid, Gid: n.Gid, Rdev: n.Rdev,
		Size: n.Size, Atime: n.Atime, Mtime: n.Mtime, Ctime: n.Ctime, Layout: n.Layout,
		Flags: n.Flags & inoChunks, InlineLen: n.InlineLen,
	}
	if mayBeTiered(n) {
		h, err := getHsm(tx, ino)
		if err != nil {
			return wire.Attr{}, err
		}
		if h.State == wire.HsmReleased {
			a.Flags |= wire.AttrReleased
		}
	}
	if n.isDir() {
		v, err := tx.Get(dirTimeKey(ino))
		switch {
		case err == nil:
			t, err := decodeDirTimes(ino, v)
			if err != nil {
				return wire.Attr{}, err
			}
			a.Mtime, a.Ctime = t.Mtime, t.Ctime
		case !errors.Is(err, kv.ErrNotFound):
			return wire.Attr{}, err
		}
	}
	return a, nil
}

// dirAttrAt returns the attributes of directory n (ino) whose times a
// transaction just set to now with touchDir: attrOf without reading them.
func dirAttrAt(ino uint64, n *inode, now int64) *wire.Attr {
	return &wire.Attr{
		Ino: ino, Mode: n.Mode, Nlink: n.Nlink, Uid: n.Uid, Gid: n.Gid, Rdev: n.Rdev,
		Size: n.Size, Atime: n.Atime, Mtime: now, Ctime: now, Layout: n.Layout,
	}
}

// touchDir sets a directory's mtime and ctime with a blind write: the
// transaction must not have read the key, so that concurrent changes of
// entries in one directory do not conflict.
func touchDir(tx kv.Txn, dir uint64, now int64) {
	tx.Set(dirTimeKey(dir), dirTimes{now, now}.encode())
}

// setCtime sets inode n's ctime. For a directory it lives in the "t" key,
// which is read here (so this conflicts with concurrent entry changes in
// that directory); for others the caller writes the record.
func setCtime(tx kv.Txn, ino uint64, n *inode, now int64) error {
	n.Ctime = now
	if !n.isDir() {
		return nil
	}
	t := dirTimes{n.Mtime, now}
	v, err := tx.Get(dirTimeKey(ino))
	if err == nil {
		old, err := decodeDirTimes(ino, v)
		if err != nil {
			return err
		}
		t.Mtime = old.Mtime
	} else if !errors.Is(err, kv.ErrNotFound) {
		return err
	}
	tx.Set(dirTimeKey(ino), t.encode())
	return nil
}

// deleteXattrs deletes every extended attribute of ino.
func deleteXattrs(tx kv.Txn, ino uint64) error {
	p := xattrPrefix(ino)
	var keys [][]byte
	err := tx.Scan(p, kv.PrefixEnd(p), 0, func(k, _ []byte) bool {
		keys = append(keys, bytes.Clone(k))
		return true
	})
	for _, k := range keys {
		tx.Delete(k)
	}
	return err
}

// freeResult says what a transaction freed, to be accounted after commit.
type freeResult struct {
	inodes  int  // inode records deleted
	garbage bool // a chunk removal was queued
}

// dropLink removes one link to non-directory inode n. When the last link
// goes, the inode, its xattrs and symlink target are deleted and, for a
// regular file with a layout, (ino, layout) is queued for chunk removal in
// the same transaction.
func dropLink(tx kv.Txn, ino uint64, n *inode, now int64, fr *freeResult) error {
	if n.Nlink > 1 {
		n.Nlink--
		n.Ctime = now
		tx.Set(inodeKey(ino), n.encode())
		return nil
	}
	tx.Delete(inodeKey(ino))
	if n.Mode&modeType == modeLink {
		tx.Delete(symlinkKey(ino))
	}
	if n.mayHaveXattrs() {
		if err := deleteXattrs(tx, ino); err != nil {
			return err
		}
	}
	if n.InlineLen > 0 {
		tx.Delete(inlineKey(ino))
	}
	if n.isReg() && n.mayHaveHsm() {
		// Its archived copy, if any, goes to the tier's delete queue.
		if err := hsmDropped(tx, ino, n.Layout); err != nil {
			return err
		}
	}
	// A file that never had chunks frees nothing on the targets.
	if n.isReg() && n.hasChunks() && len(n.Layout.Chains) > 0 {
		tx.Set(garbageKey(n.Layout.DataID(ino)), appendLayout(nil, &n.Layout))
		fr.garbage = true
	}
	fr.inodes++
	return nil
}

// removeDir deletes empty directory ino's records.
func removeDir(tx kv.Txn, ino uint64, fr *freeResult) error {
	tx.Delete(inodeKey(ino))
	tx.Delete(dirTimeKey(ino))
	tx.Delete(dirPoolKey(ino))
	fr.inodes++
	return deleteXattrs(tx, ino)
}

// isEmptyDir reports whether directory ino has no entries.
func isEmptyDir(tx kv.Txn, ino uint64) (bool, error) {
	p := direntPrefix(ino)
	empty := true
	err := tx.Scan(p, kv.PrefixEnd(p), 1, func(_, _ []byte) bool {
		empty = false
		return false
	})
	return empty, err
}

func (s *Service) account(fr freeResult) {
	if fr.inodes > 0 {
		s.inodeDelta.Add(-int64(fr.inodes))
	}
	if fr.garbage {
		s.kickGC()
	}
}

// Lookup returns the attributes of the entry name in directory parent.
func (s *Service) Lookup(ctx context.Context, parent uint64, name string) (wire.Attr, error) {
	if err := validName(name); err != nil {
		return wire.Attr{}, entryErr("lookup", parent, name, err)
	}
	var a wire.Attr
	err := s.db.View(ctx, func(tx kv.Txn) error {
		e, err := mustLookup(tx, parent, name)
		if err != nil {
			return err
		}
		n, err := getInode(tx, e.ino)
		if err != nil {
			return fmt.Errorf("entry names a missing inode: %w", err)
		}
		a, err = attrOf(tx, e.ino, n)
		return err
	})
	if err != nil {
		return wire.Attr{}, entryErr("lookup", parent, name, err)
	}
	return a, nil
}

// GetAttr returns an inode's attributes.
func (s *Service) GetAttr(ctx context.Context, ino uint64) (wire.Attr, error) {
	var a wire.Attr
	err := s.db.View(ctx, func(tx kv.Txn) error {
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		a, err = attrOf(tx, ino, n)
		return err
	})
	if err != nil {
		return wire.Attr{}, inoErr("getattr", ino, err)
	}
	return a, nil
}

// SetAttr changes the attributes selected by req.Valid and sets ctime to
// now (or req.Ctime with wire.SetCtime). Mode may carry type bits; only the
// permission bits (07777) are used. A size change is allowed on regular
// files only; the client truncates the chunks before sending it.
func (s *Service) SetAttr(ctx context.Context, req *wire.SetAttrReq) (wire.Attr, error) {
	now := s.nowNs()
	var a wire.Attr
	audited, cutReleased := false, false
	var fresh uint64 // a data ID for a released file cut to 0, allocated when one is needed
again:
	err := s.update(ctx, func(tx kv.Txn) error {
		audited, cutReleased = false, false
		n, err := getInode(tx, req.Ino)
		if err != nil {
			return err
		}
		unchanged := unchangedSince(n, req.IfMtime, req.IfSize)
		v := req.Valid
		if v&wire.SetSizeGrow != 0 && v&wire.SetSize != 0 && n.Size >= req.Size {
			v &^= wire.SetSize // already as long (fallocate)
		}
		if v&wire.SetSize != 0 {
			switch {
			case n.isDir():
				return errs.New(errs.IsDir, "cannot set the size of a directory")
			case !n.isReg():
				return errs.New(errs.Invalid, "cannot set the size of a file of type %#o", n.Mode&modeType)
			}
			if v&wire.SetIfCut != 0 {
				// The end of the truncate's cut (cut.go): writes commit
				// again once it is.
				c := cutOf(n)
				if err := c.end(req.Cut); err != nil {
					return err
				}
				c.into(n)
			}
			if v&wire.SetIfAt != 0 && (n.Mtime != req.AtMtime || n.Size != req.AtSize) {
				return errs.New(errs.Busy, "file changed since its chunks were cut (size %d, was %d): cut them again", n.Size, req.AtSize)
			}
			if v&wire.SetIfReleased != 0 {
				if cur, err := getHsm(tx, req.Ino); err != nil {
					return err
				} else if cur.State != wire.HsmReleased {
					return errs.New(errs.Busy, "file is no longer released (its restore finished): its chunks must be cut first")
				}
			}
			if cutReleased, err = hsmTruncate(tx, req.Ino, n, req.Size, fresh); err != nil {
				return err
			}
			if err := truncateInline(tx, req.Ino, n, req.Size); err != nil {
				return err
			}
			n.Size = req.Size
			if v&(wire.SetMtime|wire.SetMtimeNow) == 0 {
				n.Mtime = now
			}
		}
		if audited, err = s.changeOwnership(ctx, tx, req, n, now); err != nil {
			return err
		}
		ctime := now
		if v&wire.SetCtime != 0 {
			ctime = req.Ctime
		}
		if n.isDir() {
			t := dirTimes{Ctime: ctime}
			if v&(wire.SetMtime|wire.SetMtimeNow) == 0 {
				cur, err := attrOf(tx, req.Ino, n)
				if err != nil {
					return err
				}
				t.Mtime = cur.Mtime
			} else if v&wire.SetMtimeNow != 0 {
				t.Mtime = now
			} else {
				t.Mtime = req.Mtime
			}
			n.Mtime, n.Ctime = t.Mtime, t.Ctime
			tx.Set(dirTimeKey(req.Ino), t.encode())
		} else {
			switch {
			case v&wire.SetMtimeNow != 0:
				n.Mtime = now
			case v&wire.SetMtime != 0:
				n.Mtime = req.Mtime
			}
			n.Ctime = ctime
		}
		tx.Set(inodeKey(req.Ino), n.encode())
		a, err = attrOf(tx, req.Ino, n)
		if unchanged {
			a.Flags |= wire.AttrUnchanged
		}
		return err
	})
	if errors.Is(err, errNeedDataID) && fresh == 0 {
		if fresh, err = s.allocIno(ctx); err == nil {
			goto again
		}
	}
	if err != nil {
		return wire.Attr{}, inoErr("setattr", req.Ino, err)
	}
	if audited {
		s.audited()
	}
	if cutReleased {
		s.restores.cutToZero.Add(1)
	}
	return a, nil
}

// changeOwnership applies the mode, owner, group and access time that req
// changes to n (in memory; the caller writes n), and appends the audit
// entry of a mode, owner or group change to tx. It reports whether it did.
func (s *Service) changeOwnership(ctx context.Context, tx kv.Txn, req *wire.SetAttrReq, n *inode, now int64) (audited bool, err error) {
	v := req.Valid
	var changes []audit.Change
	if v&wire.SetMode != 0 {
		changes = append(changes, audit.Change{Field: "mode", Old: modeText(n.Mode), New: modeText(req.Mode)})
		n.Mode = n.Mode&modeType | req.Mode&modePerm
	}
	if v&wire.SetUid != 0 {
		changes = append(changes, audit.Change{Field: "uid", Old: strconv.FormatUint(uint64(n.Uid), 10), New: strconv.FormatUint(uint64(req.Uid), 10)})
		n.Uid = req.Uid
	}
	if v&wire.SetGid != 0 {
		changes = append(changes, audit.Change{Field: "gid", Old: strconv.FormatUint(uint64(n.Gid), 10), New: strconv.FormatUint(uint64(req.Gid), 10)})
		n.Gid = req.Gid
	}
	if changes != nil {
		audited = true
		if err := s.appendAudit(tx, &audit.Entry{Time: now, Op: audit.OpSetAttr, Ino: req.Ino, Who: whoOf(ctx, req.Cred), Changes: changes}); err != nil {
			return false, err
		}
	}
	switch {
	case v&wire.SetAtimeNow != 0:
		n.Atime = now
	case v&wire.SetAtime != 0:
		n.Atime = req.Atime
	}
	return audited, nil
}

// Create makes a regular file, or a device, FIFO or socket node when
// req.Mode has those type bits. Without req.Exclusive, an existing regular
// file's attributes are returned instead of errs.Exists. A regular file
// gets its layout now: req.Layout if its StripeSize is set, else the
// directory's default, else Options.DefaultLayout.
func (s *Service) Create(ctx context.Context, req *wire.CreateReq) (wire.Attr, error) {
	r, err := s.CreateEntry(ctx, req)
	return r.Attr, err
}

// CreateEntry is Create, returning also the directory's attributes as the
// create left them (none if the file existed).
func (s *Service) CreateEntry(ctx context.Context, req *wire.CreateReq) (wire.EntryResp, error) {
	r, err := s.create(ctx, req)
	if err != nil {
		return wire.EntryResp{}, entryErr("create", req.Parent, req.Name, err)
	}
	return r, nil
}

func (s *Service) create(ctx context.Context, req *wire.CreateReq) (wire.EntryResp, error) {
	if err := validName(req.Name); err != nil {
		return wire.EntryResp{}, err
	}
	typ := req.Mode & modeType
	switch typ {
	case 0:
		typ = modeReg
	case modeReg, modeFifo, modeChar, modeBlock, modeSocket:
	case modeDir:
		return wire.EntryResp{}, errs.New(errs.Invalid, "create cannot make a directory; use mkdir")
	default:
		return wire.EntryResp{}, errs.New(errs.Invalid, "create cannot make a file of type %#o", typ)
	}
	var pv placeView
	if typ == modeReg {
		var err error
		if pv, err = s.currentPlaceView(ctx); err != nil {
			return wire.EntryResp{}, err
		}
	}
	ino, err := s.allocIno(ctx)
	if err != nil {
		return wire.EntryResp{}, err
	}
	now := s.nowNs()
	var a wire.Attr
	var dir *wire.Attr
	var created bool
	var cut uint64 // an existing file's
	err = s.updatePlacing(ctx, &pv, func(tx kv.Txn) error {
		created, dir, cut = false, nil, 0
		parent, err := getDir(tx, req.Parent)
		if err != nil {
			return err
		}
		if e, ok, err := lookup(tx, req.Parent, req.Name); err != nil {
			return err
		} else if ok {
			if req.Exclusive || typ != modeReg {
				return errs.ErrExists
			}
			if e.mode == modeDir {
				return errs.New(errs.IsDir, "entry exists and is a directory")
			}
			if e.mode != modeReg {
				return errs.ErrExists
			}
			n, err := getInode(tx, e.ino)
			if err != nil {
				return err
			}
			cut = n.Cut // a writer that opens the file starts from it
			a, err = attrOf(tx, e.ino, n)
			return err
		}
		n := &inode{
			Mode: typ | req.Mode&modePerm, Nlink: 1, Uid: req.Cred.Uid, Gid: req.Cred.Gid,
			Atime: now, Mtime: now, Ctime: now, Flags: newInodeFlags,
		}
		if typ == modeChar || typ == modeBlock {
			n.Rdev = req.Rdev
		}
		if typ == modeReg {
			pool, err := dirPool(tx, req.Parent)
			if err != nil {
				return err
			}
			if n.Layout, err = s.fileLayout(req.Layout, parent.Layout, pool, pv, ino); err != nil {
				return err
			}
		}
		tx.Set(inodeKey(ino), n.encode())
		tx.Set(direntKey(req.Parent, req.Name), dirent{ino, typ}.encode())
		touchDir(tx, req.Parent, now)
		dir = dirAttrAt(req.Parent, parent, now)
		a, err = attrOf(tx, ino, n)
		created = true
		return err
	})
	if err != nil {
		return wire.EntryResp{}, err
	}
	if created {
		s.inodeDelta.Add(1)
	}
	return wire.EntryResp{Attr: a, Dir: dir, HasCut: typ == modeReg, Cut: cut}, nil
}

// Mkdir makes a directory. It inherits its parent's default layout.
// req.Mode's type bits, if any, must say directory.
func (s *Service) Mkdir(ctx context.Context, req *wire.CreateReq) (wire.Attr, error) {
	r, err := s.MkdirEntry(ctx, req)
	return r.Attr, err
}

// MkdirEntry is Mkdir, returning also the parent's attributes as the
// mkdir left them.
func (s *Service) MkdirEntry(ctx context.Context, req *wire.CreateReq) (wire.EntryResp, error) {
	r, err := s.mkdir(ctx, req)
	if err != nil {
		return wire.EntryResp{}, entryErr("mkdir", req.Parent, req.Name, err)
	}
	return r, nil
}

func (s *Service) mkdir(ctx context.Context, req *wire.CreateReq) (wire.EntryResp, error) {
	if err := validName(req.Name); err != nil {
		return wire.EntryResp{}, err
	}
	if t := req.Mode & modeType; t != 0 && t != modeDir {
		return wire.EntryResp{}, errs.New(errs.Invalid, "mkdir with file type %#o", t)
	}
	ino, err := s.allocIno(ctx)
	if err != nil {
		return wire.EntryResp{}, err
	}
	now := s.nowNs()
	var a wire.Attr
	var dir *wire.Attr
	err = s.update(ctx, func(tx kv.Txn) error {
		parent, err := getDir(tx, req.Parent)
		if err != nil {
			return err
		}
		if _, ok, err := lookup(tx, req.Parent, req.Name); err != nil {
			return err
		} else if ok {
			return errs.ErrExists
		}
		n := &inode{
			Mode: modeDir | req.Mode&modePerm, Nlink: 2, Uid: req.Cred.Uid, Gid: req.Cred.Gid,
			Atime: now, Mtime: now, Ctime: now, Flags: newInodeFlags, Parent: req.Parent,
		}
		// The default layout is inherited whole: stripes, replicas (they
		// were not, before 2026-11-25: files in a subdirectory of a
		// replicated directory got one replica), components.
		n.Layout.StripeSize, n.Layout.StripeCount = parent.Layout.StripeSize, parent.Layout.StripeCount
		n.Layout.Replicas = parent.Layout.Replicas
		n.Layout.Comps = parent.Layout.Comps
		switch pool, err := tx.Get(dirPoolKey(req.Parent)); {
		case err == nil:
			tx.Set(dirPoolKey(ino), pool)
		case !errors.Is(err, kv.ErrNotFound):
			return err
		}
		parent.Nlink++
		tx.Set(inodeKey(req.Parent), parent.encode())
		tx.Set(inodeKey(ino), n.encode())
		tx.Set(dirTimeKey(ino), dirTimes{now, now}.encode())
		tx.Set(direntKey(req.Parent, req.Name), dirent{ino, modeDir}.encode())
		touchDir(tx, req.Parent, now)
		dir = dirAttrAt(req.Parent, parent, now)
		a, err = attrOf(tx, ino, n)
		return err
	})
	if err != nil {
		return wire.EntryResp{}, err
	}
	s.inodeDelta.Add(1)
	return wire.EntryResp{Attr: a, Dir: dir}, nil
}

// Symlink makes a symbolic link to req.Target (at most MaxPathLen bytes).
func (s *Service) Symlink(ctx context.Context, req *wire.SymlinkReq) (wire.Attr, error) {
	a, err := s.symlink(ctx, req)
	if err != nil {
		return wire.Attr{}, entryErr("symlink", req.Parent, req.Name, err)
	}
	return a, nil
}

func (s *Service) symlink(ctx context.Context, req *wire.SymlinkReq) (wire.Attr, error) {
	if err := validName(req.Name); err != nil {
		return wire.Attr{}, err
	}
	switch {
	case len(req.Target) > MaxPathLen:
		return wire.Attr{}, errs.New(errs.NameTooLong, "symlink target of %d bytes is over the limit of %d", len(req.Target), MaxPathLen)
	case req.Target == "":
		return wire.Attr{}, errs.New(errs.NotFound, "empty symlink target")
	case strings.IndexByte(req.Target, 0) >= 0:
		return wire.Attr{}, errs.New(errs.Invalid, "symlink target contains NUL")
	}
	ino, err := s.allocIno(ctx)
	if err != nil {
		return wire.Attr{}, err
	}
	now := s.nowNs()
	var a wire.Attr
	err = s.update(ctx, func(tx kv.Txn) error {
		if _, err := getDir(tx, req.Parent); err != nil {
			return err
		}
		if _, ok, err := lookup(tx, req.Parent, req.Name); err != nil {
			return err
		} else if ok {
			return errs.ErrExists
		}
		n := &inode{
			Mode: modeLink | 0o777, Nlink: 1, Uid: req.Cred.Uid, Gid: req.Cred.Gid,
			Size: uint64(len(req.Target)), Atime: now, Mtime: now, Ctime: now, Flags: newInodeFlags,
		}
		tx.Set(inodeKey(ino), n.encode())
		tx.Set(symlinkKey(ino), []byte(req.Target))
		tx.Set(direntKey(req.Parent, req.Name), dirent{ino, modeLink}.encode())
		touchDir(tx, req.Parent, now)
		a, err = attrOf(tx, ino, n)
		return err
	})
	if err != nil {
		return wire.Attr{}, err
	}
	s.inodeDelta.Add(1)
	return a, nil
}

// Readlink returns a symbolic link's target.
func (s *Service) Readlink(ctx context.Context, ino uint64) (string, error) {
	var target string
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		target, err = readlinkTx(tx, ino)
		return err
	})
	if err != nil {
		return "", inoErr("readlink", ino, err)
	}
	return target, nil
}

func readlinkTx(tx kv.Txn, ino uint64) (string, error) {
	n, err := getInode(tx, ino)
	if err != nil {
		return "", err
	}
	if n.Mode&modeType != modeLink {
		return "", errs.New(errs.Invalid, "not a symbolic link")
	}
	v, err := tx.Get(symlinkKey(ino))
	if err != nil {
		if errors.Is(err, kv.ErrNotFound) {
			return "", errs.New(errs.Corruption, "symlink %d has no target record", ino)
		}
		return "", err
	}
	return string(v), nil
}

// Unlink removes a non-directory entry. When the inode's last link goes it
// is deleted, and a regular file's chunks are queued for removal.
func (s *Service) Unlink(ctx context.Context, parent uint64, name string) error {
	_, err := s.UnlinkEntry(ctx, parent, name)
	return err
}

// UnlinkEntry is Unlink, returning also the directory's attributes as the
// unlink left them.
func (s *Service) UnlinkEntry(ctx context.Context, parent uint64, name string) (*wire.Attr, error) {
	if err := validName(name); err != nil {
		return nil, entryErr("unlink", parent, name, err)
	}
	now := s.nowNs()
	who := whoOf(ctx, nil)
	var fr freeResult
	var dir *wire.Attr
	err := s.update(ctx, func(tx kv.Txn) error {
		fr = freeResult{}
		p, err := getDir(tx, parent)
		if err != nil {
			return err
		}
		e, err := mustLookup(tx, parent, name)
		if err != nil {
			return err
		}
		if e.mode == modeDir {
			return errs.New(errs.IsDir, "entry is a directory")
		}
		n, err := getInode(tx, e.ino)
		if err != nil {
			return err
		}
		tx.Delete(direntKey(parent, name))
		touchDir(tx, parent, now)
		dir = dirAttrAt(parent, p, now)
		if err := s.appendAudit(tx, &audit.Entry{Time: now, Op: audit.OpUnlink, Ino: e.ino, Parent: parent, Name: name, Who: who}); err != nil {
			return err
		}
		return dropLink(tx, e.ino, n, now, &fr)
	})
	if err != nil {
		return nil, entryErr("unlink", parent, name, err)
	}
	s.audited()
	s.account(fr)
	return dir, nil
}

// Rmdir removes an empty directory.
func (s *Service) Rmdir(ctx context.Context, parent uint64, name string) error {
	_, err := s.RmdirEntry(ctx, parent, name)
	return err
}

// RmdirEntry is Rmdir, returning also the parent's attributes as the
// rmdir left them.
func (s *Service) RmdirEntry(ctx context.Context, parent uint64, name string) (*wire.Attr, error) {
	if err := validName(name); err != nil {
		return nil, entryErr("rmdir", parent, name, err)
	}
	now := s.nowNs()
	who := whoOf(ctx, nil)
	var fr freeResult
	var dir *wire.Attr
	err := s.update(ctx, func(tx kv.Txn) error {
		fr = freeResult{}
		e, err := mustLookup(tx, parent, name)
		if err != nil {
			return err
		}
		if e.mode != modeDir {
			return errs.New(errs.NotDir, "entry is not a directory")
		}
		if empty, err := isEmptyDir(tx, e.ino); err != nil {
			return err
		} else if !empty {
			return errs.ErrNotEmpty
		}
		p, err := getInode(tx, parent)
		if err != nil {
			return err
		}
		p.Nlink--
		tx.Set(inodeKey(parent), p.encode())
		tx.Delete(direntKey(parent, name))
		touchDir(tx, parent, now)
		dir = dirAttrAt(parent, p, now)
		if err := s.appendAudit(tx, &audit.Entry{Time: now, Op: audit.OpRmdir, Ino: e.ino, Parent: parent, Name: name, Who: who}); err != nil {
			return err
		}
		return removeDir(tx, e.ino, &fr)
	})
	if err != nil {
		return nil, entryErr("rmdir", parent, name, err)
	}
	s.audited()
	s.account(fr)
	return dir, nil
}

// Link makes newParent/newName another link to ino, which must not be a
// directory (errs.NotPermitted).
func (s *Service) Link(ctx context.Context, ino, newParent uint64, newName string) (wire.Attr, error) {
	if err := validName(newName); err != nil {
		return wire.Attr{}, entryErr("link", newParent, newName, err)
	}
	now := s.nowNs()
	var a wire.Attr
	err := s.update(ctx, func(tx kv.Txn) error {
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		if n.isDir() {
			return errs.New(errs.NotPermitted, "hard link to directory %d", ino)
		}
		if _, err := getDir(tx, newParent); err != nil {
			return err
		}
		if _, ok, err := lookup(tx, newParent, newName); err != nil {
			return err
		} else if ok {
			return errs.ErrExists
		}
		n.Nlink++
		n.Ctime = now
		tx.Set(inodeKey(ino), n.encode())
		tx.Set(direntKey(newParent, newName), dirent{ino, n.Mode & modeType}.encode())
		touchDir(tx, newParent, now)
		a, err = attrOf(tx, ino, n)
		return err
	})
	if err != nil {
		return wire.Attr{}, entryErr("link", newParent, newName, fmt.Errorf("to inode %d: %w", ino, err))
	}
	return a, nil
}

// Resolve walks a slash-separated path from the root and returns the
// attributes of what it names. "." and ".." components navigate; symlinks
// in intermediate components are followed, and in the last one if follow
// is set (or the path ends in "/"), relative to the directory holding the
// link, at most MaxSymlinks in all (then errs.Loop).
func (s *Service) Resolve(ctx context.Context, path string, follow bool) (wire.Attr, error) {
	if len(path) > MaxPathLen {
		return wire.Attr{}, fmt.Errorf("meta: resolve %.64q...: %w", path,
			errs.New(errs.NameTooLong, "path of %d bytes is over the limit of %d", len(path), MaxPathLen))
	}
	var a wire.Attr
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		a, err = resolveTx(tx, path, follow)
		return err
	})
	if err != nil {
		return wire.Attr{}, fmt.Errorf("meta: resolve %q: %w", path, err)
	}
	return a, nil
}

// ResolveRead is Resolve that also returns, in the same transaction, the
// inline bytes of the regular file the path names (inline.go) and its
// extended attribute xattr if named and present: a small file is opened
// and read with one request.
func (s *Service) ResolveRead(ctx context.Context, path string, follow bool, xattr string) (wire.ResolveReadResp, error) {
	if len(path) > MaxPathLen {
		return wire.ResolveReadResp{}, fmt.Errorf("meta: resolve %.64q...: %w", path,
			errs.New(errs.NameTooLong, "path of %d bytes is over the limit of %d", len(path), MaxPathLen))
	}
	if xattr != "" {
		if err := validXattrName(xattr); err != nil {
			return wire.ResolveReadResp{}, fmt.Errorf("meta: resolve %q: %w", path, err)
		}
	}
	var r wire.ResolveReadResp
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		var n *inode
		r = wire.ResolveReadResp{}
		if r.Attr, n, err = resolveInodeTx(tx, path, follow); err != nil {
			return err
		}
		if r.Attr.Mode&modeType == modeReg {
			r.Cut = n.Cut // a writer that opens the file starts from it
		}
		if err := readExtras(tx, &r); err != nil {
			return err
		}
		if xattr != "" {
			v, err := tx.Get(xattrKey(r.Attr.Ino, xattr))
			switch {
			case err == nil:
				r.HasXattr, r.Xattr = true, append([]byte(nil), v...)
			case !errors.Is(err, kv.ErrNotFound):
				return err
			}
		}
		return nil
	})
	if err != nil {
		return wire.ResolveReadResp{}, fmt.Errorf("meta: resolve %q: %w", path, err)
	}
	return r, nil
}

// OpenIno returns the attributes of inode ino for an open (close-to-open:
// every open asks), with what the open's first read would otherwise ask
// for separately: a regular file's inline bytes and, for a released
// file, its HSM record.
func (s *Service) OpenIno(ctx context.Context, ino uint64) (wire.ResolveReadResp, error) {
	var r wire.ResolveReadResp
	// The feed's position before the read: every change published before
	// it committed before the read's snapshot.
	epoch, cursor := s.feed.position(time.Now())
	err := s.db.View(ctx, func(tx kv.Txn) error {
		r = wire.ResolveReadResp{FeedEpoch: epoch, FeedCursor: cursor}
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		if r.Attr, err = attrOf(tx, ino, n); err != nil {
			return err
		}
		r.Cut = n.Cut
		return readExtras(tx, &r)
	})
	if err != nil {
		return wire.ResolveReadResp{}, inoErr("getattr", ino, err)
	}
	return r, nil
}

// readExtras adds to r, whose Attr is set, a regular file's inline bytes
// and, for a released file, its HSM record.
func readExtras(tx kv.Txn, r *wire.ResolveReadResp) error {
	if r.Attr.Mode&modeType != modeReg {
		return nil
	}
	if r.Attr.InlineLen > 0 {
		data, err := getInline(tx, r.Attr.Ino, r.Attr.InlineLen)
		if err != nil {
			return err
		}
		r.Data = data // getInline's bytes are the caller's (kv.Txn.Get)
	}
	if r.Attr.Flags&wire.AttrReleased != 0 {
		h, err := getHsm(tx, r.Attr.Ino)
		if err != nil {
			return err
		}
		if h.State == wire.HsmReleased {
			r.Hsm = &h
		}
	}
	return nil
}

func resolveTx(tx kv.Txn, path string, follow bool) (wire.Attr, error) {
	a, _, err := resolveInodeTx(tx, path, follow)
	return a, err
}

// resolveInodeTx is resolveTx that also returns the inode record of what
// path names.
func resolveInodeTx(tx kv.Txn, path string, follow bool) (wire.Attr, *inode, error) {
	comps := strings.Split(path, "/")
	// The walk knows each component's type from its directory entry, so
	// it loads an inode record only where it needs one: for "..", and for
	// the last component's attributes.
	cur, curMode := uint64(RootIno), uint32(modeDir)
	var n *inode // cur's record, once loaded
	load := func() (err error) {
		if n == nil {
			n, err = getInode(tx, cur)
		}
		return err
	}
	links := 0
	for len(comps) > 0 {
		c := comps[0]
		comps = comps[1:]
		if curMode != modeDir {
			return wire.Attr{}, nil, errs.New(errs.NotDir, "path component (inode %d) is not a directory", cur)
		}
		switch c {
		case "", ".":
			continue
		case "..":
			if err := load(); err != nil {
				return wire.Attr{}, nil, err
			}
			cur, n = n.Parent, nil
			continue
		}
		if len(c) > MaxNameLen {
			return wire.Attr{}, nil, errs.New(errs.NameTooLong, "path component of %d bytes is over the limit of %d", len(c), MaxNameLen)
		}
		e, ok, err := lookup(tx, cur, c)
		if err != nil {
			return wire.Attr{}, nil, err
		}
		if !ok {
			return wire.Attr{}, nil, errs.New(errs.NotFound, "no entry %q in directory %d", c, cur)
		}
		if e.mode == modeLink && (len(comps) > 0 || follow) {
			if links++; links > MaxSymlinks {
				return wire.Attr{}, nil, errs.New(errs.Loop, "more than %d symbolic links", MaxSymlinks)
			}
			target, err := readlinkTx(tx, e.ino)
			if err != nil {
				return wire.Attr{}, nil, err
			}
			if strings.HasPrefix(target, "/") {
				cur, curMode, n = RootIno, modeDir, nil
			}
			comps = append(strings.Split(target, "/"), comps...)
			continue
		}
		cur, curMode, n = e.ino, e.mode, nil
	}
	if err := load(); err != nil {
		return wire.Attr{}, nil, err
	}
	a, err := attrOf(tx, cur, n)
	return a, n, err
}

const (
	defaultReadDirLimit = 1024
	maxReadDirLimit     = 8192
	maxReadDirBytes     = 2 << 20 // keeps a page well under wire.MaxBody
)

// ReadDir returns up to req.Limit entries (default 1024, at most 8192, and
// fewer if the encoded page would pass 2 MiB) of directory req.Ino whose
// names sort after req.Cursor, in byte order of the names. Each page is one
// snapshot; the cursor is the last name returned, so entries that stay in
// the directory across pages are listed exactly once.
func (s *Service) ReadDir(ctx context.Context, req *wire.ReadDirReq) (wire.ReadDirResp, error) {
	withXattr := req.Plus && req.Xattr != ""
	if withXattr {
		if err := validXattrName(req.Xattr); err != nil {
			return wire.ReadDirResp{}, inoErr("readdir", req.Ino, err)
		}
	}
	limit := int(req.Limit)
	if limit <= 0 {
		limit = defaultReadDirLimit
	}
	limit = min(limit, maxReadDirLimit)
	var resp wire.ReadDirResp
	err := s.db.View(ctx, func(tx kv.Txn) error {
		resp = wire.ReadDirResp{Cursor: req.Cursor}
		if _, err := getDir(tx, req.Ino); err != nil {
			return err
		}
		prefix := direntPrefix(req.Ino)
		start := prefix
		if req.Cursor != "" {
			start = append(direntKey(req.Ino, req.Cursor), 0)
		}
		var bad error
		size, more := 0, false
		err := tx.Scan(start, kv.PrefixEnd(prefix), limit+1, func(k, v []byte) bool {
			if len(resp.Entries) == limit || size > maxReadDirBytes {
				more = true
				return false
			}
			e, err := decodeDirent(v)
			if err != nil {
				bad = err
				return false
			}
			name := string(k[len(prefix):])
			size += len(name) + 24
			resp.Entries = append(resp.Entries, wire.DirEntry{Name: name, Ino: e.ino, Mode: e.mode})
			return true
		})
		if err != nil {
			return err
		}
		if bad != nil {
			return bad
		}
		resp.EOF = !more
		if req.Plus {
			for i := range resp.Entries {
				de := &resp.Entries[i]
				n, err := getInode(tx, de.Ino)
				if err != nil {
					return fmt.Errorf("entry %q: %w", de.Name, err)
				}
				a, err := attrOf(tx, de.Ino, n)
				if err != nil {
					return err
				}
				de.Attr = &a
				size += 80 + 4*len(a.Layout.Chains)
				if withXattr {
					// The value an S3 listing needs of every object
					// (its ETag, in the gateway's metadata), in the
					// same transaction as the attributes it vouches for.
					v, err := tx.Get(xattrKey(de.Ino, req.Xattr))
					switch {
					case err == nil:
						resp.Xattrs = append(resp.Xattrs, wire.DirXattr{Has: true, Value: v})
						size += len(v)
					case errors.Is(err, kv.ErrNotFound):
						resp.Xattrs = append(resp.Xattrs, wire.DirXattr{})
					default:
						return fmt.Errorf("entry %q: %w", de.Name, err)
					}
				}
				if size > 2*maxReadDirBytes {
					resp.Entries, resp.EOF = resp.Entries[:i+1], false
					break
				}
			}
		}
		if len(resp.Entries) > 0 {
			resp.Cursor = resp.Entries[len(resp.Entries)-1].Name
		}
		return nil
	})
	if err != nil {
		return wire.ReadDirResp{}, inoErr("readdir", req.Ino, err)
	}
	return resp, nil
}
