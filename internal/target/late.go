package target

import (
	"context"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// bound is a write's, truncate's, punch's or fence's sender's deadline
// (the request's ApplyBy, wire/applyby.go), by this process's clock. A
// truncate or write applied after it could undo bytes that another client
// wrote after its sender gave up (ADR 0031, addendum).
type bound struct {
	dl    time.Time
	timed bool
}

// applyBy returns req's bound and a context that ends with it, so that
// the chain's forward carries what is left of it to the next replica.
func applyBy(ctx context.Context, req *wire.Request, applyBy uint64) (context.Context, bound, context.CancelFunc) {
	dl, timed := req.ApplyDeadline(applyBy)
	if !timed {
		return ctx, bound{}, func() {}
	}
	ctx, cancel := context.WithDeadline(ctx, dl)
	return ctx, bound{dl, true}, cancel
}

// check refuses the request op of ref if its bound has passed: called
// once it holds its chunk's lock (and its place in the scheduler), just
// before it is applied.
func (b bound) check(h *hosted, op string, ref wire.ChunkRef) error {
	if !b.timed {
		return nil
	}
	if late := time.Since(b.dl); late > 0 {
		h.c.lateOps.Add(1)
		return errs.New(errs.Unavailable, "target: chunk %s of inode %d slot %d came %v after its sender's deadline: not applied",
			op, ref.Ino, ref.Slot, late.Round(time.Millisecond))
	}
	return nil
}

// acquireInTime takes the request's place in the scheduler (gate.acquire),
// then refuses it (giving the place back) if its bound passed meanwhile;
// a wait for the place that its bound ended is refused the same way. The
// caller releases the place it gets.
func (s *Service) acquireInTime(ctx context.Context, b bound, h *hosted, op string, ref wire.ChunkRef, tag wire.QosTag, cost int) (func(), error) {
	release, err := s.gate.acquire(ctx, tag, cost)
	if lerr := b.check(h, op, ref); lerr != nil {
		if err == nil {
			release()
		}
		return nil, lerr
	}
	return release, err
}
