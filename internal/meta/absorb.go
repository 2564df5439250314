package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// The checkpoint absorb policy (ADR 0013). A directory's own policy lives
// in its "K" key, apart from the inode record, and applies to everything
// below it up to a directory with a policy of its own. Files whose data a
// client holds in its local staging area, acknowledged but not yet on the
// targets, have an "S" key per (file, client). A rename in a directory
// under the policy is refused with errs.Busy (ErrStagedPending) while any
// file in the scope it commits is staged: a checkpoint is never exposed
// before every shard of it is durable on the targets.

// absorbRecordVersion is the first byte of a "K" value and of an "S" value.
const absorbRecordVersion = 1

// maxStaged bounds the "S" keys one rename check reads.
const maxStaged = 1 << 20

// ErrStagedPending is the error of a rename that must wait for staged
// files to drain. Clients retry it (or queue the rename, ADR 0013).
var ErrStagedPending = errs.New(errs.Busy, "meta: rename waits for staged files below to drain to the targets")

func absorbKey(dir uint64) []byte { return inoKey(pfxAbsorb, dir) }

func stagedKey(ino uint64, owner string) []byte {
	return append(inoKey(pfxStaged, ino), owner...)
}

func encodeAbsorb(mode uint8) []byte { return []byte{absorbRecordVersion, mode} }

// absorbText is a stored policy as the audit trail shows it.
func absorbText(v []byte) []byte {
	switch {
	case len(v) == 2 && v[1] == wire.AbsorbOn:
		return []byte("on")
	case len(v) == 2 && v[1] == wire.AbsorbOff:
		return []byte("off")
	}
	return v
}

func decodeAbsorb(dir uint64, v []byte) (uint8, error) {
	if len(v) != 2 || v[0] != absorbRecordVersion || v[1] == wire.AbsorbInherit || v[1] > wire.AbsorbOff {
		return 0, errs.New(errs.Corruption, "meta: absorb policy of directory %d is malformed (% x)", dir, v)
	}
	return v[1], nil
}

// absorbPolicy walks from dir to the root and returns the nearest policy.
func absorbPolicy(tx kv.Txn, dir uint64) (wire.AbsorbPolicy, error) {
	ino := dir
	for range maxDepth {
		v, err := tx.Get(absorbKey(ino))
		switch {
		case err == nil:
			mode, err := decodeAbsorb(ino, v)
			return wire.AbsorbPolicy{Mode: mode, From: ino}, err
		case !errors.Is(err, kv.ErrNotFound):
			return wire.AbsorbPolicy{}, err
		}
		n, err := getDir(tx, ino)
		if err != nil {
			return wire.AbsorbPolicy{}, err
		}
		if n.Parent == ino || n.Parent == 0 {
			return wire.AbsorbPolicy{Mode: wire.AbsorbOff}, nil
		}
		ino = n.Parent
	}
	return wire.AbsorbPolicy{}, errs.New(errs.Corruption, "meta: directory %d: parent chain longer than %d", dir, maxDepth)
}

// GetAbsorb returns the absorb policy in force for directory dir.
func (s *Service) GetAbsorb(ctx context.Context, dir uint64) (wire.AbsorbPolicy, error) {
	var p wire.AbsorbPolicy
	err := s.db.View(ctx, func(tx kv.Txn) (err error) {
		p, err = absorbPolicy(tx, dir)
		return err
	})
	if err != nil {
		return wire.AbsorbPolicy{}, inoErr("getabsorb", dir, err)
	}
	return p, nil
}

// SetAbsorb sets directory dir's own policy; AbsorbInherit removes it.
func (s *Service) SetAbsorb(ctx context.Context, dir uint64, mode uint8) error {
	if mode > wire.AbsorbOff {
		return inoErr("setabsorb", dir, errs.New(errs.Invalid, "unknown absorb mode %d", mode))
	}
	now := s.nowNs()
	err := s.update(ctx, func(tx kv.Txn) error {
		if _, err := getDir(tx, dir); err != nil {
			return err
		}
		old, err := tx.Get(absorbKey(dir))
		had := err == nil
		if err != nil && !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		var nv []byte
		if mode == wire.AbsorbInherit {
			tx.Delete(absorbKey(dir))
		} else {
			nv = encodeAbsorb(mode)
			tx.Set(absorbKey(dir), nv)
		}
		return s.auditPolicy(ctx, tx, now, dir, "absorb", absorbText(old), absorbText(nv), had, mode != wire.AbsorbInherit)
	})
	if err != nil {
		return inoErr("setabsorb", dir, err)
	}
	s.audited()
	return nil
}

