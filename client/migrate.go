package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// MigrateSpec is the layout a file migrates to. Zero fields keep the
// file's current value; Pool places the new layout in a pool's targets
// ("" for all targets).
type MigrateSpec struct {
	StripeSize  int64
	StripeCount int
	Replicas    int
	Pool        string
	// Chains, if set, are the new layout's chains (for one replica: target
	// IDs), as chosen by a plan (sluice rebalance); the stripe count is
	// their number.
	Chains []uint32
	// Components, if set, make the new layout progressive (ADR 0021):
	// StripeSize and StripeCount must then be 0. Without them, a
	// progressive file keeps its components unless StripeSize or
	// StripeCount asks for a plain layout.
	Components []LayoutComponent
}

// MigrateOptions tune a migration. The zero value is fine.
type MigrateOptions struct {
	// Rate caps the bytes per second the migration's first copy reads (0:
	// no cap). The copy after the freeze runs at full speed, since writers
	// to the file wait for it.
	Rate int64
	// Lease is how long the metadata service keeps the migration without
	// hearing from this client (0: its default, 30 s); past it, the
	// service aborts it. It is renewed every third of it.
	Lease time.Duration
	// Phase, if set, is called as the migration enters each phase:
	// "copy", "freeze", "recopy", "verify", "commit", with the new layout
	// (progress; tests stop the migrator there).
	Phase func(phase string, to Layout)
}

// MigrateResult says what a migration did.
type MigrateResult struct {
	Old, New Layout
	Bytes    int64 // bytes copied in the first pass
	Recopied int64 // bytes copied again after the freeze (written meanwhile)
	Moved    bool  // false: the file had no chunks, only its layout changed
	// Unchanged counts the old chunks not read again after the freeze:
	// their lengths and block checksums, as the targets report them,
	// matched what the first copy read. Compared counts the new chunks
	// checked against the old ones by the same means instead of being
	// read back (moves to other chains in the same shape).
	Unchanged, Compared int
}

// migratePiece is the most bytes read or written at once.
const migratePiece = 4 << 20

// Migrate moves the data of the regular file at p to a new layout while
// the file stays in use (ADR 0020). It copies every chunk under a new data
// ID, freezes the old chunks (writers wait, readers go on), copies again
// what changed meanwhile, checks every copied byte against what was read,
// makes the copy durable and switches the layout in one metadata
// transaction. Readers and writers that kept the old layout are sent to
// the new one by the targets. On any failure the migration is aborted and
// the file keeps its old layout; if this process dies, the metadata
// service aborts it once its lease runs out.
func (c *Client) Migrate(ctx context.Context, p string, spec MigrateSpec, opts MigrateOptions) (MigrateResult, error) {
	a, err := c.resolve(ctx, p, true)
	if err != nil {
		return MigrateResult{}, opErr("migrate", p, err)
	}
	if a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return MigrateResult{}, opErr("migrate", p, errs.New(errs.Invalid, "client: only regular files migrate"))
	}
	res, err := c.migrate(ctx, a.Ino, a.Layout, spec, opts)
	return res, opErr("migrate", p, err)
}

