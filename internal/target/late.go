package target

import (
	"context"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// applyBy bounds a write, truncate or punch by its sender's deadline (the
// request's ApplyBy, wire/applyby.go): the handler's context ends then,
// so that the chain's forward carries what is left of it to the next
// replica, and onTime, called once the request holds its chunk's lock and
// its place in the scheduler, with the error of taking that place,
// refuses a request whose deadline passed before it could be applied. A
// truncate or write applied later could undo bytes that another client
// wrote after its sender gave up (ADR 0031, addendum).
func applyBy(ctx context.Context, req *wire.Request, applyBy uint64) (context.Context, func(h *hosted, op string, ref wire.ChunkRef, err error) error, context.CancelFunc) {
	dl, timed := req.ApplyDeadline(applyBy)
	if !timed {
		return ctx, func(_ *hosted, _ string, _ wire.ChunkRef, err error) error { return err }, func() {}
	}
	ctx, cancel := context.WithDeadline(ctx, dl)
	onTime := func(h *hosted, op string, ref wire.ChunkRef, err error) error {
		if late := time.Since(dl); late > 0 {
			h.c.lateOps.Add(1)
			return errs.New(errs.Unavailable, "target: chunk %s of inode %d slot %d came %v after its sender's deadline: not applied",
				op, ref.Ino, ref.Slot, late.Round(time.Millisecond))
		}
		return err
	}
	return ctx, onTime, cancel
}
