package meta

import (
	"context"
	"fmt"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/tier"
	"github.com/sluice-fs/sluice/internal/wire"
)

// MaxImportBatch is the most entries one OpTierImport takes.
const MaxImportBatch = 1024

// importEntryRecord is the HSM record of an object imported from a
// listing, checked by hsmStep as OpHsmUpdate's HsmActImport checks one:
// the pure decision both ways of importing share.
func importEntryRecord(backend string, it *wire.TierImportEntry) (wire.HsmRecord, error) {
	r := wire.HsmRecord{Backend: backend, Key: it.Key, Gen: tier.ImportedGen, Size: it.Size, Mtime: it.Mtime,
		BlockSize: tier.BlockSize, ETag: it.ETag}
	next, _, err := hsmStep(wire.HsmRecord{}, hsmFile{Reg: true}, &wire.HsmUpdateReq{Action: wire.HsmActImport, Record: r})
	return next, err
}

// importedBefore says whether the existing file whose record is cur is
// the import of object key of backend (a re-run of the same import).
func importedBefore(cur wire.HsmRecord, backend, key string) bool {
	return cur.State != wire.HsmResident && cur.Gen == tier.ImportedGen && cur.Backend == backend && cur.Key == key
}

// importAgain decides what a re-run of an import does with the file an
// earlier import made of an entry's object (importedBefore): cur is the
// file's HSM record and lease, fresh the record the entry makes, refresh
// the request's wish, now the time (ns). It returns the entry's result and
// the file's next record, or ok false to leave it as it is. Only a file
// released (no bytes on the targets) whose restore lease nobody holds
// follows an object that changed in the bucket: it takes fresh (and the
// object's size and mtime). A restored (archived) one keeps its bytes and
// becomes dirty: its copy in the bucket is gone, so it must be archived
// again (to a key of its own) before it can be released.
func importAgain(cur wire.HsmRecord, lease restoreLease, fresh wire.HsmRecord, refresh bool, now int64) (result uint8, next wire.HsmRecord, ok bool) {
	switch {
	case !refresh || tier.SameImport(cur, fresh):
		return wire.ImportPresent, cur, false
	case cur.State == wire.HsmArchived:
		cur.State = wire.HsmDirty
		return wire.ImportChanged, cur, true
	case cur.State != wire.HsmReleased || (lease.Owner != 0 && lease.Expires > now):
		return wire.ImportChanged, cur, false
	}
	return wire.ImportUpdated, fresh, true
}

// TierImport makes a released file in directory req.Parent for each
// entry that names no existing file (up to 256 of them per transaction;
// with etcd 24: an error after the first transaction leaves those before
// it done, which a new request counts as ImportPresent): its size and
// mtime the object's, its HSM record pinned to the object's ETag
// (docs/tier.md). An existing name is never replaced: it counts as
// imported before when it is the import of the same object (with
// req.Refresh, of the object as it is now: importAgain), as a file of its
// own when an import made it but it is not the import of an object any
// more (ImportOwn), else as existing.
func (s *Service) TierImport(ctx context.Context, req *wire.TierImportReq) (wire.TierImportResp, error) {
	r, err := s.tierImport(ctx, req, false)
	if err != nil {
		return wire.TierImportResp{}, fmt.Errorf("meta: tier import into inode %d: %w", req.Parent, err)
	}
	return r, nil
}

// TierImportDry answers what TierImport would answer to req, in read-only
// transactions: it changes nothing (an import's dry run).
func (s *Service) TierImportDry(ctx context.Context, req *wire.TierImportReq) (wire.TierImportResp, error) {
	r, err := s.tierImport(ctx, req, true)
	if err != nil {
		return wire.TierImportResp{}, fmt.Errorf("meta: tier import dry run in inode %d: %w", req.Parent, err)
	}
	return r, nil
}

