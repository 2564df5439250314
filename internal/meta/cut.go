package meta

import (
	"context"
	"sync/atomic"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Cut generations order a truncate's cut of a file's chunks against the
// size commits of writes other clients make to the file (wire/cut.go).
// The decisions are the pure functions below; the handlers apply them in
// one transaction each.

// cutState is what the decisions read and change of an inode.
type cutState struct {
	Gen uint64 // odd while a cut runs
	At  int64  // when the running cut began (service clock, ns)
}

func (c cutState) running() bool { return c.Gen&1 == 1 }

// heldPast reports whether the running cut began more than hold ago: its
// truncate has stopped (its chunk truncates have timed out, wire.CutTimeout)
// and the cut may be taken over.
func (c cutState) heldPast(now, hold int64) bool { return c.running() && now-c.At > hold }

// takeOver ends a cut held past hold (the generation moves on to even);
// it reports whether it did.
func (c *cutState) takeOver(now, hold int64) bool {
	if !c.heldPast(now, hold) {
		return false
	}
	c.Gen, c.At = c.Gen+1, 0
	return true
}

// begin begins a cut at now: errs.Busy while another runs that has not
// been held past hold.
func (c *cutState) begin(now, hold int64) error {
	if c.running() && !c.takeOver(now, hold) {
		return errs.New(errs.Busy, "another truncate is cutting the file's chunks")
	}
	c.Gen, c.At = c.Gen+1, now
	return nil
}

// end ends the cut of generation gen, the one begin made: errs.Busy if it
// is no longer the file's (the cut was taken over; the truncate starts
// again).
func (c *cutState) end(gen uint64) error {
	if c.Gen != gen || !c.running() {
		return errs.New(errs.Busy, "the truncate's cut (generation %d) was taken over (now %d): cut again", gen, c.Gen)
	}
	c.Gen, c.At = c.Gen+1, 0
	return nil
}

// commits reports whether a size commit whose writer knew generation
// known before it wrote its data applies: only if no cut began since,
// and none runs.
func (c cutState) commits(known uint64) bool { return !c.running() && c.Gen == known }

// CutTotals counts what cut generations did in this metadata service
// since it started (exported as sluice_cut_*).
type CutTotals struct {
	Begun     uint64 // cuts begun (OpCutBegin)
	Refused   uint64 // size commits refused: their data is written again
	Takeovers uint64 // cuts held past wire.CutHold, taken over
}

type cutCounters struct{ begun, refused, takeovers atomic.Uint64 }

// CutTotals returns the service's cut counts.
func (s *Service) CutTotals() CutTotals {
	c := &s.cuts
	return CutTotals{Begun: c.begun.Load(), Refused: c.refused.Load(), Takeovers: c.takeovers.Load()}
}

func cutOf(n *inode) cutState       { return cutState{Gen: n.Cut, At: n.CutAt} }
func (c cutState) into(n *inode)    { n.Cut, n.CutAt = c.Gen, c.At }
func (s *Service) cutHoldNs() int64 { return int64(wire.CutHold) }

// CutBegin begins a cut of the chunks of regular file ino (wire.OpCutBegin).
func (s *Service) CutBegin(ctx context.Context, ino uint64) (wire.CutResp, error) {
	took := false
	r, err := s.cutChange(ctx, "cutbegin", ino, func(c *cutState, now int64) (bool, error) {
		took = c.heldPast(now, s.cutHoldNs())
		return true, c.begin(now, s.cutHoldNs())
	})
	if err == nil {
		s.cuts.begun.Add(1)
		if took {
			s.cuts.takeovers.Add(1)
		}
	}
	return r, err
}

// CutGen answers the cut generation of regular file ino (wire.OpCutGen),
// taking over a cut held past wire.CutHold.
func (s *Service) CutGen(ctx context.Context, ino uint64) (wire.CutResp, error) {
	took := false
	r, err := s.cutChange(ctx, "cutgen", ino, func(c *cutState, now int64) (bool, error) {
		took = c.takeOver(now, s.cutHoldNs())
		return took, nil
	})
	if err == nil && took {
		s.cuts.takeovers.Add(1)
	}
	return r, err
}

// CutEnd ends the cut of generation gen of regular file ino without a
// size change (wire.OpCutEnd).
func (s *Service) CutEnd(ctx context.Context, ino, gen uint64) (wire.CutResp, error) {
	return s.cutChange(ctx, "cutend", ino, func(c *cutState, now int64) (bool, error) {
		return true, c.end(gen)
	})
}

// cutChange applies fn to the cut state of regular file ino, writing the
// inode when fn says it changed it, and answers the state and attributes.
func (s *Service) cutChange(ctx context.Context, op string, ino uint64, fn func(c *cutState, now int64) (bool, error)) (wire.CutResp, error) {
	var r wire.CutResp
	err := s.update(ctx, func(tx kv.Txn) error {
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		if !n.isReg() {
			return errs.New(errs.Invalid, "not a regular file")
		}
		c := cutOf(n)
		changed, err := fn(&c, s.nowNs())
		if err != nil {
			return err
		}
		if changed {
			c.into(n)
			tx.Set(inodeKey(ino), n.encode())
		}
		r.Cut = c.Gen
		r.Attr, err = attrOf(tx, ino, n)
		return err
	})
	if err != nil {
		return wire.CutResp{}, inoErr(op, ino, err)
	}
	return r, nil
}
