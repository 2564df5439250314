package meta

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

func validXattrName(name string) error {
	switch {
	case name == "":
		return errs.New(errs.Invalid, "empty attribute name")
	case len(name) > MaxXattrName:
		return errs.New(errs.TooBig, "attribute name of %d bytes is over the limit of %d", len(name), MaxXattrName)
	case strings.IndexByte(name, 0) >= 0:
		return errs.New(errs.Invalid, "attribute name contains NUL")
	}
	return nil
}

// GetXattr returns the value of an extended attribute (errs.NoData if the
// inode has no such attribute).
func (s *Service) GetXattr(ctx context.Context, ino uint64, name string) ([]byte, error) {
	if err := validXattrName(name); err != nil {
		return nil, xattrErr("getxattr", ino, name, err)
	}
	var val []byte
	err := s.db.View(ctx, func(tx kv.Txn) error {
		v, err := tx.Get(xattrKey(ino, name))
		if err == nil {
			val = v
			return nil
		}
		if !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		if _, err := getInode(tx, ino); err != nil {
			return err
		}
		return errs.ErrNoData
	})
	if err != nil {
		return nil, xattrErr("getxattr", ino, name, err)
	}
	if val == nil {
		val = []byte{}
	}
	return val, nil
}

// SetXattr sets an extended attribute (name at most 255 bytes and value at
// most 64 KiB, else errs.TooBig). wire.XattrCreate fails with errs.Exists
// if it exists; wire.XattrReplace with errs.NoData if it does not.
func (s *Service) SetXattr(ctx context.Context, req *wire.XattrReq) error {
	if err := s.setXattr(ctx, req); err != nil {
		return xattrErr("setxattr", req.Ino, req.Name, err)
	}
	return nil
}

func (s *Service) setXattr(ctx context.Context, req *wire.XattrReq) error {
	if err := validXattrName(req.Name); err != nil {
		return err
	}
	switch {
	case len(req.Value) > MaxXattrValue:
		return errs.New(errs.TooBig, "attribute value of %d bytes is over the limit of %d", len(req.Value), MaxXattrValue)
	case req.Flags&^(wire.XattrCreate|wire.XattrReplace) != 0:
		return errs.New(errs.Invalid, "unknown xattr flags %#x", req.Flags)
	case req.Flags == wire.XattrCreate|wire.XattrReplace:
		return errs.New(errs.Invalid, "xattr flags CREATE and REPLACE together")
	}
	now := s.nowNs()
	policy := isPolicyXattr(req.Name)
	err := s.update(ctx, func(tx kv.Txn) error {
		n, err := getInode(tx, req.Ino)
		if err != nil {
			return err
		}
		key := xattrKey(req.Ino, req.Name)
		old, err := tx.Get(key)
		exists := err == nil
		if err != nil && !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		switch {
		case exists && req.Flags&wire.XattrCreate != 0:
			return errs.ErrExists
		case !exists && req.Flags&wire.XattrReplace != 0:
			return errs.ErrNoData
		}
		tx.Set(key, req.Value)
		n.Flags |= inoXattrs // its unlink must look for "x" keys
		if policy {
			if err := s.auditPolicy(ctx, tx, now, req.Ino, req.Name, old, req.Value, exists, true); err != nil {
				return err
			}
		}
		return touchCtime(tx, req.Ino, n, now)
	})
	if err == nil && policy {
		s.audited()
	}
	return err
}

// isPolicyXattr reports whether an extended attribute holds a directory
// policy of Sluice's (the tier policy, ADR 0017): its changes are audited.
func isPolicyXattr(name string) bool { return strings.HasPrefix(name, "trusted.sluice.") }

// auditPolicy appends the change of policy name of inode ino from old (if
// had) to new (if has) to the audit trail.
func (s *Service) auditPolicy(ctx context.Context, tx kv.Txn, now int64, ino uint64, name string, old, new []byte, had, has bool) error {
	text := func(v []byte, ok bool) string {
		if !ok {
			return "none"
		}
		return string(v)
	}
	return s.appendAudit(tx, &audit.Entry{Time: now, Op: audit.OpPolicy, Ino: ino, Name: name, Who: whoOf(ctx, nil),
		Changes: []audit.Change{{Field: "value", Old: text(old, had), New: text(new, has)}}})
}

// touchCtime sets an inode's ctime and writes its record if that is where
// the ctime lives.
func touchCtime(tx kv.Txn, ino uint64, n *inode, now int64) error {
	if err := setCtime(tx, ino, n, now); err != nil {
		return err
	}
	if !n.isDir() {
		tx.Set(inodeKey(ino), n.encode())
	}
	return nil
}

// ListXattr returns the names of an inode's extended attributes, sorted.
func (s *Service) ListXattr(ctx context.Context, ino uint64) ([]string, error) {
	var names []string
	err := s.db.View(ctx, func(tx kv.Txn) error {
		names = nil
		if _, err := getInode(tx, ino); err != nil {
			return err
		}
		p := xattrPrefix(ino)
		return tx.Scan(p, kv.PrefixEnd(p), 0, func(k, _ []byte) bool {
			names = append(names, string(k[len(p):]))
			return true
		})
	})
	if err != nil {
		return nil, inoErr("listxattr", ino, err)
	}
	return names, nil
}

// RemoveXattr removes an extended attribute (errs.NoData if missing).
func (s *Service) RemoveXattr(ctx context.Context, ino uint64, name string) error {
	if err := validXattrName(name); err != nil {
		return xattrErr("removexattr", ino, name, err)
	}
	now := s.nowNs()
	err := s.update(ctx, func(tx kv.Txn) error {
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		key := xattrKey(ino, name)
		old, err := tx.Get(key)
		if err != nil {
			if errors.Is(err, kv.ErrNotFound) {
				return errs.ErrNoData
			}
			return err
		}
		tx.Delete(key)
		if isPolicyXattr(name) {
			if err := s.auditPolicy(ctx, tx, now, ino, name, old, nil, true, false); err != nil {
				return err
			}
		}
		return touchCtime(tx, ino, n, now)
	})
	if err == nil && isPolicyXattr(name) {
		s.audited()
	}
	if err != nil {
		return xattrErr("removexattr", ino, name, err)
	}
	return nil
}

func xattrErr(op string, ino uint64, name string, err error) error {
	return fmt.Errorf("meta: %s inode %d attribute %q: %w", op, ino, name, err)
}