func (s *Service) tierImport(ctx context.Context, req *wire.TierImportReq, dry bool) (wire.TierImportResp, error) {
	if len(req.Entries) > MaxImportBatch {
		return wire.TierImportResp{}, errs.New(errs.TooBig, "%d entries in one import request, at most %d", len(req.Entries), MaxImportBatch)
	}
	var resp wire.TierImportResp
	resp.Results = make([]uint8, len(req.Entries))
	recs := make([]wire.HsmRecord, len(req.Entries))
	valid := 0
	for i := range req.Entries {
		it := &req.Entries[i]
		err := validName(it.Name)
		if err == nil {
			recs[i], err = importEntryRecord(req.Backend, it)
		}
		if err != nil {
			resp.Results[i] = wire.ImportInvalid
			resp.Errors = append(resp.Errors, fmt.Sprintf("%q: %v", it.Name, err))
			continue
		}
		valid++
	}
	if valid == 0 {
		return resp, nil
	}
	pv, err := s.currentPlaceView(ctx)
	if err != nil {
		return wire.TierImportResp{}, err
	}
	// Inode numbers for every valid entry; those of names found to exist
	// stay unused (numbers are never reused anyway). A dry run makes no
	// file.
	inos := make([]uint64, len(req.Entries))
	for i := range req.Entries {
		if resp.Results[i] == wire.ImportInvalid || dry {
			continue
		}
		if inos[i], err = s.allocIno(ctx); err != nil {
			return wire.TierImportResp{}, err
		}
	}
	// One transaction per group of entries: an etcd transaction holds
	// at most 128 operations by default (kv.EtcdOptions.MaxTxnOps), and
	// each entry takes a read, and three writes when its file is made.
	group := importTxnEntries
	if s.shared {
		group = importTxnEntriesEtcd
	}
	for lo := 0; lo < len(req.Entries); lo += group {
		hi := min(lo+group, len(req.Entries))
		if err := s.importGroup(ctx, &pv, req, lo, hi, inos, recs, &resp, dry); err != nil {
			return wire.TierImportResp{}, err
		}
	}
	return resp, nil
}

// Entries per transaction of an import: with the embedded engine, and
// with etcd.
const (
	importTxnEntries     = 256
	importTxnEntriesEtcd = 24
)

