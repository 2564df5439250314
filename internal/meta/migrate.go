package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Online migration (ADR 0020): a migrator copies a file's chunks to a new
// layout with a data ID of its own, while the file stays in use. The
// metadata service keeps one record per migration ("m" + u64 ino) and
// decides every step in a transaction on it:
//
//	Begin   no record -> copying (new layout chosen, new data ID)
//	Freeze  copying -> frozen, then the old chunks are frozen on their targets
//	Commit  frozen -> (none): the inode takes the new layout, the old
//	        chunks are queued for removal
//	Abort   copying -> (none), the new chunks queued for removal;
//	        frozen -> aborting -> the old chunks thawed -> (none), the
//	        new chunks queued for removal
//
// A record whose lease ran out (its migrator died) is aborted by the
// service's background pass.

const (
	pfxMigrate = 'm' // "m" + u64 ino -> migration record

	migrateRecordVersion = 1

	// DefaultMigrateLease is a migration's lease when the request names
	// none; MaxMigrateLease bounds what one may ask for.
	DefaultMigrateLease = 30 * time.Second
	MaxMigrateLease     = 10 * time.Minute
	// migrateGrace is how long past its lease a record waits before the
	// background pass aborts it, so that a migrator whose clock step
	// raced the deadline is not cut short.
	migrateGrace = 2 * time.Second
)

// Migration record states.
const (
	migCopying  uint8 = 1 // the new chunks are being written; the old ones serve
	migFrozen   uint8 = 2 // the old chunks are (being) frozen: writes to them fail with errs.Moved
	migAborting uint8 = 3 // the old chunks are being thawed; the record goes next
)

func migrateKey(ino uint64) []byte { return inoKey(pfxMigrate, ino) }

// migration is the value of an "m" key: u8 version (1) | u8 state | i64
// deadline (unix ns) | u16 n | n bytes old layout | new layout.
type migration struct {
	State    uint8
	Deadline int64
	Old, New placement.Layout
}

func (m *migration) encode() []byte {
	old := appendLayout(nil, &m.Old)
	b := make([]byte, 0, 12+len(old)+len(old))
	b = append(b, migrateRecordVersion, m.State)
	b = binary.BigEndian.AppendUint64(b, uint64(m.Deadline))
	b = binary.BigEndian.AppendUint16(b, uint16(len(old)))
	b = append(b, old...)
	return appendLayout(b, &m.New)
}

func decodeMigration(b []byte, m *migration) error {
	if len(b) < 12 || b[0] != migrateRecordVersion {
		return errs.New(errs.Corruption, "meta: migration record % x is malformed", b[:min(len(b), 12)])
	}
	m.State = b[1]
	if m.State < migCopying || m.State > migAborting {
		return errs.New(errs.Corruption, "meta: migration record has state %d", m.State)
	}
	m.Deadline = int64(binary.BigEndian.Uint64(b[2:]))
	n := int(binary.BigEndian.Uint16(b[10:]))
	if len(b) < 12+n {
		return errs.New(errs.Corruption, "meta: migration record is truncated")
	}
	if err := decodeLayout(b[12:12+n], &m.Old); err != nil {
		return err
	}
	if err := decodeLayout(b[12+n:], &m.New); err != nil {
		return err
	}
	if m.New.Data == 0 {
		return errs.New(errs.Corruption, "meta: migration record's new layout has no data ID")
	}
	return nil
}

func getMigration(tx kv.Txn, ino uint64) (*migration, error) {
	v, err := tx.Get(migrateKey(ino))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m := new(migration)
	if err := decodeMigration(v, m); err != nil {
		return nil, fmt.Errorf("meta: migration of inode %d: %w", ino, err)
	}
	return m, nil
}

