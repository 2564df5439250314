package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// The object tier's records (docs/tier.md, docs/format.md): backends ("B"),
// HSM records of files ("H") and the queue of objects to delete ("O"). Each
// value is a version byte (tierRecordVersion) and the wire encoding of its
// message. The inode record is untouched: a file's HSM state lives in its
// "H" key, read with the inode where attributes are built.

const tierRecordVersion = 1

func tierKey(name string) []byte { return append([]byte{pfxTier}, name...) }

// tierRemovingKey marks a backend whose removal is under way: no archive
// or import may name it from then on, so that the removal's scan of the
// records that name it cannot miss one (TierSet).
func tierRemovingKey(name string) []byte { return append([]byte{pfxTierRm}, name...) }

// usableBackend checks, in tx, that backend exists and is not being
// removed: what a new record naming it needs.
func usableBackend(tx kv.Txn, backend string) error {
	if _, err := tx.Get(tierKey(backend)); errors.Is(err, kv.ErrNotFound) {
		return errs.New(errs.NotFound, "no tier backend %q", backend)
	} else if err != nil {
		return err
	}
	if _, err := tx.Get(tierRemovingKey(backend)); err == nil {
		return errs.New(errs.Busy, "tier backend %q is being removed (sluice tier rm); archive to another backend", backend)
	} else if !errors.Is(err, kv.ErrNotFound) {
		return err
	}
	return nil
}

func hsmKey(ino uint64) []byte { return inoKey(pfxHsm, ino) }

func tierDelKey(ino, gen uint64) []byte {
	return binary.BigEndian.AppendUint64(inoKey(pfxTierDel, ino), gen)
}

func encodeTierRecord(m wire.Message) []byte {
	return append([]byte{tierRecordVersion}, wire.Marshal(m)...)
}

func decodeTierRecord(what string, b []byte, m wire.Message) error {
	if len(b) == 0 || b[0] != tierRecordVersion {
		return errs.New(errs.Corruption, "meta: %s record: version %d, want %d", what, firstByte(b), tierRecordVersion)
	}
	if err := wire.Unmarshal(b[1:], m); err != nil {
		return errs.New(errs.Corruption, "meta: %s record: %v", what, err)
	}
	return nil
}

// getHsm reads file ino's HSM record; State HsmResident when it has none.
func getHsm(tx kv.Txn, ino uint64) (wire.HsmRecord, error) {
	r, _, err := getHsmLease(tx, ino)
	return r, err
}

// hsmLeaseVersion is the version byte of an HSM record followed by a
// restore lease (ADR 0016); records without one keep tierRecordVersion.
// hsmLeaseDataVersion is that of one whose lease has a data ID (ADR 0023);
// hsmLeaseETagVersion that of one whose record has an ETag (an object
// imported from a listing), which follows the lease's data ID.
const (
	hsmLeaseVersion     = 2
	hsmLeaseDataVersion = 3
	hsmLeaseETagVersion = 4
)

// getHsmLease reads file ino's HSM record and its restore lease.
func getHsmLease(tx kv.Txn, ino uint64) (wire.HsmRecord, restoreLease, error) {
	v, err := tx.Get(hsmKey(ino))
	if errors.Is(err, kv.ErrNotFound) {
		return wire.HsmRecord{}, restoreLease{}, nil
	}
	if err != nil {
		return wire.HsmRecord{}, restoreLease{}, err
	}
	return decodeHsm(ino, v)
}

func decodeHsm(ino uint64, v []byte) (wire.HsmRecord, restoreLease, error) {
	var r wire.HsmRecord
	var l restoreLease
	if len(v) > 0 && (v[0] == hsmLeaseVersion || v[0] == hsmLeaseDataVersion || v[0] == hsmLeaseETagVersion) {
		d := wire.Decoder{B: v[1:]}
		r.DecodeBody(&d)
		l.Owner, l.Gen, l.Epoch, l.Expires = d.U64(), d.U64(), d.U64(), d.I64()
		if v[0] != hsmLeaseVersion {
			l.Data = d.U64()
		}
		if v[0] == hsmLeaseETagVersion {
			r.ETag = d.String()
		}
		if d.Err() != nil || d.More() {
			return r, l, errs.New(errs.Corruption, "meta: inode %d HSM record with lease: bad encoding", ino)
		}
		return r, l, nil
	}
	err := decodeTierRecord(fmt.Sprintf("inode %d HSM", ino), v, &r)
	return r, l, err
}