// importGroup carries out entries [lo, hi) of req in one transaction;
// with dry, it only decides (in a read-only transaction).
func (s *Service) importGroup(ctx context.Context, pv *placeView, req *wire.TierImportReq, lo, hi int, inos []uint64, recs []wire.HsmRecord, resp *wire.TierImportResp, dry bool) error {
	now := s.nowNs()
	made := 0
	txn := func(fn func(kv.Txn) error) error { return s.updatePlacing(ctx, pv, fn) }
	if dry {
		txn = func(fn func(kv.Txn) error) error { return s.db.View(ctx, fn) }
	}
	err := txn(func(tx kv.Txn) error {
		made = 0
		if err := usableBackend(tx, req.Backend); err != nil {
			return err
		}
		parent, err := getDir(tx, req.Parent)
		if err != nil {
			return err
		}
		pool, err := dirPool(tx, req.Parent)
		if err != nil {
			return err
		}
		for i := lo; i < hi; i++ {
			if resp.Results[i] == wire.ImportInvalid {
				continue
			}
			it := &req.Entries[i]
			e, ok, err := lookup(tx, req.Parent, it.Name)
			if err != nil {
				return err
			}
			if ok {
				resp.Results[i] = wire.ImportExists
				if e.mode == modeReg {
					cur, lease, err := getHsmLease(tx, e.ino)
					if err != nil {
						return err
					}
					switch {
					case importedBefore(cur, req.Backend, it.Key):
						res, next, ok := importAgain(cur, lease, recs[i], req.Refresh, now)
						resp.Results[i] = res
						if dry {
							break
						}
						if ok && res == wire.ImportUpdated {
							n, err := getInode(tx, e.ino)
							if err != nil {
								return err
							}
							n.Size, n.Mtime, n.Ctime = it.Size, it.Mtime, now
							tx.Set(inodeKey(e.ino), n.encode())
							// An expired lease's chunks (a restore
							// that died) are collected.
							leaseGone(tx, lease, restoreLease{}, n.Layout)
						}
						if ok {
							putHsm(tx, e.ino, next, nil)
						}
					case cur.State != wire.HsmResident && cur.Gen == tier.ImportedGen:
						// Another object's import: it exists.
					default:
						// A file an import made that is of its own
						// since is kept, not counted as another's.
						n, err := getInode(tx, e.ino)
						if err != nil {
							return err
						}
						if n.Flags&inoImported != 0 {
							resp.Results[i] = wire.ImportOwn
						}
					}
				}
				continue
			}
			if dry {
				resp.Results[i] = wire.ImportMade
				continue
			}
			ino := inos[i]
			n := &inode{
				Mode: modeReg | req.Mode&modePerm, Nlink: 1, Uid: req.Cred.Uid, Gid: req.Cred.Gid,
				Atime: now, Mtime: it.Mtime, Ctime: now, Size: it.Size,
				// Its bytes count as in chunks (which a restore
				// writes), so that attributes show it released.
				Flags: newInodeFlags | inoChunks | inoHsm | inoImported,
			}
			if n.Layout, err = s.fileLayout(placement.Layout{}, parent.Layout, pool, *pv, ino); err != nil {
				return err
			}
			tx.Set(inodeKey(ino), n.encode())
			tx.Set(direntKey(req.Parent, it.Name), dirent{ino, modeReg}.encode())
			putHsm(tx, ino, recs[i], nil)
			resp.Results[i] = wire.ImportMade
			made++
		}
		if made > 0 {
			touchDir(tx, req.Parent, now)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.inodeDelta.Add(int64(made))
	return nil
}

// forgetGone decides what becomes of a file an earlier import made of an
// object that is gone from the bucket (OpTierForget): cur is the file's HSM
// record and lease, want the record the client found (backend, key, size,
// ETag, mtime), nlink the file's links, now the time (ns). It returns the
// result and, with change, the file's next record (remove: the file is
// removed instead). Only a released file, still the import of that very
// object, whose lease nobody holds and which has no other name goes: its
// bytes are nowhere any more, so every read of it would fail. A restored
// (archived) one keeps its bytes and becomes dirty (its copy is gone, so
// it must be archived again before a release); a dirty one, one being
// restored and one with other links are kept as they are.
func forgetGone(cur wire.HsmRecord, lease restoreLease, want wire.HsmRecord, nlink uint32, now int64) (result uint8, next wire.HsmRecord, change, remove bool) {
	switch {
	case !importedBefore(cur, want.Backend, want.Key) || !tier.SameImport(cur, want):
		return wire.ForgetOther, cur, false, false
	case cur.State == wire.HsmArchived:
		cur.State = wire.HsmDirty
		return wire.ForgetKept, cur, true, false
	case cur.State != wire.HsmReleased || (lease.Owner != 0 && lease.Expires > now) || nlink > 1:
		return wire.ForgetKept, cur, false, false
	}
	return wire.ForgetRemoved, wire.HsmRecord{}, false, true
}

// TierForget removes the file req names, which an import made of an object
// that is gone from the bucket, or keeps it (forgetGone), in one
// transaction: a re-run of the import with --delete.
func (s *Service) TierForget(ctx context.Context, req *wire.TierForgetReq) (wire.TierForgetResp, error) {
	if err := validName(req.Name); err != nil {
		return wire.TierForgetResp{}, entryErr("tier forget", req.Parent, req.Name, err)
	}
	want := wire.HsmRecord{Backend: req.Backend, Key: req.Key, Size: req.Size, Mtime: req.Mtime, ETag: req.ETag}
	now := s.nowNs()
	who := whoOf(ctx, &req.Cred)
	var fr freeResult
	var resp wire.TierForgetResp
	err := s.update(ctx, func(tx kv.Txn) error {
		fr = freeResult{}
		resp.Result = wire.ForgetOther
		if _, err := getDir(tx, req.Parent); err != nil {
			return err
		}
		e, ok, err := lookup(tx, req.Parent, req.Name)
		if err != nil || !ok || e.mode != modeReg {
			return err
		}
		n, err := getInode(tx, e.ino)
		if err != nil {
			return err
		}
		cur, lease, err := getHsmLease(tx, e.ino)
		if err != nil {
			return err
		}
		res, next, change, remove := forgetGone(cur, lease, want, n.Nlink, now)
		resp.Result = res
		switch {
		case change:
			putHsm(tx, e.ino, next, nil)
		case remove:
			tx.Delete(direntKey(req.Parent, req.Name))
			touchDir(tx, req.Parent, now)
			if err := s.appendAudit(tx, &audit.Entry{Time: now, Op: audit.OpUnlink, Ino: e.ino, Parent: req.Parent, Name: req.Name, Who: who}); err != nil {
				return err
			}
			return dropLink(tx, e.ino, n, now, &fr)
		}
		return nil
	})
	if err != nil {
		return wire.TierForgetResp{}, entryErr("tier forget", req.Parent, req.Name, err)
	}
	if resp.Result == wire.ForgetRemoved {
		s.audited()
		s.account(fr)
	}
	return resp, nil
}