func (c *Client) migrate(ctx context.Context, ino uint64, cur placement.Layout, spec MigrateSpec, opts MigrateOptions) (MigrateResult, error) {
	want := placement.Layout{StripeSize: cur.StripeSize, StripeCount: cur.StripeCount, Replicas: cur.Replicas}
	if spec.StripeSize != 0 {
		if spec.StripeSize < 0 || spec.StripeSize > placement.MaxStripeSize {
			return MigrateResult{}, errs.New(errs.Invalid, "client: stripe size %d is out of range", spec.StripeSize)
		}
		want.StripeSize = uint32(spec.StripeSize)
	}
	if spec.StripeCount != 0 {
		if spec.StripeCount < 0 || spec.StripeCount > placement.MaxStripeCount {
			return MigrateResult{}, errs.New(errs.Invalid, "client: stripe count %d is out of range", spec.StripeCount)
		}
		want.StripeCount = uint16(spec.StripeCount)
	}
	if spec.Replicas != 0 {
		if spec.Replicas < 1 || spec.Replicas > placement.MaxReplicas {
			return MigrateResult{}, errs.New(errs.Invalid, "client: %d replicas is out of range", spec.Replicas)
		}
		want.Replicas = uint8(spec.Replicas)
	}
	if want.Replicas == 1 {
		want.Replicas = 0
	}
	if len(spec.Components) > 0 {
		if spec.StripeSize != 0 || spec.StripeCount != 0 || len(spec.Chains) > 0 {
			return MigrateResult{}, errs.New(errs.Invalid, "client: a progressive layout's components take their own stripe sizes, counts and chains")
		}
		comps, err := PlacementComps(spec.Components)
		if err != nil {
			return MigrateResult{}, err
		}
		want.Comps, want.StripeSize, want.StripeCount = comps, comps[0].StripeSize, 0
	} else if cur.Progressive() && spec.StripeSize == 0 && spec.StripeCount == 0 {
		// A progressive file keeps its components (ADR 0021), their
		// chains chosen anew (each from its pool, else spec.Pool) or
		// given; a stripe size or count asked for makes it plain.
		want.Comps = cur.Comps
		want.StripeSize, want.StripeCount = cur.StripeSize, cur.StripeCount
	}
	if len(spec.Chains) > 0 {
		if len(spec.Chains) > placement.MaxStripeCount {
			return MigrateResult{}, errs.New(errs.Invalid, "client: %d chains is over the limit of %d", len(spec.Chains), placement.MaxStripeCount)
		}
		want.StripeCount = uint16(len(spec.Chains))
		for _, c := range spec.Chains {
			want.Chains = append(want.Chains, placement.ChainID(c))
		}
	}
	lease := opts.Lease
	if lease <= 0 {
		lease = 30 * time.Second
	}
	req := &wire.MigrateReq{Ino: ino, Action: wire.MigrateBegin, Layout: want, Pool: spec.Pool, Lease: int64(lease)}
	var begun wire.MigrateResp
	if err := c.metaCall(ctx, wire.OpMigrate, req, &begun); err != nil {
		return MigrateResult{}, err
	}
	res := MigrateResult{Old: layoutFrom(begun.Old), New: layoutFrom(begun.New)}
	if begun.Done {
		return res, nil
	}
	res.Moved = true
	m := &migration{c: c, ino: ino, old: begun.Old, new: begun.New, lease: lease, phase: opts.Phase,
		pieces: make(map[pieceKey]*piece)}
	if opts.Rate > 0 {
		m.limit = rate.NewLimiter(rate.Limit(opts.Rate), migratePiece)
	}
	err := m.run(ctx, &res)
	res.Unchanged, res.Compared = m.checked.recopy, m.checked.verify
	if err != nil {
		// Thaw and drop the copy now rather than at the lease's end.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		abort := &wire.MigrateReq{Ino: ino, Action: wire.MigrateAbort, Data: begun.New.Data}
		if aerr := c.metaCall(actx, wire.OpMigrate, abort, &wire.MigrateResp{}); aerr != nil {
			err = errors.Join(err, fmt.Errorf("abort (the metadata service aborts it when its lease runs out): %w", aerr))
		}
		return res, err
	}
	return res, nil
}

// pieceKey names a piece of an old chunk: its slot and offset.
type pieceKey struct {
	slot int
	off  int64
}

// piece is what the passes saw of one piece of an old chunk.
type piece struct {
	n1      int64  // bytes the first pass read
	wrote1  bool   // the first pass wrote them (they were not all zeros)
	seen2   bool   // the second pass read the piece
	n2      int64  // bytes it read
	sum2    uint64 // their xxhash
	sum1    uint64
	fileOff int64
}

