package target

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/chunk"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pause"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// resyncPiece is how many bytes one copy request carries.
const resyncPiece = 4 << 20

// startResyncs starts a resync for every syncing replica of a chain whose
// tail is hosted here, and cancels those the table no longer calls for.
func (s *Service) startResyncs(v view) {
	want := make(map[resyncKey]placement.Chain)
	for _, c := range v.chains {
		tail, ok := c.Tail()
		if !ok || s.targets[tail] == nil {
			continue
		}
		for _, r := range c.Replicas {
			if r.State == placement.Syncing {
				want[resyncKey{c.ID, r.Target}] = c
			}
		}
	}
	s.cs.mu.Lock()
	defer s.cs.mu.Unlock()
	if s.cs.mu.closed {
		return
	}
	if s.cs.mu.resyncs == nil {
		s.cs.mu.resyncs = make(map[resyncKey]*resyncJob)
	}
	for k, j := range s.cs.mu.resyncs {
		if c, ok := want[k]; !ok || c.Version != j.version {
			j.cancel()
			delete(s.cs.mu.resyncs, k)
		}
	}
	for k, c := range want {
		if s.cs.mu.resyncs[k] != nil {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		j := &resyncJob{version: c.Version, cancel: cancel}
		s.cs.mu.resyncs[k] = j
		s.cs.wg.Go(func() {
			defer cancel()
			s.runResync(ctx, c, k.dst, j)
		})
	}
}

// runResync runs one resync until it succeeds or is cancelled, retrying
// failures after a pause.
func (s *Service) runResync(ctx context.Context, c placement.Chain, dst placement.TargetID, j *resyncJob) {
	src, _ := c.Tail()
	log := s.opts.logger().With("chain", c.ID, "version", c.Version, "from", src, "to", dst)
	for attempt := 0; ; attempt++ {
		start := time.Now()
		err := s.resync(ctx, c, src, dst, j)
		if err == nil {
			j.mu.Lock()
			looked, copied := j.looked, j.copied
			j.mu.Unlock()
			log.Info("target: resync done", "chunks", looked, "copied", copied, "took", time.Since(start).Round(time.Millisecond))
			return
		}
		if ctx.Err() != nil {
			return
		}
		// A chain change refused by the syncing replica usually means it
		// has not yet heard of this version (the table reaches nodes with
		// their heartbeats): retry. If the table has really moved on,
		// startResyncs cancels ctx and the loop ends above.
		if errs.CodeOf(err) == errs.ChainChanged {
			log.Info("target: resync waits for the chain version to spread; retrying", "err", err)
		} else {
			log.Warn("target: resync failed; retrying", "err", err)
		}
		if pause.For(ctx, min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second)) != nil {
			return
		}
	}
}

// resync copies to dst what differs from the tail src, then reports it.
func (s *Service) resync(ctx context.Context, c placement.Chain, src, dst placement.TargetID, j *resyncJob) error {
	h := s.targets[src]
	st, err := h.chainStore(c.ID, s.opts)
	if err != nil {
		return err
	}
	conn, err := s.peer(ctx, dst)
	if err != nil {
		return err
	}
	ref := wire.ChainRef{Chain: c.ID, ChainVer: c.Version, Flags: wire.FlagResync}
	call := func(op wire.Op, req wire.Message, data [][]byte, resp wire.Message) error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := conn.Call(cctx, op, req, data, resp, nil)
		if err != nil && cctx.Err() != nil && ctx.Err() == nil {
			s.dropPeer(conn) // dead connection: the retry dials afresh
		}
		return err
	}

	// What the syncing replica has.
	remote := make(map[chunk.ID]wire.ChunkInfo)
	if _, err := listReplica(call, dst, ref, false, func(ci wire.ChunkInfo) {
		remote[chunk.ID{Ino: ci.Ino, Slot: ci.Slot}] = ci
	}); err != nil {
		return fmt.Errorf("list chunks of replica %d: %w", dst, err)
	}

	// The syncing replica's fences that the tail does not hold (thawed
	// while it was away) go first: they would refuse the copy of their
	// chunks. nil: a target from before fences were listed.
	dstFences, err := s.remoteFences(call, dst, ref)
	if err != nil {
		return err
	}
	if err := s.passFences(st, c, src, dst, ref, call, wire.FenceThaw, dstFences, func(id chunk.ID) bool { return !st.Frozen(id) }); err != nil {
		return err
	}

	buf := make([]byte, resyncPiece)
	for after, more := (chunk.ID{}), true; more; {
		var infos []chunk.Info
		if infos, more, err = st.List(after, 10000); err != nil {
			return err
		}
		j.mu.Lock()
		j.total = max(j.total, len(infos)+j.looked)
		j.mu.Unlock()
		for _, in := range infos {
			after = in.ID
			r, ok := remote[in.ID]
			delete(remote, in.ID)
			if ok && int64(r.Len) == in.Len && r.Digest == in.Digest {
				j.mu.Lock()
				j.looked++
				j.mu.Unlock()
				continue
			}
			if err := s.copyChunk(ctx, st, c, src, dst, in.ID, ref, call, buf); err != nil {
				return err
			}
			j.mu.Lock()
			j.looked++
			j.copied++
			j.mu.Unlock()
		}
	}
	// Chunks only the syncing replica has: removed while it was away.
	for id := range remote {
		unlock := s.cs.locks.lock(chunkKey{src, c.ID, id.Ino, id.Slot})
		_, found, err := st.ChunkInfo(id)
		if err == nil && !found {
			rm := &wire.ChunkRemoveReq{ChunkSetReq: wire.ChunkSetReq{Target: dst, ChainRef: ref, Ino: id.Ino, Slots: []uint32{id.Slot}}, Qos: TagOf(SystemResyncJob, qos.Background)}
			err = call(wire.OpChunkRemove, rm, nil, nil)
		}
		unlock()
		if err != nil {
			return fmt.Errorf("remove chunk %v from replica %d: %w", id, dst, err)
		}
	}
	// The tail's fences that the syncing replica lacks (frozen while it
	// was away, or before it joined): it must refuse what the others do.
	if dstFences != nil {
		have := make(map[chunk.ID]bool, len(dstFences))
		for _, id := range dstFences {
			have[id] = true
		}
		var missing []chunk.ID
		frozen, _ := st.FrozenList(chunk.ID{}, 0) // local: no pages
		for _, id := range frozen {
			if !have[id] {
				missing = append(missing, id)
			}
		}
		if err := s.passFences(st, c, src, dst, ref, call, wire.FenceFreeze, missing, st.Frozen); err != nil {
			return err
		}
	}
	s.cs.mu.Lock()
	m := s.cs.mu.meta
	s.cs.mu.Unlock()
	if m == nil {
		return errors.New("no metadata service to report to")
	}
	// Bounded, like every call of the resync: a report stuck on a dead
	// connection is retried instead of holding the replica in syncing.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return m.SyncDone(sctx, &wire.SyncDoneReq{Chain: c.ID, Version: c.Version, Target: dst})
}

