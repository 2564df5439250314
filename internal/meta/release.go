package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Release fences (ADR 0023). A client may still hold an archived file open
// and write it while it is released: its bytes reach the targets before
// its size commit reaches this service, which keeps no list of open files.
// So a release freezes the file's chunks first (the fences of ADR 0020:
// every write acknowledged before is in the chunks, every later one fails
// with errs.Moved), the releasing client compares the chunks with the
// copy's checksums, and only then commits (HsmActRelease). The fences stay
// after the commit: a late writer is refused at the target, learns that
// the file is released, restores it and writes again. A restore writes
// the chunks under a data ID of its own, which its commit gives the file.
//
// The service keeps one record per release in progress ("r" + u64 ino):
// a release whose client died is thawed by the background pass once its
// lease ran out, so writers are never held back for longer.

const (
	pfxRelease = 'r' // "r" + u64 ino -> release fence record

	releaseRecordVersion = 1

	// ReleaseLease is how long a freeze for release holds without being
	// renewed (HsmActFreeze again); the releasing client renews it every
	// ReleaseLease/3 while it compares the chunks.
	ReleaseLease = 60 * time.Second
)

// Release fence record states.
const (
	releaseFrozen  uint8 = 1 // the chunks are (being) frozen; a commit may follow
	releaseThawing uint8 = 2 // given up: the chunks are being thawed; the record goes next
)

func releaseKey(ino uint64) []byte { return inoKey(pfxRelease, ino) }

// releaseFence is the value of an "r" key: u8 version (1) | u8 state | i64
// deadline (unix ns) | u64 gen of the copy compared | layout frozen.
type releaseFence struct {
	State    uint8
	Deadline int64
	Gen      uint64
	Layout   placement.Layout
}

func (r *releaseFence) encode() []byte {
	b := []byte{releaseRecordVersion, r.State}
	b = binary.BigEndian.AppendUint64(b, uint64(r.Deadline))
	b = binary.BigEndian.AppendUint64(b, r.Gen)
	return appendLayout(b, &r.Layout)
}

func decodeReleaseFence(b []byte, r *releaseFence) error {
	if len(b) < 18 || b[0] != releaseRecordVersion {
		return errs.New(errs.Corruption, "meta: release fence record % x is malformed", b[:min(len(b), 18)])
	}
	r.State = b[1]
	if r.State != releaseFrozen && r.State != releaseThawing {
		return errs.New(errs.Corruption, "meta: release fence record has state %d", r.State)
	}
	r.Deadline = int64(binary.BigEndian.Uint64(b[2:]))
	r.Gen = binary.BigEndian.Uint64(b[10:])
	return decodeLayout(b[18:], &r.Layout)
}

func getReleaseFence(tx kv.Txn, ino uint64) (*releaseFence, error) {
	v, err := tx.Get(releaseKey(ino))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := new(releaseFence)
	if err := decodeReleaseFence(v, r); err != nil {
		return nil, fmt.Errorf("meta: release of inode %d: %w", ino, err)
	}
	return r, nil
}

// releaseCommitCheck decides whether an archived file whose HSM record is
// cur and layout l may be released now, given its release fence record
// (nil: none). Its chunks must have been frozen for this copy and this
// layout: the client compared what the fences hold with the copy.
func releaseCommitCheck(fence *releaseFence, cur wire.HsmRecord, l placement.Layout) error {
	switch {
	case fence == nil:
		return errs.New(errs.Invalid, "the file's chunks were not frozen for its release (ADR 0023: freeze, compare, then release; a client older than the service skips the freeze)")
	case fence.State != releaseFrozen:
		return errs.New(errs.Stale, "the release's freeze was given up (its lease ran out); release the file again")
	case fence.Gen != cur.Gen:
		return errs.New(errs.Stale, "the file was archived again since its chunks were frozen; release it again")
	case !sameLayout(fence.Layout, l):
		return errs.New(errs.Stale, "the file's layout changed since its chunks were frozen; release it again")
	}
	return nil
}