// migration is one file's copy in progress.
type migration struct {
	c        *Client
	ino      uint64
	old, new placement.Layout
	lease    time.Duration
	phase    func(string, Layout)
	limit    *rate.Limiter

	mu     sync.Mutex
	pieces map[pieceKey]*piece
	end    int64 // where the old chunks' data ends in the file (after the freeze)
	// read1 is what the first pass read of each old slot, as block
	// checksums (digests below); frozen the old chunks' lengths and
	// digests once frozen (nil: not known, e.g. a target of an older
	// version).
	read1  map[int]*slotRead
	frozen map[int]wire.ChunkInfo
	// Checked counts the slots whose second read and read-back were
	// replaced by a comparison of digests (tests).
	checked struct{ recopy, verify int }
}

// slotRead is what the first pass read of one old chunk: its length then,
// and each block's CRC32C and byte count.
type slotRead struct {
	length int64
	crc    map[int64]uint32
	n      map[int64]int64
}

// digest returns the content digest (package chunk's ChunkInfo) of what
// was read, and false if the pass did not read every block whole (the
// chunk changed size meanwhile).
func (r *slotRead) digest() (uint64, bool) {
	d := checksum.NewDigester()
	for blk := int64(0); blk*checksum.BlockSize < r.length; blk++ {
		size := min(checksum.BlockSize, r.length-blk*checksum.BlockSize)
		c, ok := r.crc[blk]
		if !ok || r.n[blk] != size {
			return 0, false
		}
		d.Block(c, size)
	}
	return d.Sum64(), true
}

// sameContent reports whether two chunks (as OpChunkInfo reports them,
// ok false: missing) read the same: equal lengths and digests, or both
// empty.
func sameContent(a wire.ChunkInfo, aok bool, b wire.ChunkInfo, bok bool) bool {
	if !aok || a.Len == 0 {
		return !bok || b.Len == 0
	}
	return bok && a.Len == b.Len && a.Digest == b.Digest
}

// unchanged reports whether old slot's chunk, frozen, holds what the first
// pass read: then the second pass need not read it again.
func (m *migration) unchanged(slot int) bool {
	r := m.read1[slot]
	if r == nil || m.frozen == nil {
		return false
	}
	d, ok := r.digest()
	if !ok {
		return false
	}
	fi, found := m.frozen[slot]
	return sameContent(wire.ChunkInfo{Len: uint64(r.length), Digest: d}, true, fi, found)
}

// chunkInfos returns the lengths and digests of data's chunks in every
// slot of layout l, by slot (missing chunks left out), or nil if a target
// cannot tell (an older version) or fails: the caller then reads the
// bytes instead.
func (m *migration) chunkInfos(ctx context.Context, l placement.Layout, data uint64) map[int]wire.ChunkInfo {
	out := make(map[int]wire.ChunkInfo, len(l.Chains))
	for slot, ch := range l.Chains {
		var resp wire.ChunkListResp
		_, err := m.c.chunkCall(ctx, chunkReq{chain: ch, op: wire.OpChunkInfo, resp: &resp,
			msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
				return &wire.ChunkInfoReq{Target: t, ChainRef: ref, Ino: data, Slots: []uint32{uint32(slot)}}
			}})
		if err != nil {
			return nil
		}
		for _, in := range resp.Chunks {
			if in.Ino == data && int(in.Slot) == slot {
				out[slot] = in
			}
		}
	}
	return out
}

// sameShape reports whether layouts a and b map every file offset to the
// same slot and chunk offset (a move to other chains: rebalance, drain),
// so that each new chunk must read as the old one of its slot.
func sameShape(a, b placement.Layout) bool {
	return a.StripeSize == b.StripeSize && a.StripeCount == b.StripeCount && len(a.Chains) == len(b.Chains) &&
		slices.Equal(a.Comps, b.Comps)
}

func (m *migration) enter(p string) {
	if m.phase != nil {
		m.phase(p, layoutFrom(m.new))
	}
}

func (m *migration) step(ctx context.Context, action uint8) error {
	req := &wire.MigrateReq{Ino: m.ino, Action: action, Data: m.new.Data, Lease: int64(m.lease)}
	return m.c.metaCall(ctx, wire.OpMigrate, req, &wire.MigrateResp{})
}