// migrateCheck decides whether step action may be taken on the migration
// rec (nil: none) by the migrator that holds data ID data, at time now. It
// is the state machine above, without I/O.
func migrateCheck(rec *migration, action uint8, data uint64, now int64) error {
	if action == wire.MigrateBegin {
		if rec != nil {
			return errs.New(errs.Busy, "a migration of this file is in progress (to data %d); wait for it or for its lease to run out", rec.New.Data)
		}
		return nil
	}
	if rec == nil || rec.New.Data != data {
		return errs.New(errs.Stale, "the migration (data %d) is no longer recorded: it was aborted or finished", data)
	}
	switch action {
	case wire.MigrateAbort:
		return nil
	case wire.MigrateRenew, wire.MigrateFreeze, wire.MigrateCommit:
	default:
		return errs.New(errs.Invalid, "unknown migration step %d", action)
	}
	if rec.State == migAborting {
		return errs.New(errs.Stale, "the migration (data %d) is being aborted", data)
	}
	if now > rec.Deadline {
		return errs.New(errs.Stale, "the migration's lease ran out %v ago", time.Duration(now-rec.Deadline))
	}
	if action == wire.MigrateCommit && rec.State != migFrozen {
		return errs.New(errs.Invalid, "a migration commits only after its freeze")
	}
	return nil
}

// sameLayout reports whether a and b are the same layout.
func sameLayout(a, b placement.Layout) bool {
	return a.StripeSize == b.StripeSize && a.StripeCount == b.StripeCount &&
		a.ReplicaCount() == b.ReplicaCount() && a.Data == b.Data && slices.Equal(a.Chains, b.Chains)
}

func leaseOf(ns int64) (time.Duration, error) {
	switch d := time.Duration(ns); {
	case d == 0:
		return DefaultMigrateLease, nil
	case d < 0 || d > MaxMigrateLease:
		return 0, errs.New(errs.Invalid, "migration lease %v is out of range (0 to %v)", d, MaxMigrateLease)
	default:
		return d, nil
	}
}

// Migrate takes one step of file req.Ino's migration (wire.MigrateBegin
// and so on; ADR 0020).
func (s *Service) Migrate(ctx context.Context, req *wire.MigrateReq) (wire.MigrateResp, error) {
	var resp wire.MigrateResp
	var err error
	switch req.Action {
	case wire.MigrateBegin:
		resp, err = s.migrateBegin(ctx, req)
	case wire.MigrateRenew, wire.MigrateFreeze, wire.MigrateCommit:
		resp, err = s.migrateStep(ctx, req)
	case wire.MigrateAbort:
		err = s.migrateAbort(ctx, req.Ino, req.Data)
	default:
		err = errs.New(errs.Invalid, "unknown migration step %d", req.Action)
	}
	if err != nil {
		return resp, inoErr("migrate", req.Ino, err)
	}
	return resp, nil
}