// putHsm writes (or, for State HsmResident, deletes) file ino's record and
// queues drop, an object no longer needed. Any restore lease goes.
func putHsm(tx kv.Txn, ino uint64, r wire.HsmRecord, drop *wire.TierQueueItem) {
	putHsmLease(tx, ino, r, restoreLease{}, drop)
}

// putHsmLease is putHsm keeping lease l with a released file's record.
func putHsmLease(tx kv.Txn, ino uint64, r wire.HsmRecord, l restoreLease, drop *wire.TierQueueItem) {
	switch {
	case r.State == wire.HsmResident:
		tx.Delete(hsmKey(ino))
	case r.State == wire.HsmReleased && l != (restoreLease{}):
		v := byte(hsmLeaseVersion)
		switch {
		case r.ETag != "":
			v = hsmLeaseETagVersion
		case l.Data != 0:
			v = hsmLeaseDataVersion
		}
		e := wire.Encoder{B: []byte{v}}
		r.EncodeBody(&e)
		e.U64(l.Owner)
		e.U64(l.Gen)
		e.U64(l.Epoch)
		e.I64(l.Expires)
		if v != hsmLeaseVersion {
			e.U64(l.Data)
		}
		if v == hsmLeaseETagVersion {
			e.String(r.ETag)
		}
		tx.Set(hsmKey(ino), e.B)
	default:
		tx.Set(hsmKey(ino), encodeTierRecord(&r))
	}
	if drop != nil {
		it := *drop
		it.Ino = ino
		e := wire.Encoder{B: []byte{tierRecordVersion}}
		e.String(it.Backend)
		e.String(it.Key)
		tx.Set(tierDelKey(ino, it.Gen), e.B)
	}
}

// mayBeTiered says whether inode n can have an HSM record worth reading
// when building its attributes: only files wholly in chunks are released.
func mayBeTiered(n *inode) bool {
	return n.isReg() && n.hasChunks() && n.InlineLen == 0 && n.mayHaveHsm()
}

// hsmWrite applies hsmOnWrite to a regular file about to change its
// data or size in tx.
func hsmWrite(tx kv.Txn, ino uint64, n *inode) error {
	_, err := hsmChange(tx, ino, n, func(cur wire.HsmRecord, _ restoreLease) (wire.HsmRecord, error) {
		return hsmOnWrite(cur)
	})
	return err
}

// hsmTruncate applies hsmOnTruncate to a regular file whose size is about
// to be cut to size in tx. It reports whether the file was released (and
// is now emptied without a restore).
//
// A released file cut to 0 moves to data ID fresh (ADR 0023): its old
// chunks are frozen, and queued for removal (again: a file released before
// the fences may still have some). With fresh 0 that fails with
// errNeedDataID: the caller allocates one and runs the transaction again.
func hsmTruncate(tx kv.Txn, ino uint64, n *inode, size uint64, fresh uint64) (released bool, err error) {
	cur, err := hsmChange(tx, ino, n, func(cur wire.HsmRecord, lease restoreLease) (wire.HsmRecord, error) {
		next, err := hsmOnTruncate(cur, lease, size)
		if err != nil || cur.State != wire.HsmReleased {
			return next, err
		}
		if len(n.Layout.Chains) > 0 {
			if fresh == 0 {
				return cur, errNeedDataID
			}
			tx.Set(garbageKey(n.Layout.DataID(ino)), appendLayout(nil, &n.Layout))
			n.Layout.Data = fresh
		}
		return next, nil
	})
	return err == nil && cur.State == wire.HsmReleased, err
}

