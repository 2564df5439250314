package target

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluice-fs/sluice/internal/chunk"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// handleFence freezes or thaws chunks (wire.OpChunkFence; see package
// chunk, "Fences") on this replica, then passes the request along the
// chain. Like a remove, it holds the chunks' locks from the local change
// until the next replica answered: a write in flight on the chain reaches
// every replica before the fence does, and none passes it on any replica.
func (s *Service) handleFence(ctx context.Context, req *wire.Request) (wire.Response, error) {
	var m wire.ChunkFenceReq
	if err := wire.Unmarshal(req.Body, &m); err != nil {
		return wire.Response{}, fmt.Errorf("target: chunk fence request: %w", err)
	}
	h, err := s.lookup(m.Target)
	if err != nil {
		return wire.Response{}, err
	}
	var apply func(st *chunk.Store, ids ...chunk.ID) error
	var what string
	switch m.Mode {
	case wire.FenceFreeze:
		apply, what = (*chunk.Store).Freeze, "freeze"
	case wire.FenceThaw:
		apply, what = (*chunk.Store).Thaw, "thaw"
	default:
		return wire.Response{}, h.fail(errs.New(errs.Invalid, "target: chunk fence request for ino %d on target %d: unknown mode %d", m.Ino, m.Target, m.Mode))
	}
	ctx, late, cancel := applyBy(ctx, req, m.ApplyBy)
	defer cancel()
	st, c, err := s.resolve(ctx, h, m.Target, m.ChainRef, accessOf(m.Flags))
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	slots := slices.Compact(slices.Sorted(slices.Values(m.Slots)))
	if c != nil {
		for _, slot := range slots {
			defer s.cs.locks.lock(chunkKey{m.Target, c.ID, m.Ino, slot})()
		}
	}
	if len(slots) > 0 {
		if err := late.check(h, what, wire.ChunkRef{Target: m.Target, Ino: m.Ino, Slot: slots[0]}); err != nil {
			return wire.Response{}, h.fail(err)
		}
	}
	ids := make([]chunk.ID, len(slots))
	for i, slot := range slots {
		ids[i] = chunk.ID{Ino: m.Ino, Slot: slot}
	}
	if err := apply(st, ids...); err != nil {
		return wire.Response{}, h.fail(fmt.Errorf("target: %s chunks of ino %d on target %d: %w", what, m.Ino, m.Target, err))
	}
	if c != nil && m.Flags&wire.FlagResync == 0 {
		fw := m
		fw.Flags |= wire.FlagForwarded
		err := s.forward(ctx, c, m.Target, wire.OpChunkFence, func(next placement.TargetID) wire.Message {
			fw.Target = next
			return &fw
		}, nil)
		if err != nil {
			return wire.Response{}, h.fail(err)
		}
	}
	return wire.Response{}, nil
}