func (s *Service) migrateBegin(ctx context.Context, req *wire.MigrateReq) (wire.MigrateResp, error) {
	var resp wire.MigrateResp
	lease, err := leaseOf(req.Lease)
	if err != nil {
		return resp, err
	}
	if req.Layout.StripeSize == 0 {
		return resp, errs.New(errs.Invalid, "a migration needs the new layout's stripe size")
	}
	data, err := s.allocIno(ctx)
	if err != nil {
		return resp, err
	}
	pv, err := s.placeView(ctx)
	if err != nil {
		return resp, err
	}
	who := whoOf(ctx, nil)
	var audited bool
	err = s.updatePlacing(ctx, &pv, func(tx kv.Txn) error {
		resp, audited = wire.MigrateResp{}, false
		now := s.nowNs()
		n, err := getInode(tx, req.Ino)
		if err != nil {
			return err
		}
		if !n.isReg() {
			return errs.New(errs.Invalid, "only regular files migrate (type %#o)", n.Mode&modeType)
		}
		rec, err := getMigration(tx, req.Ino)
		if err != nil {
			return err
		}
		if err := migrateCheck(rec, wire.MigrateBegin, 0, now); err != nil {
			return err
		}
		if n.mayHaveHsm() {
			h, err := getHsm(tx, req.Ino)
			if err != nil {
				return err
			}
			if h.State == wire.HsmReleased {
				return errs.New(errs.Busy, "the file is released to the object tier; restore it (sluice hsm restore) before migrating it")
			}
		}
		if fence, err := getReleaseFence(tx, req.Ino); err != nil {
			return err
		} else if fence != nil {
			return errs.New(errs.Busy, "the file is being released to the object tier; migrate it after the release")
		}
		staged := false
		p := inoKey(pfxStaged, req.Ino)
		if err := tx.Scan(p, kv.PrefixEnd(p), 1, func(_, _ []byte) bool { staged = true; return false }); err != nil {
			return err
		}
		if staged {
			return errs.New(errs.Busy, "the file has data staged on a client (absorb policy) that is not on the targets yet")
		}
		nl, err := s.fileLayout(req.Layout, placement.Layout{}, req.Pool, pv, data)
		if err != nil {
			return err
		}
		resp.Old, resp.Size = n.Layout, n.Size
		if !n.hasChunks() || len(n.Layout.Chains) == 0 {
			// Nothing on the targets to copy: the layout changes at once.
			n.Layout = nl
			tx.Set(inodeKey(req.Ino), n.encode())
			resp.New, resp.Done = nl, true
			audited = true
			return s.appendAudit(tx, &audit.Entry{Time: now, Op: audit.OpMigrate, Ino: req.Ino, Who: who,
				Changes: []audit.Change{{Field: "layout", Old: layoutText(resp.Old), New: layoutText(nl)}}})
		}
		nl.Data = data
		rec = &migration{State: migCopying, Deadline: now + int64(lease), Old: n.Layout, New: nl}
		tx.Set(migrateKey(req.Ino), rec.encode())
		resp.New = nl
		return nil
	})
	if audited {
		s.audited()
	}
	return resp, err
}

// migrateStep renews, freezes or commits a migration.
func (s *Service) migrateStep(ctx context.Context, req *wire.MigrateReq) (wire.MigrateResp, error) {
	var resp wire.MigrateResp
	lease, err := leaseOf(req.Lease)
	if err != nil {
		return resp, err
	}
	who := whoOf(ctx, nil)
	var rec *migration
	err = s.update(ctx, func(tx kv.Txn) error {
		resp = wire.MigrateResp{}
		now := s.nowNs()
		var err error
		if rec, err = getMigration(tx, req.Ino); err != nil {
			return err
		}
		if err := migrateCheck(rec, req.Action, req.Data, now); err != nil {
			return err
		}
		n, err := getInode(tx, req.Ino)
		if err != nil {
			return err
		}
		resp.Old, resp.New, resp.Size = rec.Old, rec.New, n.Size
		if !sameLayout(n.Layout, rec.Old) {
			return errs.New(errs.Stale, "the file's layout changed since the migration began")
		}
		switch req.Action {
		case wire.MigrateRenew, wire.MigrateFreeze:
			if req.Action == wire.MigrateFreeze {
				rec.State = migFrozen // before any fence: an abort must thaw
			}
			rec.Deadline = now + int64(lease)
			tx.Set(migrateKey(req.Ino), rec.encode())
			return nil
		}
		// Commit: one transaction switches the layout and queues the old
		// chunks; it is durable before the answer, and before the
		// collector removes anything.
		tx.RequireSync()
		n.Layout = rec.New
		tx.Set(inodeKey(req.Ino), n.encode())
		tx.Set(garbageKey(rec.Old.DataID(req.Ino)), appendLayout(nil, &rec.Old))
		tx.Delete(migrateKey(req.Ino))
		resp.Done = true
		return s.appendAudit(tx, &audit.Entry{Time: now, Op: audit.OpMigrate, Ino: req.Ino, Who: who,
			Changes: []audit.Change{{Field: "layout", Old: layoutText(rec.Old), New: layoutText(rec.New)}}})
	})
	if err != nil {
		return resp, err
	}
	switch req.Action {
	case wire.MigrateFreeze:
		err = s.fenceLayout(ctx, req.Ino, rec.Old, wire.FenceFreeze)
	case wire.MigrateCommit:
		s.audited()
		s.kickGC()
	}
	return resp, err
}