// StagedAdd records that owner holds acknowledged data of file ino in its
// staging area. It is durable against a crash of the machine when it
// returns: a rename must never overtake it.
func (s *Service) StagedAdd(ctx context.Context, ino uint64, owner string) error {
	if owner == "" || len(owner) > MaxNameLen {
		return inoErr("stagedadd", ino, errs.New(errs.Invalid, "staging owner of %d bytes", len(owner)))
	}
	err := s.update(ctx, func(tx kv.Txn) error {
		tx.RequireSync()
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		if !n.isReg() {
			return errs.New(errs.Invalid, "inode %d is not a regular file", ino)
		}
		tx.Set(stagedKey(ino, owner), []byte{absorbRecordVersion})
		return nil
	})
	if err != nil {
		return inoErr("stagedadd", ino, err)
	}
	return nil
}

// StagedDone removes the mark of StagedAdd (nothing if there is none).
func (s *Service) StagedDone(ctx context.Context, ino uint64, owner string) error {
	err := s.update(ctx, func(tx kv.Txn) error {
		tx.Delete(stagedKey(ino, owner))
		return nil
	})
	if err != nil {
		return inoErr("stageddone", ino, err)
	}
	return nil
}

// StagedList returns every staged file.
func (s *Service) StagedList(ctx context.Context) (wire.StagedListResp, error) {
	var r wire.StagedListResp
	err := s.db.View(ctx, func(tx kv.Txn) error {
		r.Files = r.Files[:0]
		var derr error
		err := scanStaged(tx, func(ino uint64, owner string) bool {
			r.Files = append(r.Files, wire.StagedReq{Ino: ino, Owner: owner})
			return true
		}, &derr)
		if err == nil {
			err = derr
		}
		return err
	})
	if err != nil {
		return wire.StagedListResp{}, fmt.Errorf("meta: list staged files: %w", err)
	}
	return r, nil
}

func scanStaged(tx kv.Txn, fn func(ino uint64, owner string) bool, derr *error) error {
	p := []byte{pfxStaged}
	return tx.Scan(p, kv.PrefixEnd(p), maxStaged, func(k, _ []byte) bool {
		if len(k) < 10 {
			*derr = errs.New(errs.Corruption, "meta: staged key % x is too short", k)
			return false
		}
		return fn(binary.BigEndian.Uint64(k[1:9]), string(k[9:]))
	})
}

// checkStaged refuses (ErrStagedPending) a rename of src out of directory
// parent into newParent while a file in the scope it commits is staged:
// the source's subtree for a directory, the parent directory's subtree for
// anything else (the shards beside a DCP ".metadata"). Only renames from
// or into a directory under the absorb policy are checked, and with no
// staged file anywhere the check is one empty scan.
func checkStaged(tx kv.Txn, parent, newParent uint64, src dirent) error {
	staged := make(map[uint64]bool)
	var derr error
	if err := scanStaged(tx, func(ino uint64, _ string) bool { staged[ino] = true; return true }, &derr); err != nil {
		return err
	}
	if derr != nil {
		return derr
	}
	if len(staged) == 0 {
		return nil
	}
	p, err := absorbPolicy(tx, parent)
	if err != nil {
		return err
	}
	if p.Mode != wire.AbsorbOn && newParent != parent {
		if p, err = absorbPolicy(tx, newParent); err != nil {
			return err
		}
	}
	if p.Mode != wire.AbsorbOn {
		return nil
	}
	if staged[src.ino] {
		return ErrStagedPending
	}
	root := parent
	if src.mode == modeDir {
		root = src.ino
	}
	dirs := []uint64{root}
	for len(dirs) > 0 {
		d := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		pfx := direntKey(d, "")
		found := false
		err := tx.Scan(pfx, kv.PrefixEnd(pfx), 0, func(_, v []byte) bool {
			e, err := decodeDirent(v)
			if err != nil {
				derr = err
				return false
			}
			if staged[e.ino] {
				found = true
				return false
			}
			if e.mode == modeDir {
				dirs = append(dirs, e.ino)
			}
			return true
		})
		switch {
		case err != nil:
			return err
		case derr != nil:
			return derr
		case found:
			return ErrStagedPending
		}
	}
	return nil
}