// hsmChange applies step to the HSM record (and restore lease) of regular
// file n about to change in tx, storing the state step returns, and
// returns the record as it was. Files without a record are left alone.
func hsmChange(tx kv.Txn, ino uint64, n *inode, step func(wire.HsmRecord, restoreLease) (wire.HsmRecord, error)) (wire.HsmRecord, error) {
	if !n.isReg() || !n.mayHaveHsm() {
		return wire.HsmRecord{}, nil
	}
	cur, lease, err := getHsmLease(tx, ino)
	if err != nil || cur.State == wire.HsmResident {
		return cur, err
	}
	next, err := step(cur, lease)
	if err != nil {
		return cur, err
	}
	if next.State != cur.State {
		putHsm(tx, ino, next, nil)
	}
	return cur, nil
}

// hsmDropped queues the object of a file whose last link went.
func hsmDropped(tx kv.Txn, ino uint64, l placement.Layout) error {
	cur, lease, err := getHsmLease(tx, ino)
	if err != nil || cur.State == wire.HsmResident {
		return err
	}
	putHsm(tx, ino, wire.HsmRecord{}, dropObject(cur))
	leaseGone(tx, lease, restoreLease{}, l)
	return nil
}

// leaseGone queues for removal the chunks a restore lease's holder wrote
// under its own data ID (ADR 0023) when lease cur gives way to next
// without its restore committed (taken over, dropped, the file removed).
// l is the file's layout; the chunks are in its chains.
func leaseGone(tx kv.Txn, cur, next restoreLease, l placement.Layout) {
	if cur.Data == 0 || cur.Data == next.Data || len(l.Chains) == 0 {
		return
	}
	l.Data = cur.Data
	tx.Set(garbageKey(cur.Data), appendLayout(nil, &l))
}

