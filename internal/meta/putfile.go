package meta

import (
	"context"
	"fmt"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// PutFile makes req.Name in the directory at req.Dir a new regular file
// holding req.Data inline and req.Xattrs, replacing a non-directory of
// that name (unless wire.PutNoReplace): the create, the write, the xattrs
// and the rename over the old file of a small S3 PUT in one transaction,
// which also resolves the directory. With wire.PutSync it returns once
// the change is durable. The reply carries the new file's attributes and
// the directory's.
func (s *Service) PutFile(ctx context.Context, req *wire.PutFileReq) (wire.EntryResp, error) {
	r, err := s.putFile(ctx, req)
	if err != nil {
		return wire.EntryResp{}, fmt.Errorf("meta: putfile %s/%q: %w", req.Dir, req.Name, err)
	}
	return r, nil
}

func (s *Service) putFile(ctx context.Context, req *wire.PutFileReq) (wire.EntryResp, error) {
	if err := validName(req.Name); err != nil {
		return wire.EntryResp{}, err
	}
	if req.Flags&^(wire.PutNoReplace|wire.PutSync) != 0 {
		return wire.EntryResp{}, errs.New(errs.Invalid, "unknown putfile flags %#x", req.Flags)
	}
	if len(req.Data) > s.inlMax {
		return wire.EntryResp{}, errs.New(errs.TooBig, "%d bytes do not fit in the %d bytes a file may keep inline", len(req.Data), max(s.inlMax, 0))
	}
	for _, x := range req.Xattrs {
		if err := validXattrName(x.Name); err != nil {
			return wire.EntryResp{}, err
		}
		if len(x.Value) > MaxXattrValue {
			return wire.EntryResp{}, errs.New(errs.TooBig, "attribute value of %d bytes is over the limit of %d", len(x.Value), MaxXattrValue)
		}
	}
	pv, err := s.currentPlaceView(ctx)
	if err != nil {
		return wire.EntryResp{}, err
	}
	ino, err := s.allocIno(ctx)
	if err != nil {
		return wire.EntryResp{}, err
	}
	now := s.nowNs()
	mtime := req.Mtime
	if mtime == 0 {
		mtime = now
	}
	who := whoOf(ctx, &req.Cred)
	var r wire.EntryResp
	var fr freeResult
	replaced := false
	err = s.updatePlacing(ctx, &pv, func(tx kv.Txn) error {
		r, fr, replaced = wire.EntryResp{}, freeResult{}, false
		da, err := resolveTx(tx, req.Dir, true)
		if err != nil {
			return err
		}
		dirIno := da.Ino
		dir, err := getDir(tx, dirIno)
		if err != nil {
			return err
		}
		old, exists, err := lookup(tx, dirIno, req.Name)
		if err != nil {
			return err
		}
		if exists {
			switch {
			case req.Flags&wire.PutNoReplace != 0:
				return errs.ErrExists
			case old.mode == modeDir:
				return errs.New(errs.IsDir, "cannot replace directory %q with a file", req.Name)
			}
			on, err := getInode(tx, old.ino)
			if err != nil {
				return err
			}
			if err := s.appendAudit(tx, &audit.Entry{Time: now, Op: audit.OpUnlink, Ino: old.ino, Parent: dirIno, Name: req.Name, Who: who}); err != nil {
				return err
			}
			if err := dropLink(tx, old.ino, on, now, &fr); err != nil {
				return err
			}
			replaced = true
		}
		n := &inode{
			Mode: modeReg | req.Mode&modePerm, Nlink: 1, Uid: req.Cred.Uid, Gid: req.Cred.Gid,
			Atime: now, Mtime: mtime, Ctime: now, Flags: newInodeFlags, Size: uint64(len(req.Data)),
		}
		pool, err := dirPool(tx, dirIno)
		if err != nil {
			return err
		}
		if n.Layout, err = s.fileLayout(n.Layout, dir.Layout, pool, pv, ino); err != nil {
			return err
		}
		setInline(tx, ino, n, req.Data)
		for _, x := range req.Xattrs {
			tx.Set(xattrKey(ino, x.Name), x.Value)
			n.Flags |= inoXattrs
		}
		tx.Set(inodeKey(ino), n.encode())
		tx.Set(direntKey(dirIno, req.Name), dirent{ino, modeReg}.encode())
		touchDir(tx, dirIno, now)
		r.Dir = dirAttrAt(dirIno, dir, now)
		r.Attr, err = attrOf(tx, ino, n)
		return err
	})
	if err != nil {
		return wire.EntryResp{}, err
	}
	s.inodeDelta.Add(1)
	if replaced {
		s.audited()
		s.account(fr)
	}
	if req.Flags&wire.PutSync != 0 {
		if err := s.Sync(ctx); err != nil {
			return wire.EntryResp{}, err
		}
	}
	return r, nil
}