// copyChunk replaces chunk id on dst with the tail's copy, holding the
// chunk's lock so that no write to it passes meanwhile.
func (s *Service) copyChunk(ctx context.Context, st *chunk.Store, c placement.Chain, src, dst placement.TargetID, id chunk.ID,
	ref wire.ChainRef, call func(wire.Op, wire.Message, [][]byte, wire.Message) error, buf []byte) error {
	unlock := s.cs.locks.lock(chunkKey{src, c.ID, id.Ino, id.Slot})
	defer unlock()
	in, found, err := st.ChunkInfo(id)
	if err != nil {
		return err
	}
	if !found { // removed since it was listed; the removal was passed on
		return nil
	}
	bg := TagOf(SystemResyncJob, qos.Background)
	// The copy starts from an empty chunk and skips the blocks that read
	// as zeros, so that holes (sparse writes, punched ranges) stay holes
	// on the new replica; the truncate to the length below covers them.
	// The chunk's lock keeps the chain's writes out meanwhile, and the
	// replica serves no reads until its resync is done.
	empty := &wire.ChunkTruncateReq{ChunkRef: wire.ChunkRef{Target: dst, ChainRef: ref, Ino: id.Ino, Slot: id.Slot}, Size: 0, Qos: bg}
	if err := call(wire.OpChunkTruncate, empty, nil, nil); err != nil {
		return fmt.Errorf("empty chunk %v on replica %d: %w", id, dst, err)
	}
	for off := int64(0); off < in.Len; off += resyncPiece {
		want := min(resyncPiece, in.Len-off)
		release, err := s.gate.acquire(ctx, bg, int(want))
		if err != nil {
			return err
		}
		n, _, err := st.ReadAt(id, off, buf[:want])
		release()
		if err != nil {
			return fmt.Errorf("read chunk %v for resync: %w", id, err)
		}
		for _, r := range dataRuns(buf[:n], chunk.BlockSize) {
			piece := buf[r[0]:r[1]]
			req := &wire.ChunkWriteReq{ChunkRef: wire.ChunkRef{Target: dst, ChainRef: ref, Ino: id.Ino, Slot: id.Slot}, Off: uint64(off + int64(r[0])), Qos: bg,
				DataCRC: checksum.DataCRC(piece), HasDataCRC: true}
			if err := call(wire.OpChunkWrite, req, [][]byte{piece}, nil); err != nil {
				return fmt.Errorf("copy chunk %v to replica %d: %w", id, dst, err)
			}
		}
	}
	tr := &wire.ChunkTruncateReq{ChunkRef: wire.ChunkRef{Target: dst, ChainRef: ref, Ino: id.Ino, Slot: id.Slot}, Size: uint64(in.Len), Qos: bg}
	if err := call(wire.OpChunkTruncate, tr, nil, nil); err != nil {
		return fmt.Errorf("truncate chunk %v on replica %d: %w", id, dst, err)
	}
	sy := &wire.ChunkSyncReq{ChunkSetReq: wire.ChunkSetReq{Target: dst, ChainRef: ref, Ino: id.Ino, Slots: []uint32{id.Slot}}, Qos: bg}
	if err := call(wire.OpChunkSync, sy, nil, nil); err != nil {
		return fmt.Errorf("sync chunk %v on replica %d: %w", id, dst, err)
	}
	return nil
}