func (m *migration) run(ctx context.Context, res *MigrateResult) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var renewer sync.WaitGroup
	renewer.Go(func() {
		t := time.NewTicker(m.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if err := m.step(ctx, wire.MigrateRenew); err != nil {
					cancel(fmt.Errorf("renew the migration's lease: %w", err))
					return
				}
			}
		}
	})
	defer func() { close(stop); renewer.Wait() }()
	fail := func(err error) error {
		if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
			return errors.Join(err, cause)
		}
		return err
	}

	m.enter("copy")
	n, err := m.pass(ctx, false)
	if err != nil {
		return fail(fmt.Errorf("copy: %w", err))
	}
	res.Bytes = n
	m.enter("freeze")
	if err := m.step(ctx, wire.MigrateFreeze); err != nil {
		return fail(fmt.Errorf("freeze the old chunks: %w", err))
	}
	m.frozen = m.chunkInfos(ctx, m.old, m.old.DataID(m.ino))
	m.enter("recopy")
	if res.Recopied, err = m.pass(ctx, true); err != nil {
		return fail(fmt.Errorf("copy again after the freeze: %w", err))
	}
	if err := m.finish(ctx); err != nil {
		return fail(err)
	}
	m.enter("verify")
	if err := m.verify(ctx); err != nil {
		return fail(err)
	}
	m.enter("commit")
	if err := m.step(ctx, wire.MigrateCommit); err != nil {
		return fail(fmt.Errorf("commit: %w", err))
	}
	return nil
}

// pass reads every old chunk and writes its pieces to the new layout. The
// first pass skips pieces of zeros (the new chunks keep holes there). The
// second, after the freeze, writes again each piece that changed since
// the first (padded with zeros over what the first wrote), zeros the
// pieces that are gone, and records where the data ends. It returns the
// bytes written.
func (m *migration) pass(ctx context.Context, again bool) (int64, error) {
	var written, end int64
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8) // writes in flight
	put := func(off int64, buf []byte) {
		g.Go(func() error {
			if err := m.write(gctx, off, buf); err != nil {
				return err
			}
			mu.Lock()
			written += int64(len(buf))
			mu.Unlock()
			return nil
		})
	}
	var readers errgroup.Group
	readers.SetLimit(4)
	if !again {
		m.read1 = make(map[int]*slotRead, len(m.old.Chains))
	}
	for slot := range m.old.Chains {
		if again && m.unchanged(slot) {
			// The frozen chunk holds what the first pass read (same
			// length, same block checksums): nothing to read again.
			m.mu.Lock()
			mu.Lock()
			for k, p := range m.pieces {
				if k.slot == slot {
					p.seen2, p.n2, p.sum2 = true, p.n1, p.sum1
					end = max(end, p.fileOff+p.n1)
				}
			}
			mu.Unlock()
			m.checked.recopy++
			m.mu.Unlock()
			continue
		}
		var rd *slotRead
		if !again {
			rd = &slotRead{crc: make(map[int64]uint32), n: make(map[int64]int64)}
			m.read1[slot] = rd
		}
		readers.Go(func() error {
			// Only the first pass is capped: after the freeze, writers
			// wait until the migration ends.
			chunkLen, err := m.readChunk(gctx, slot, !again, func(off int64, b []byte) error {
				k := pieceKey{slot, off}
				fileOff := m.old.FileOff(slot, off)
				sum := xxhash.Sum64(b)
				m.mu.Lock()
				p := m.pieces[k]
				if p == nil {
					p = &piece{fileOff: fileOff}
					m.pieces[k] = p
				}
				if rd != nil { // pieces start on block boundaries (stripes are multiples of blocks)
					for i := int64(0); i < int64(len(b)); i += checksum.BlockSize {
						blk := b[i:min(i+checksum.BlockSize, int64(len(b)))]
						rd.crc[(off+i)/checksum.BlockSize] = checksum.BlockCRC(blk)
						rd.n[(off+i)/checksum.BlockSize] = int64(len(blk))
					}
				}
				m.mu.Unlock()
				if !again {
					p.n1, p.sum1, p.wrote1 = int64(len(b)), sum, !allZero(b)
					if p.wrote1 {
						put(fileOff, bytes.Clone(b))
					}
					return nil
				}
				mu.Lock()
				end = max(end, fileOff+int64(len(b)))
				mu.Unlock()
				p.seen2, p.n2, p.sum2 = true, int64(len(b)), sum
				if p.n1 == p.n2 && p.sum1 == sum {
					return nil // unchanged
				}
				n := int64(len(b))
				if p.wrote1 {
					n = max(n, p.n1)
				}
				if !p.wrote1 && allZero(b) {
					return nil // a hole in the copy reads as these zeros
				}
				buf := make([]byte, n)
				copy(buf, b)
				put(fileOff, buf)
				return nil
			})
			if rd != nil {
				rd.length = chunkLen
			}
			return err
		})
	}
	rerr := readers.Wait()
	if again && rerr == nil {
		// Pieces the first pass copied that the chunks no longer hold
		// (a truncate): zeros, as the old layout reads them.
		for _, p := range m.pieces {
			if !p.seen2 && p.wrote1 {
				put(p.fileOff, make([]byte, p.n1))
			}
		}
	}
	werr := g.Wait()
	if err := errors.Join(rerr, werr); err != nil {
		return 0, err
	}
	if again {
		m.end = end
	}
	return written, nil
}