// releaseFreeze freezes archived file ino's chunks for its release and
// records the freeze (lease ReleaseLease); sent again, it renews it. It
// returns the file's HSM record: a released file, or one whose release
// the state machine refuses, is not frozen.
func (s *Service) releaseFreeze(ctx context.Context, ino uint64) (wire.HsmRecord, error) {
	var r wire.HsmRecord
	var fence *releaseFence
	err := s.update(ctx, func(tx kv.Txn) error {
		fence = nil
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		cur, err := getHsm(tx, ino)
		if err != nil {
			return err
		}
		r = cur
		f := hsmFile{Reg: n.isReg(), Size: n.Size, Mtime: n.Mtime, InlineLen: n.InlineLen, Chunks: n.hasChunks()}
		if _, _, err := hsmStep(cur, f, &wire.HsmUpdateReq{Ino: ino, Action: wire.HsmActRelease}); err != nil {
			return err
		}
		if cur.State == wire.HsmReleased || len(n.Layout.Chains) == 0 {
			return nil // nothing to freeze
		}
		if rec, err := getMigration(tx, ino); err != nil {
			return err
		} else if rec != nil {
			return errs.New(errs.Busy, "the file is being migrated to a new layout; release it after the migration")
		}
		staged := false
		p := inoKey(pfxStaged, ino)
		if err := tx.Scan(p, kv.PrefixEnd(p), 1, func(_, _ []byte) bool { staged = true; return false }); err != nil {
			return err
		}
		if staged {
			return errs.New(errs.Busy, "the file has data staged on a client (absorb policy) that is not on the targets yet")
		}
		old, err := getReleaseFence(tx, ino)
		if err != nil {
			return err
		}
		if old != nil && old.State == releaseThawing {
			return errs.New(errs.Busy, "an earlier release of the file is being given up; try again")
		}
		fence = &releaseFence{State: releaseFrozen, Deadline: s.nowNs() + int64(ReleaseLease), Gen: cur.Gen, Layout: n.Layout}
		tx.Set(releaseKey(ino), fence.encode())
		return nil
	})
	if err != nil || fence == nil {
		return r, err
	}
	if err := s.fenceLayout(ctx, ino, fence.Layout, wire.FenceFreeze); err != nil {
		return r, fmt.Errorf("meta: freeze the chunks for the release (thawed when its lease runs out): %w", err)
	}
	return r, nil
}

// releaseThaw gives up the release of file ino frozen for copy gen (0:
// any): the record is marked thawing (no commit from then on), the chunks
// are thawed, and the record goes. None is no error.
func (s *Service) releaseThaw(ctx context.Context, ino, gen uint64) error {
	var fence *releaseFence
	err := s.update(ctx, func(tx kv.Txn) error {
		var err error
		if fence, err = getReleaseFence(tx, ino); err != nil || fence == nil {
			return err
		}
		if gen != 0 && fence.Gen != gen && fence.State == releaseFrozen {
			fence = nil // another release's freeze
			return nil
		}
		fence.State = releaseThawing
		tx.Set(releaseKey(ino), fence.encode())
		return nil
	})
	if err != nil || fence == nil {
		return err
	}
	if err := s.fenceLayout(ctx, ino, fence.Layout, wire.FenceThaw); err != nil {
		return fmt.Errorf("meta: thaw the chunks of a release given up (retried by the next pass): %w", err)
	}
	return s.update(ctx, func(tx kv.Txn) error {
		cur, err := getReleaseFence(tx, ino)
		if err != nil || cur == nil || cur.State != releaseThawing {
			return err
		}
		tx.Delete(releaseKey(ino))
		return nil
	})
}

// thawExpiredReleases thaws the releases whose lease ran out more than
// migrateGrace ago (their clients died), and finishes those being thawed.
func (s *Service) thawExpiredReleases(ctx context.Context) error {
	now := s.nowNs()
	list, err := scanDue(ctx, s.db, pfxRelease, "release fence", func(ino uint64, v []byte) (uint64, bool, error) {
		var r releaseFence
		if err := decodeReleaseFence(v, &r); err != nil {
			return 0, false, err
		}
		return ino, r.State == releaseThawing || now > r.Deadline+int64(migrateGrace), nil
	})
	if err != nil {
		return err
	}
	var failed []error
	for _, ino := range list {
		s.log.Info("meta: thawing a release whose lease ran out", "ino", ino)
		if err := s.releaseThaw(ctx, ino, 0); err != nil {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}