var backendName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// TierSet adds or removes a backend.
func (s *Service) TierSet(ctx context.Context, req *wire.TierSetReq) error {
	b := req.Backend
	if !backendName.MatchString(b.Name) {
		return errs.New(errs.Invalid, "meta: tier backend name %q: want 1-63 letters, digits, '.', '_' or '-'", b.Name)
	}
	if !req.Remove && (b.Endpoint == "" || b.Bucket == "") {
		return errs.New(errs.Invalid, "meta: tier backend %q needs an endpoint and a bucket", b.Name)
	}
	if req.Remove {
		// Files archived to it would lose their only way back (a
		// released file) or leave a copy nobody deletes: refuse. First
		// mark it, so that no archive or import names it from then on;
		// the scan then sees every record that does.
		err := s.update(ctx, func(tx kv.Txn) error {
			if _, err := tx.Get(tierKey(b.Name)); errors.Is(err, kv.ErrNotFound) {
				return errs.New(errs.NotFound, "no tier backend %q", b.Name)
			} else if err != nil {
				return err
			}
			tx.Set(tierRemovingKey(b.Name), []byte{1})
			return nil
		})
		if err != nil {
			return fmt.Errorf("meta: tier set %q: %w", b.Name, err)
		}
		if s.tierRemoveHook != nil {
			s.tierRemoveHook()
		}
		n, err := s.hsmFilesOn(ctx, b.Name)
		if err == nil && n > 0 {
			err = errs.New(errs.Busy, "meta: tier backend %q holds the copies of %d or more files; restore them and remove their copies first (sluice hsm restore, sluice hsm remove)", b.Name, n)
		}
		if err != nil {
			// Not removed: the backend takes archives again.
			if uerr := s.update(ctx, func(tx kv.Txn) error { tx.Delete(tierRemovingKey(b.Name)); return nil }); uerr != nil {
				s.log.Warn("tier rm: clearing the removal mark", "backend", b.Name, "err", uerr)
			}
			return fmt.Errorf("meta: tier set %q: %w", b.Name, err)
		}
	}
	err := s.update(ctx, func(tx kv.Txn) error {
		_, err := tx.Get(tierKey(b.Name))
		switch {
		case err != nil && !errors.Is(err, kv.ErrNotFound):
			return err
		case req.Remove && err != nil:
			return errs.New(errs.NotFound, "no tier backend %q", b.Name)
		case req.Remove:
			tx.Delete(tierKey(b.Name))
			tx.Delete(tierRemovingKey(b.Name))
		case err == nil:
			return errs.New(errs.Exists, "tier backend %q exists (remove it first)", b.Name)
		default:
			tx.Set(tierKey(b.Name), encodeTierRecord(&b))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("meta: tier set %q: %w", b.Name, err)
	}
	return nil
}

// hsmFilesOn counts (up to 1) the files whose HSM record or queued object
// names backend: a scan of the "H" and "O" keys, in pages of one read
// transaction each. TierSet marks the backend first (tierRemovingKey), so
// no record naming it is made during the scan.
func (s *Service) hsmFilesOn(ctx context.Context, backend string) (int, error) {
	for _, pfx := range []byte{pfxHsm, pfxTierDel} {
		start, end := []byte{pfx}, kv.PrefixEnd([]byte{pfx})
		for start != nil {
			found, next := false, []byte(nil)
			err := s.db.View(ctx, func(tx kv.Txn) error {
				found, next = false, nil
				var derr error
				n := 0
				err := tx.Scan(start, end, 1024, func(k, v []byte) bool {
					n++
					next = append(append([]byte(nil), k...), 0)
					name := ""
					if pfx == pfxHsm {
						var r wire.HsmRecord
						if r, _, derr = decodeHsm(0, v); derr != nil {
							return false
						}
						name = r.Backend
					} else if len(v) > 0 {
						d := wire.Decoder{B: v[1:]}
						name = d.String()
					}
					found = name == backend
					return !found
				})
				if n < 1024 && !found {
					next = nil
				}
				if err != nil {
					return err
				}
				return derr
			})
			if err != nil {
				return 0, err
			}
			if found {
				return 1, nil
			}
			start = next
		}
	}
	return 0, nil
}

// TierList returns every backend, sorted by name.
func (s *Service) TierList(ctx context.Context) (wire.TierListResp, error) {
	var r wire.TierListResp
	err := s.db.View(ctx, func(tx kv.Txn) error {
		r.Backends = r.Backends[:0]
		var derr error
		err := tx.Scan([]byte{pfxTier}, kv.PrefixEnd([]byte{pfxTier}), 0, func(k, v []byte) bool {
			var b wire.TierBackend
			if derr = decodeTierRecord("tier backend "+string(k[1:]), v, &b); derr != nil {
				return false
			}
			r.Backends = append(r.Backends, b)
			return true
		})
		if err != nil {
			return err
		}
		return derr
	})
	if err != nil {
		return wire.TierListResp{}, fmt.Errorf("meta: tier list: %w", err)
	}
	return r, nil
}

// HsmGet returns file ino's HSM record.
func (s *Service) HsmGet(ctx context.Context, ino uint64) (wire.HsmRecord, error) {
	var r wire.HsmRecord
	err := s.db.View(ctx, func(tx kv.Txn) error {
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		if !n.isReg() {
			return errs.New(errs.Invalid, "only regular files have an HSM state")
		}
		r, err = getHsm(tx, ino)
		return err
	})
	if err != nil {
		return wire.HsmRecord{}, inoErr("hsm get", ino, err)
	}
	return r, nil
}

// HsmStates returns the HSM states of up to wire.MaxInos inodes, in
// one transaction: wire.HsmGone for an inode that is not a regular file
// (removed, or another type). The tier mover asks for a directory's files
// at once instead of one OpHsmGet each.
func (s *Service) HsmStates(ctx context.Context, inos []uint64) ([]uint8, error) {
	if len(inos) > wire.MaxInos {
		return nil, errs.New(errs.Invalid, "hsm states: %d inodes asked for, at most %d", len(inos), wire.MaxInos)
	}
	out := make([]uint8, len(inos))
	err := s.db.View(ctx, func(tx kv.Txn) error {
		for i, ino := range inos {
			n, err := getInode(tx, ino)
			switch {
			case errs.CodeOf(err) == errs.NotFound:
				out[i] = wire.HsmGone
				continue
			case err != nil:
				return err
			case !n.isReg():
				out[i] = wire.HsmGone
				continue
			}
			r, err := getHsm(tx, ino)
			if err != nil {
				return fmt.Errorf("inode %d: %w", ino, err)
			}
			out[i] = r.State
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hsm states: %w", err)
	}
	return out, nil
}

// TouchAtime sets the access time of each regular file of inos whose
// access time is more than wire.RelatimeWindow old to now (relatime:
// clients send the files they opened for reading, in batches). It
// changes no ctime and publishes no change-feed event: an access time is
// advisory, and other clients' caches need not drop anything for it.
// Removed inodes and other types are skipped.
func (s *Service) TouchAtime(ctx context.Context, inos []uint64) error {
	if len(inos) > wire.MaxInos {
		return errs.New(errs.Invalid, "touch atime: %d inodes, at most %d", len(inos), wire.MaxInos)
	}
	now := s.nowNs()
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		for _, ino := range inos {
			n, err := getInode(tx, ino)
			switch {
			case errs.CodeOf(err) == errs.NotFound:
				continue
			case err != nil:
				return err
			case !n.isReg() || now-n.Atime < int64(wire.RelatimeWindow):
				continue
			}
			n.Atime = now
			tx.Set(inodeKey(ino), n.encode())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("touch atime: %w", err)
	}
	return nil
}

// HsmUpdate applies one step of the HSM state machine (hsmStep), or
// freezes a file for its release or gives that up (release.go).
func (s *Service) HsmUpdate(ctx context.Context, req *wire.HsmUpdateReq) (wire.HsmRecord, error) {
	switch req.Action {
	case wire.HsmActFreeze:
		r, err := s.releaseFreeze(ctx, req.Ino)
		if err != nil {
			return r, inoErr("hsm freeze", req.Ino, err)
		}
		return r, nil
	case wire.HsmActThaw:
		if err := s.releaseThaw(ctx, req.Ino, req.Record.Gen); err != nil {
			return wire.HsmRecord{}, inoErr("hsm thaw", req.Ino, err)
		}
		return wire.HsmRecord{}, nil
	}
	var r wire.HsmRecord
	var queued bool
	err := s.update(ctx, func(tx kv.Txn) error {
		queued = false
		n, err := getInode(tx, req.Ino)
		if err != nil {
			return err
		}
		cur, lease, err := getHsmLease(tx, req.Ino)
		if err != nil {
			return err
		}
		if req.Action == wire.HsmActArchived || req.Action == wire.HsmActImport {
			// The record names the backend it was written to.
			if err := usableBackend(tx, req.Record.Backend); err != nil {
				return err
			}
		}
		f := hsmFile{Reg: n.isReg(), Size: n.Size, Mtime: n.Mtime, InlineLen: n.InlineLen, Chunks: n.hasChunks()}
		next, drop, err := hsmStep(cur, f, req)
		if err != nil {
			return err
		}
		switch {
		case req.Action == wire.HsmActRestoring && next.State == wire.HsmReleased:
			// The chunks a restore writes must not be removed by the
			// collection of the release's chunks: wait for it to finish.
			if _, err := tx.Get(garbageKey(n.Layout.DataID(req.Ino))); err == nil {
				return errs.New(errs.Busy, "the release's chunk removal has not finished; try again")
			} else if !errors.Is(err, kv.ErrNotFound) {
				return err
			}
		case req.Action == wire.HsmActRelease && cur.State != wire.HsmReleased && len(n.Layout.Chains) > 0:
			// A migration copying the chunks must not find them gone.
			if rec, err := getMigration(tx, req.Ino); err != nil {
				return err
			} else if rec != nil {
				return errs.New(errs.Busy, "the file is being migrated to a new layout; release it after the migration")
			}
			// The chunks must be frozen, and were compared with this
			// copy by the client (ADR 0023); the fences stay.
			fence, err := getReleaseFence(tx, req.Ino)
			if err != nil {
				return err
			}
			if err := releaseCommitCheck(fence, cur, n.Layout); err != nil {
				return err
			}
			tx.Delete(releaseKey(req.Ino))
			// Same transaction: a released file never keeps chunks
			// past the collector's next pass, even across a crash.
			tx.Set(garbageKey(n.Layout.DataID(req.Ino)), appendLayout(nil, &n.Layout))
			queued = true
		}
		putHsmLease(tx, req.Ino, next, lease, drop)
		if req.Action == wire.HsmActImport {
			// The file takes the object's size and time; its bytes
			// count as in chunks (which a restore writes), so that
			// attributes show it released.
			n.Size, n.Mtime, n.Ctime = next.Size, next.Mtime, s.nowNs()
			n.Flags |= inoChunks | inoHsm | inoImported
			tx.Set(inodeKey(req.Ino), n.encode())
		}
		if next.State != wire.HsmResident && n.Flags&inoHsm == 0 {
			// Reads of the "H" key are skipped for inodes without it.
			n.Flags |= inoHsm
			tx.Set(inodeKey(req.Ino), n.encode())
		}
		r = next
		return nil
	})
	if err != nil {
		return wire.HsmRecord{}, inoErr("hsm update", req.Ino, err)
	}
	if queued {
		s.kickGC()
	}
	return r, nil
}

// RestoreTotals counts, since this service started, what it decided about
// the restores of released files (exported as sluice_hsm_*).
type RestoreTotals struct {
	Leases    uint64 // restore leases granted (a new holder, not a renewal)
	Takeovers uint64 // of those, the ones that took an expired lease over
	Restored  uint64 // restores committed (released files made archived)
	// RestoredBytes is the size of the files of those restores.
	RestoredBytes uint64
	// CutToZero counts released files cut to size 0 without a restore.
	CutToZero uint64
}

type restoreCounters struct {
	leases, takeovers, restored, restoredBytes, cutToZero atomic.Uint64
}

// RestoreTotals returns the restore counts so far.
func (s *Service) RestoreTotals() RestoreTotals {
	r := &s.restores
	return RestoreTotals{Leases: r.leases.Load(), Takeovers: r.takeovers.Load(), Restored: r.restored.Load(),
		RestoredBytes: r.restoredBytes.Load(), CutToZero: r.cutToZero.Load()}
}

// HsmClaim takes, renews or drops the restore lease of a released file
// (restoreClaim). A lease is granted only once the release's chunk
// removal is done (errs.Busy until then), so that the collector never
// removes chunks a restore wrote.
//
// A new grant comes with a data ID of its own (HsmClaimFull.Data): the
// first try has none, and one is allocated only when a grant needs it.
func (s *Service) HsmClaim(ctx context.Context, req *wire.HsmClaimReq) (wire.HsmClaim, error) {
	r, err := s.hsmClaim(ctx, req, 0)
	if errors.Is(err, errNeedDataID) {
		var fresh uint64
		if fresh, err = s.allocIno(ctx); err == nil {
			r, err = s.hsmClaim(ctx, req, fresh)
		}
	}
	if err != nil {
		return wire.HsmClaim{}, inoErr("hsm claim", req.Ino, err)
	}
	return r, nil
}

func (s *Service) hsmClaim(ctx context.Context, req *wire.HsmClaimReq, fresh uint64) (wire.HsmClaim, error) {
	var r wire.HsmClaim
	var granted, takeover bool // counted once the transaction committed
	err := s.update(ctx, func(tx kv.Txn) error {
		granted, takeover = false, false
		n, err := getInode(tx, req.Ino)
		if err != nil {
			return err
		}
		if !n.isReg() {
			return errs.New(errs.Invalid, "only regular files have an HSM state")
		}
		rec, cur, err := getHsmLease(tx, req.Ino)
		if err != nil {
			return err
		}
		now := s.nowNs()
		next, err := restoreClaim(rec, cur, req, now, fresh)
		if err != nil {
			return err
		}
		if next != cur {
			putHsmLease(tx, req.Ino, rec, next, nil)
			leaseGone(tx, cur, next, n.Layout)
		}
		if next.Owner != 0 && next.Owner == req.Owner && (cur.Owner != req.Owner || cur.Gen != next.Gen) {
			granted, takeover = true, next.Epoch > 1
		}
		r = wire.HsmClaim{State: rec.State, Gen: rec.Gen, Owner: next.Owner, Epoch: next.Epoch}
		if next.Owner != 0 && next.Expires > now {
			r.LeftMs = uint32(min((next.Expires-now)/1e6, maxRestoreLease))
		}
		if req.Full {
			a, err := attrOf(tx, req.Ino, n)
			if err != nil {
				return err
			}
			r.Full = &wire.HsmClaimFull{Record: rec, Attr: a}
			if next.Owner == req.Owner {
				r.Full.Data = next.Data
			}
		}
		return nil
	})
	if err != nil {
		return wire.HsmClaim{}, err
	}
	if granted {
		s.restores.leases.Add(1)
		if takeover {
			s.restores.takeovers.Add(1)
		}
	}
	return r, nil
}

// HsmRestored marks released file req.Ino archived once the holder of its
// restore lease, req.Owner, has its bytes synced on the targets; the
// lease goes with the state change.
func (s *Service) HsmRestored(ctx context.Context, req *wire.HsmClaimReq) (wire.HsmRecord, error) {
	var r wire.HsmRecord
	var restored uint64 // the file's size, once the transaction made it archived; 0: none
	var done bool
	err := s.update(ctx, func(tx kv.Txn) error {
		done = false
		n, err := getInode(tx, req.Ino)
		if err != nil {
			return err
		}
		cur, lease, err := getHsmLease(tx, req.Ino)
		if err != nil {
			return err
		}
		if err := restoreDone(cur, lease, req.Owner); err != nil {
			return err
		}
		f := hsmFile{Reg: n.isReg(), Size: n.Size, Mtime: n.Mtime, InlineLen: n.InlineLen}
		next, _, err := hsmStep(cur, f, &wire.HsmUpdateReq{Ino: req.Ino, Action: wire.HsmActRestored, Record: wire.HsmRecord{Gen: req.Gen, BlockCRCs: req.Sums}})
		if err != nil {
			return err
		}
		putHsm(tx, req.Ino, next, nil)
		if cur.State == wire.HsmReleased && lease.Data != 0 {
			// The restored chunks are under the lease's data ID: the
			// file moves to it; the old chunks were queued at the release.
			n.Layout.Data = lease.Data
			tx.Set(inodeKey(req.Ino), n.encode())
		}
		r = next
		done, restored = cur.State == wire.HsmReleased && next.State != wire.HsmReleased, n.Size
		return nil
	})
	if err != nil {
		return wire.HsmRecord{}, inoErr("hsm restored", req.Ino, err)
	}
	if done {
		s.restores.restored.Add(1)
		s.restores.restoredBytes.Add(restored)
	}
	return r, nil
}

// TierQueue removes the delete-queue items req.Done and lists up to
// req.Limit of the rest.
func (s *Service) TierQueue(ctx context.Context, req *wire.TierQueueReq) (wire.TierQueueResp, error) {
	if len(req.Done) > 0 {
		err := s.update(ctx, func(tx kv.Txn) error {
			for _, it := range req.Done {
				tx.Delete(tierDelKey(it.Ino, it.Gen))
			}
			return nil
		})
		if err != nil {
			return wire.TierQueueResp{}, fmt.Errorf("meta: tier queue: %w", err)
		}
	}
	limit := int(min(max(req.Limit, 1), 10000))
	var r wire.TierQueueResp
	err := s.db.View(ctx, func(tx kv.Txn) error {
		r.Items = r.Items[:0]
		var derr error
		err := tx.Scan([]byte{pfxTierDel}, kv.PrefixEnd([]byte{pfxTierDel}), limit, func(k, v []byte) bool {
			if len(k) != 17 {
				derr = errs.New(errs.Corruption, "meta: tier delete queue key of %d bytes", len(k))
				return false
			}
			it := wire.TierQueueItem{Ino: binary.BigEndian.Uint64(k[1:]), Gen: binary.BigEndian.Uint64(k[9:])}
			if len(v) > 0 && v[0] == tierRecordVersion {
				d := wire.Decoder{B: v[1:]}
				it.Backend, it.Key = d.String(), d.String()
				if d.Err() != nil || d.More() {
					v = nil
				}
			}
			if len(v) == 0 || v[0] != tierRecordVersion {
				derr = errs.New(errs.Corruption, "meta: tier delete queue: bad record for inode %d", it.Ino)
				return false
			}
			r.Items = append(r.Items, it)
			return true
		})
		if err != nil {
			return err
		}
		return derr
	})
	if err != nil {
		return wire.TierQueueResp{}, fmt.Errorf("meta: tier queue: %w", err)
	}
	return r, nil
}

func (s *Service) registerTier(srv *wire.Server) {
	handle(srv, wire.OpTierSet, func(ctx context.Context, m *wire.TierSetReq) (wire.Message, error) {
		return &wire.Empty{}, s.TierSet(ctx, m)
	})
	handle(srv, wire.OpTierList, func(ctx context.Context, _ *wire.Empty) (wire.Message, error) {
		r, err := s.TierList(ctx)
		return &r, err
	})
	handle(srv, wire.OpHsmGet, func(ctx context.Context, m *wire.InoReq) (wire.Message, error) {
		r, err := s.HsmGet(ctx, m.Ino)
		return &r, err
	})
	handle(srv, wire.OpTouchAtime, func(ctx context.Context, m *wire.InosReq) (wire.Message, error) {
		return &wire.Empty{}, s.TouchAtime(ctx, m.Inos)
	})
	handle(srv, wire.OpHsmStates, func(ctx context.Context, m *wire.InosReq) (wire.Message, error) {
		st, err := s.HsmStates(ctx, m.Inos)
		return &wire.HsmStatesResp{States: st}, err
	})
	handle(srv, wire.OpHsmUpdate, func(ctx context.Context, m *wire.HsmUpdateReq) (wire.Message, error) {
		r, err := s.HsmUpdate(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpHsmClaim, func(ctx context.Context, m *wire.HsmClaimReq) (wire.Message, error) {
		r, err := s.HsmClaim(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpHsmStats, func(_ context.Context, _ *wire.Empty) (wire.Message, error) {
		t := s.RestoreTotals()
		return &wire.HsmStats{Leases: t.Leases, Takeovers: t.Takeovers, Restored: t.Restored, RestoredBytes: t.RestoredBytes, CutToZero: t.CutToZero}, nil
	})
	handle(srv, wire.OpHsmRestored, func(ctx context.Context, m *wire.HsmClaimReq) (wire.Message, error) {
		r, err := s.HsmRestored(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpTierImport, func(ctx context.Context, m *wire.TierImportReq) (wire.Message, error) {
		r, err := s.TierImport(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpTierImportDry, func(ctx context.Context, m *wire.TierImportReq) (wire.Message, error) {
		r, err := s.TierImportDry(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpTierForget, func(ctx context.Context, m *wire.TierForgetReq) (wire.Message, error) {
		r, err := s.TierForget(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpTierQueue, func(ctx context.Context, m *wire.TierQueueReq) (wire.Message, error) {
		r, err := s.TierQueue(ctx, m)
		return &r, err
	})
}
