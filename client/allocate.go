package client

import (
	"context"
	"errors"
	"io/fs"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// What fallocate(2) asks of a file, for the mount and library users who
// preallocate (fio, rsync --preallocate, download tools, checkpoint
// writers). Sluice reserves no space on the targets: a later write can
// still fail with ENOSPC. A zeroed or punched range gives the space of
// its whole 64 KiB chunk blocks back (wire.OpChunkPunch); its partial
// blocks, and everything on older targets, are written as zeros
// (docs/fuse.md, Limitations).

// Allocate makes the file at least end bytes long (fallocate(2) without
// flags): the bytes it adds read as zeros, and a file already as long or
// longer, also because another client wrote meanwhile, keeps its size.
// The file's buffered writes land first.
func (f *File) Allocate(ctx context.Context, end int64) error {
	if end < 0 {
		return opErr("allocate", f.name, errs.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a, err := f.prepareSizeLocked(ctx, "allocate")
	if err != nil {
		return err
	}
	if err := f.growLocked(ctx, &a, end); err != nil {
		return opErr("allocate", f.name, err)
	}
	return nil
}

// ZeroRange makes the n bytes at off read as zeros (fallocate(2) with
// FALLOC_FL_ZERO_RANGE, or FALLOC_FL_PUNCH_HOLE with keepSize). With
// keepSize the file's size stays as it is and bytes past it are left
// alone; without, the file grows to off+n if it is shorter. Bytes within
// the file that live in chunks are punched (their whole blocks freed);
// inline bytes, and bytes on targets that cannot punch, are written as
// zeros; those past its end cost only the size.
func (f *File) ZeroRange(ctx context.Context, off, n int64, keepSize bool) error {
	if off < 0 || n <= 0 || off+n < off {
		return opErr("zero range", f.name, errs.ErrInvalid)
	}
	f.mu.Lock()
	a, err := f.prepareSizeLocked(ctx, "zero range")
	f.mu.Unlock()
	if err != nil {
		return err
	}
	end := off + n
	// Zero what the file holds of the range. A write of another client
	// that grows the file meanwhile is ordered after this one: its bytes
	// past the size seen here are left alone, as they would be by a
	// fallocate that came first.
	stop := min(end, int64(a.Size))
	punched, err := f.punch(ctx, &a, off, stop)
	if err != nil {
		return err
	}
	if !punched {
		if err := f.writeZeros(ctx, off, stop); err != nil {
			return err
		}
	}
	if keepSize || end <= int64(a.Size) {
		return f.flush(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.waitFlushesLocked(ctx); err != nil {
		return opErr("zero range", f.name, err)
	}
	if err := f.growLocked(ctx, &a, end); err != nil {
		return opErr("zero range", f.name, err)
	}
	return nil
}

// zeroBlock is what ZeroRange writes, a piece at a time (writes copy it).
var zeroBlock = make([]byte, 1<<20)

// writeZeros writes zeros over [off, stop) through the write-back buffer.
func (f *File) writeZeros(ctx context.Context, off, stop int64) error {
	for at := off; at < stop; {
		m := min(stop-at, int64(len(zeroBlock)))
		if _, err := f.writeAt(ctx, zeroBlock[:m], at); err != nil {
			return err
		}
		at += m
	}
	return nil
}

// punch zeroes [off, stop) of the file, whose attributes are a, by
// punching its chunks (wire.OpChunkPunch) and writing zeros over its
// inline bytes, then records the change's mtime. It reports false, having
// punched nothing, where that cannot be done (a released file, one
// without chunks, targets from before punching): the caller writes zeros.
func (f *File) punch(ctx context.Context, a *wire.Attr, off, stop int64) (bool, error) {
	if off >= stop || f.c.noPunch.Load() || a.Flags&wire.AttrChunks == 0 || a.Flags&wire.AttrReleased != 0 || len(f.lay().Chains) == 0 {
		return false, nil
	}
	from := max(off, min(stop, int64(a.InlineLen)))
	if err := f.writeZeros(ctx, off, from); err != nil { // the inline bytes
		return false, err
	}
	if from == stop {
		return true, nil
	}
	cut := f.cutKnown()
	f.mu.Lock()
	err := f.waitFlushesLocked(ctx)
	if err == nil {
		f.dropCaches()
		err = f.punchChunks(ctx, from, stop-from)
	}
	f.mu.Unlock()
	switch {
	case errs.CodeOf(err) == errs.NotSupported:
		f.c.noPunch.Store(true) // a target from before 2026-12-05: nothing was punched
		return false, nil
	case err != nil:
		return false, opErr("zero range", f.name, err)
	}
	// The change's mtime: a size commit that grows nothing. A cut that
	// ran meanwhile (another client's truncate) zeroed, if anything,
	// more: only the commit goes again.
	for {
		if err = f.commitSize(ctx, 0, cut); !errors.Is(err, errCutRefused) {
			break
		}
		if err = f.awaitCut(ctx); err != nil {
			break
		}
		cut = f.cutKnown()
	}
	if err != nil {
		return false, opErr("zero range", f.name, err)
	}
	return true, nil
}

// punchChunks punches file bytes [off, off+n) in the chunks that hold
// them, one request per chunk, all at once. f.mu is held.
func (f *File) punchChunks(ctx context.Context, off, n int64) error {
	return f.withLayout(ctx, true, func(l placement.Layout) error {
		// A slot's pieces of a file range are one range of its chunk.
		type piece struct {
			chain    placement.ChainID
			slot     int
			off, end int64
		}
		var pieces []piece
		last := map[int]int{} // slot -> index in pieces
		for _, e := range l.Split(off, n) {
			if i, ok := last[e.Slot]; ok && pieces[i].chain == e.Chain && pieces[i].end == e.ChunkOff {
				pieces[i].end += e.Len
				continue
			}
			last[e.Slot] = len(pieces)
			pieces = append(pieces, piece{chain: e.Chain, slot: e.Slot, off: e.ChunkOff, end: e.ChunkOff + e.Len})
		}
		data := l.DataID(f.ino)
		g, gctx := errgroup.WithContext(ctx)
		for _, p := range pieces {
			g.Go(func() error {
				_, err := f.c.chunkCall(gctx, chunkReq{chain: p.chain, write: true, op: wire.OpChunkPunch,
					msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
						return &wire.ChunkPunchReq{ChunkRef: wire.ChunkRef{Target: t, ChainRef: ref, Ino: data, Slot: uint32(p.slot)}, Off: uint64(p.off), Len: uint64(p.end - p.off), Qos: f.c.qos}
					}})
				return err
			})
		}
		return g.Wait()
	})
}

// readySizeLocked readies the File for a change of its size or bytes
// that is not a plain write (op names it in errors): its buffered and
// staged writes land and its caches go. f.mu is held.
func (f *File) readySizeLocked(ctx context.Context, op string) error {
	if f.closed {
		return opErr(op, f.name, fs.ErrClosed)
	}
	if !f.writable() {
		return opErr(op, f.name, errs.New(errs.Permission, "client: file not open for writing"))
	}
	if err := f.waitFlushesLocked(ctx); err != nil {
		return opErr(op, f.name, err)
	}
	if err := f.awaitStagedLocked(ctx); err != nil {
		return opErr(op, f.name, err)
	}
	f.dropCaches()
	return nil
}

// prepareSizeLocked is readySizeLocked, and then learns the attributes,
// which it returns. f.mu is held.
func (f *File) prepareSizeLocked(ctx context.Context, op string) (wire.Attr, error) {
	var a wire.Attr
	if err := f.readySizeLocked(ctx, op); err != nil {
		return a, err
	}
	if err := f.c.metaCall(ctx, wire.OpGetAttr, &wire.InoReq{Ino: f.ino}, &a); err != nil {
		return a, opErr(op, f.name, err)
	}
	f.learn(&a)
	return a, nil
}

// growLocked makes the file whose attributes are a at least end bytes
// long, with one size change that the metadata service applies only if
// the file is still shorter (wire.SetSizeGrow): it never cuts a file that
// another client grew meanwhile, whose chunks nobody cut. A released
// file is restored first, as for a truncate. f.mu is held.
func (f *File) growLocked(ctx context.Context, a *wire.Attr, end int64) error {
	if end <= int64(a.Size) {
		f.size = max(f.size, int64(a.Size))
		return nil
	}
	if a.Flags&wire.AttrReleased != 0 {
		if err := f.restoreBeforeWriteLocked(ctx, a); err != nil {
			return err
		}
	}
	req := &wire.SetAttrReq{Ino: f.ino, Valid: wire.SetSize | wire.SetSizeGrow, Size: uint64(end)}
	if err := f.sendSizeLocked(ctx, req, a); err != nil {
		return err
	}
	f.size = max(f.size, int64(a.Size))
	f.truncs++
	return nil
}