// readChunk reads old chunk slot in pieces that never cross a stripe,
// calling fn with each (from several goroutines at once; b is fn's until
// it returns): the first piece alone, which tells the chunk's length, then
// the rest of the chunk as it was then, 4 pieces at a time. It returns
// the chunk's length as that first piece found it (0 for none).
func (m *migration) readChunk(ctx context.Context, slot int, capped bool, fn func(off int64, b []byte) error) (int64, error) {
	stripe := int64(m.old.SlotStripeSize(slot))
	piece := min(stripe, migratePiece)
	data := m.old.DataID(m.ino)
	// read reads the piece at off; its length is 0 past the chunk's end.
	read := func(ctx context.Context, off int64, buf []byte) (int, int64, error) {
		n := int64(len(buf))
		if capped && m.limit != nil {
			if err := m.limit.WaitN(ctx, int(n)); err != nil {
				return 0, 0, err
			}
		}
		var resp wire.ChunkReadResp
		got, err := m.c.chunkCall(ctx, chunkReq{chain: m.old.Chains[slot], op: wire.OpChunkRead, resp: &resp, into: buf,
			msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
				return &wire.ChunkReadReq{ChunkRef: wire.ChunkRef{Target: t, ChainRef: ref, Ino: data, Slot: uint32(slot)},
					Off: uint64(off), Len: uint32(n), Qos: m.c.qos}
			}})
		if errs.CodeOf(err) == errs.Moved {
			// This migration froze the chunk, and it does not exist: a
			// frozen chunk reads as moved once it is gone.
			return 0, 0, nil
		}
		if err != nil {
			return 0, 0, fmt.Errorf("read slot %d at %d: %w", slot, off, err)
		}
		return got, int64(resp.ChunkLen), nil
	}
	size := func(off int64) int64 { return min(piece, stripe-off%stripe) }
	buf := make([]byte, size(0))
	got, chunkLen, err := read(ctx, 0, buf)
	if err != nil || got == 0 {
		return 0, err
	}
	if err := fn(0, buf[:got]); err != nil {
		return chunkLen, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for off := int64(got); off < chunkLen; off += size(off) {
		g.Go(func() error {
			buf := make([]byte, size(off))
			got, _, err := read(gctx, off, buf)
			if err != nil || got == 0 {
				return err
			}
			return fn(off, buf[:got])
		})
	}
	return chunkLen, g.Wait()
}