// fenceLayout freezes or thaws file ino's chunks of layout l on every
// replica of their chains.
func (s *Service) fenceLayout(ctx context.Context, ino uint64, l placement.Layout, mode uint8) error {
	var failed []error
	for slot, ch := range l.Chains {
		if err := s.targets.FenceChunks(ctx, ch, l.DataID(ino), []uint32{uint32(slot)}, mode); err != nil {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

// migrateAbort ends the migration of ino whose new data ID is data: the
// old chunks are thawed if they were frozen, and the new ones queued for
// removal. A migration already gone is not an error.
func (s *Service) migrateAbort(ctx context.Context, ino, data uint64) error {
	var rec *migration
	thaw := false
	err := s.update(ctx, func(tx kv.Txn) error {
		var err error
		thaw = false
		if rec, err = getMigration(tx, ino); err != nil || rec == nil || rec.New.Data != data {
			return err
		}
		if rec.State == migCopying {
			tx.Delete(migrateKey(ino))
			tx.Set(garbageKey(rec.New.Data), appendLayout(nil, &rec.New))
			return nil
		}
		// Frozen: commits are refused from now on, then the old
		// chunks are thawed, then the record goes.
		thaw = true
		rec.State = migAborting
		tx.Set(migrateKey(ino), rec.encode())
		return nil
	})
	if err != nil || !thaw {
		if err == nil {
			s.kickGC()
		}
		return err
	}
	if err := s.fenceLayout(ctx, ino, rec.Old, wire.FenceThaw); err != nil {
		return fmt.Errorf("meta: thaw the chunks of an aborted migration (retried by the next pass): %w", err)
	}
	err = s.update(ctx, func(tx kv.Txn) error {
		cur, err := getMigration(tx, ino)
		if err != nil || cur == nil || cur.New.Data != data {
			return err
		}
		tx.Delete(migrateKey(ino))
		tx.Set(garbageKey(cur.New.Data), appendLayout(nil, &cur.New))
		return nil
	})
	if err == nil {
		s.kickGC()
	}
	return err
}

// abortExpiredMigrations aborts the migrations whose lease ran out more
// than migrateGrace ago: their migrators died or lost touch.
func (s *Service) abortExpiredMigrations(ctx context.Context) error {
	type expired struct{ ino, data uint64 }
	now := s.nowNs()
	list, err := scanDue(ctx, s.db, pfxMigrate, "migration", func(ino uint64, v []byte) (expired, bool, error) {
		var m migration
		if err := decodeMigration(v, &m); err != nil {
			return expired{}, false, err
		}
		return expired{ino, m.New.Data}, m.State == migAborting || now > m.Deadline+int64(migrateGrace), nil
	})
	if err != nil {
		return err
	}
	var failed []error
	for _, e := range list {
		s.log.Info("meta: aborting a migration whose lease ran out", "ino", e.ino, "data", e.data)
		if err := s.migrateAbort(ctx, e.ino, e.data); err != nil {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

// scanDue scans the records "pfx" + u64 ino (what names them in errors)
// and returns what due makes of those it says are due.
func scanDue[T any](ctx context.Context, db kv.DB, pfx byte, what string, due func(ino uint64, v []byte) (T, bool, error)) ([]T, error) {
	var list []T
	var derr error
	p := []byte{pfx}
	err := db.View(ctx, func(tx kv.Txn) error {
		list = list[:0]
		return tx.Scan(p, kv.PrefixEnd(p), 0, func(k, v []byte) bool {
			if len(k) != 9 {
				derr = errs.New(errs.Corruption, "meta: bad %s key %q", what, k)
				return false
			}
			var x T
			var ok bool
			if x, ok, derr = due(binary.BigEndian.Uint64(k[1:]), v); derr != nil {
				return false
			}
			if ok {
				list = append(list, x)
			}
			return true
		})
	})
	if err = errors.Join(err, derr); err != nil {
		return nil, err
	}
	return list, nil
}