// Resyncs returns the progress of the resyncs this service runs.
func (s *Service) Resyncs() []ResyncStatus {
	s.cs.mu.Lock()
	defer s.cs.mu.Unlock()
	var out []ResyncStatus
	for k, j := range s.cs.mu.resyncs {
		c := s.cs.mu.view.chains[k.chain]
		src, _ := c.Tail()
		j.mu.Lock()
		out = append(out, ResyncStatus{Chain: k.chain, Version: j.version, From: src, To: k.dst, Looked: j.looked, Copied: j.copied, Total: j.total})
		j.mu.Unlock()
	}
	return out
}

// listReplica pages through OpChunkList of replica dst of the chain,
// giving each entry to fn: its chunks, or with fences its fences. listed
// is false when dst answered a fence listing with its chunks instead (a
// target from before fences were listed; fn then saw none of them).
func listReplica(call func(wire.Op, wire.Message, [][]byte, wire.Message) error, dst placement.TargetID, ref wire.ChainRef,
	fences bool, fn func(wire.ChunkInfo)) (listed bool, err error) {
	for req := (wire.ChunkListReq{Target: dst, ChainRef: ref, Limit: 10000, Fences: fences}); ; {
		var page wire.ChunkListResp
		if err := call(wire.OpChunkList, &req, nil, &page); err != nil {
			return false, err
		}
		if page.Fences != fences {
			return false, nil
		}
		for _, ci := range page.Chunks {
			fn(ci)
			req.AfterIno, req.AfterSlot = ci.Ino, ci.Slot
		}
		if !page.More || len(page.Chunks) == 0 {
			return true, nil
		}
	}
}

// remoteFences lists the fences of replica dst of the chain (nil, nil
// from a target that cannot list them: it answers with its chunks).
func (s *Service) remoteFences(call func(wire.Op, wire.Message, [][]byte, wire.Message) error, dst placement.TargetID, ref wire.ChainRef) ([]chunk.ID, error) {
	out := []chunk.ID{}
	listed, err := listReplica(call, dst, ref, true, func(ci wire.ChunkInfo) { out = append(out, chunk.ID{Ino: ci.Ino, Slot: ci.Slot}) })
	switch {
	case err != nil:
		return nil, fmt.Errorf("list fences of replica %d: %w", dst, err)
	case !listed:
		s.opts.logger().Warn("target: a replica that cannot list its fences joins a chain: its fences are not resynced", "target", dst)
		return nil, nil
	}
	return out, nil
}

// passFences freezes or thaws (mode) chunks ids, in (Ino, Slot) order, on
// replica dst, one request per inode, each chunk only if want still holds
// for it with the tail's lock of the chunk held (in slot order, as
// handleFence takes them), so that a freeze or thaw passing along the
// chain meanwhile is ordered with it: either it comes after (and reaches
// dst after this), or want sees its effect.
func (s *Service) passFences(st *chunk.Store, c placement.Chain, src, dst placement.TargetID, ref wire.ChainRef,
	call func(wire.Op, wire.Message, [][]byte, wire.Message) error, mode uint8, ids []chunk.ID, want func(chunk.ID) bool) error {
	for len(ids) > 0 {
		n := 1
		for n < len(ids) && ids[n].Ino == ids[0].Ino {
			n++
		}
		group := ids[:n]
		ids = ids[n:]
		var slots []uint32
		var unlocks []func()
		for _, id := range group {
			unlocks = append(unlocks, s.cs.locks.lock(chunkKey{src, c.ID, id.Ino, id.Slot}))
			if want(id) {
				slots = append(slots, id.Slot)
			}
		}
		var err error
		if len(slots) > 0 {
			req := &wire.ChunkFenceReq{ChunkSetReq: wire.ChunkSetReq{Target: dst, ChainRef: ref, Ino: group[0].Ino, Slots: slots}, Mode: mode}
			err = call(wire.OpChunkFence, req, nil, nil)
		}
		for _, u := range unlocks {
			u()
		}
		if err != nil {
			return fmt.Errorf("pass the fences of ino %d to replica %d: %w", group[0].Ino, dst, err)
		}
	}
	return nil
}

// dataRuns returns the runs [start, end) of b, cut at multiples of block,
// that hold a byte other than zero: the pieces of a copy worth sending
// (b's offset is a multiple of block).
func dataRuns(b []byte, block int) [][2]int {
	var runs [][2]int
	for at := 0; at < len(b); at += block {
		end := min(at+block, len(b))
		if isZeros(b[at:end]) {
			continue
		}
		if k := len(runs) - 1; k >= 0 && runs[k][1] == at {
			runs[k][1] = end
			continue
		}
		runs = append(runs, [2]int{at, end})
	}
	return runs
}

// zeroPiece is what isZeros compares with.
var zeroPiece [chunk.BlockSize]byte

// isZeros reports whether b (at most chunk.BlockSize bytes) is all zeros.
func isZeros(b []byte) bool { return bytes.Equal(b, zeroPiece[:len(b)]) }