// write writes b at file offset off into the new layout's chunks.
func (m *migration) write(ctx context.Context, off int64, b []byte) error {
	data := m.new.Data
	for _, e := range extents(m.new, off, int64(len(b))) {
		piece := b[e.FileOff-off : e.FileOff-off+e.Len]
		_, err := m.c.chunkCall(ctx, chunkReq{chain: e.Chain, write: true, op: wire.OpChunkWrite, data: [][]byte{piece},
			msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
				return &wire.ChunkWriteReq{ChunkRef: wire.ChunkRef{Target: t, ChainRef: ref, Ino: data, Slot: uint32(e.Slot)},
					Off: uint64(e.ChunkOff), Qos: m.c.qos}
			}})
		if err != nil {
			return fmt.Errorf("write the copy at %d (chain %d, slot %d): %w", e.FileOff, e.Chain, e.Slot, err)
		}
	}
	return nil
}

// finish cuts every new chunk at the data's end (dropping what the first
// pass copied past a later truncate, and making the chunks exist) and
// makes them durable.
func (m *migration) finish(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	data := m.new.Data
	for slot, ch := range m.new.Chains {
		size := uint64(m.new.ChunkSize(slot, m.end))
		g.Go(func() error {
			_, err := m.c.chunkCall(gctx, chunkReq{chain: ch, write: true, op: wire.OpChunkTruncate,
				msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
					return &wire.ChunkTruncateReq{ChunkRef: wire.ChunkRef{Target: t, ChainRef: ref, Ino: data, Slot: uint32(slot)}, Size: size, Qos: m.c.qos}
				}})
			if err != nil {
				return fmt.Errorf("cut the copy's slot %d: %w", slot, err)
			}
			_, err = m.c.chunkCall(gctx, chunkReq{chain: ch, write: true, op: wire.OpChunkSync,
				msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
					return &wire.ChunkSyncReq{ChunkSetReq: wire.ChunkSetReq{Target: t, ChainRef: ref, Ino: data, Slots: []uint32{uint32(slot)}}, Qos: m.c.qos}
				}})
			if err != nil {
				return fmt.Errorf("sync the copy's slot %d: %w", slot, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// verify reads the whole copy back through the new layout and checks it
// against what the second pass read from the frozen chunks: each piece's
// bytes by their hash, zeros where the first pass wrote more.
func (m *migration) verify(ctx context.Context) error {
	// A move to other chains in the same shape: each new chunk must read
	// as the frozen old one of its slot, which the targets' block
	// checksums tell without reading the bytes back.
	checked := make(map[int]bool)
	if m.frozen != nil && sameShape(m.old, m.new) {
		if infos := m.chunkInfos(ctx, m.new, m.new.Data); infos != nil {
			for slot := range m.new.Chains {
				oi, ook := m.frozen[slot]
				ni, nok := infos[slot]
				if sameContent(oi, ook, ni, nok) {
					checked[slot] = true
					m.checked.verify++
				}
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	data := m.new.Data
	for k, p := range m.pieces {
		if checked[k.slot] {
			continue
		}
		n := min(max(p.n2, p.n1), m.end-p.fileOff)
		if n <= 0 {
			continue
		}
		g.Go(func() error {
			buf := make([]byte, n)
			for _, e := range extents(m.new, p.fileOff, n) {
				part := buf[e.FileOff-p.fileOff : e.FileOff-p.fileOff+e.Len]
				var resp wire.ChunkReadResp
				got, err := m.c.chunkCall(gctx, chunkReq{chain: e.Chain, op: wire.OpChunkRead, resp: &resp, into: part,
					msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
						return &wire.ChunkReadReq{ChunkRef: wire.ChunkRef{Target: t, ChainRef: ref, Ino: data, Slot: uint32(e.Slot)},
							Off: uint64(e.ChunkOff), Len: uint32(e.Len), Qos: m.c.qos}
					}})
				if err != nil {
					return fmt.Errorf("verify: read the copy at %d: %w", e.FileOff, err)
				}
				clear(part[got:])
			}
			n2 := min(p.n2, n)
			if !p.seen2 {
				n2 = 0
			}
			if (p.seen2 && xxhash.Sum64(buf[:n2]) != p.sum2) || !allZero(buf[n2:]) {
				return errs.New(errs.Corruption, "client: verify: the copy of file bytes [%d, %d) differs from the original", p.fileOff, p.fileOff+n)
			}
			return nil
		})
	}
	return g.Wait()
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
