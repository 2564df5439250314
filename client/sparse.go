package client

import (
	"context"
	"io"
	"io/fs"
	"sort"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Holes. A file's chunks know which of their 64 KiB blocks hold data
// (wire.OpChunkMap): a block never written, cut away or punched
// (ZeroRange) holds none. SeekData and SeekHole are lseek(2)'s SEEK_DATA
// and SEEK_HOLE over that map. They may call a hole data, never data a
// hole: bytes outside what they report as data read as zeros. The bytes a
// file keeps in the metadata service (its first InlineLen), a released
// file's bytes and every file on targets from before the map count as
// data, and so do blocks written with zeros.

// SeekData returns the offset of the first byte at or after off that
// may hold data; io.EOF when off is at or past the file's end or only
// holes follow it (lseek(2) answers ENXIO).
func (f *File) SeekData(ctx context.Context, off int64) (int64, error) {
	return f.seekSparse(ctx, off, false)
}

// SeekHole returns the offset of the first hole at or after off; the
// file's end counts as a hole. io.EOF when off is at or past the end.
func (f *File) SeekHole(ctx context.Context, off int64) (int64, error) {
	return f.seekSparse(ctx, off, true)
}

// mapWindow is the file range one round of a seek maps: each chunk is
// asked about at most this much of its bytes.
const mapWindow = wire.MaxMapLen

func (f *File) seekSparse(ctx context.Context, off int64, hole bool) (int64, error) {
	op := "seek data"
	if hole {
		op = "seek hole"
	}
	if off < 0 {
		return 0, opErr(op, f.name, errs.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	size, inline, err := f.mapStartLocked(ctx, op)
	if err != nil {
		return 0, err
	}
	if off >= size {
		return 0, io.EOF
	}
	at := off
	if at < inline {
		if !hole {
			return at, nil
		}
		at = inline
	}
	var next int64
	found := false
	unmapped, err := f.scanRuns(ctx, at, size, func(runs [][2]int64, from, end int64) bool {
		next, found = seekIn(runs, from, end, hole)
		return found
	})
	switch {
	case err != nil:
		return 0, opErr(op, f.name, err)
	case found:
		return next, nil
	case hole:
		return size, nil // the end, or targets that cannot tell
	case unmapped >= 0:
		return unmapped, nil // the targets cannot tell: data
	}
	return 0, io.EOF
}

// scanRuns calls fn with the data runs (dataRuns) of each window of
// [at, size) in turn, until fn returns true. It returns where the map
// stopped because the targets know none (noChunkMap, before 2026-12-05;
// all data from there on, as far as anybody can tell), else -1. f.mu is
// held.
func (f *File) scanRuns(ctx context.Context, at, size int64, fn func(runs [][2]int64, from, end int64) bool) (unmapped int64, err error) {
	for ; at < size; at += mapWindow {
		end := min(at+mapWindow, size)
		runs, err := f.dataRuns(ctx, at, end-at)
		if errs.CodeOf(err) == errs.NotSupported {
			f.c.noChunkMap.Store(true)
			return at, nil
		}
		if err != nil {
			return -1, err
		}
		if fn(runs, at, end) {
			break
		}
	}
	return -1, nil
}

// mapStartLocked readies a look at the file's map for op: this File's
// own writes go out first, as for reads, and the attributes are learnt.
// It returns the file's size and how many of its first bytes count as
// data whatever the chunks say: its inline bytes, or all of them where
// the chunks cannot tell (a released file, no chunks, older targets).
// f.mu is held.
func (f *File) mapStartLocked(ctx context.Context, op string) (size, inline int64, err error) {
	if f.closed {
		return 0, 0, opErr(op, f.name, fs.ErrClosed)
	}
	if len(f.buf) > 0 || len(f.sem) > 0 {
		if err := f.waitFlushesLocked(ctx); err != nil {
			return 0, 0, opErr(op, f.name, err)
		}
	}
	if err := f.awaitStagedLocked(ctx); err != nil {
		return 0, 0, opErr(op, f.name, err)
	}
	var a wire.Attr
	if err := f.c.metaCall(ctx, wire.OpGetAttr, &wire.InoReq{Ino: f.ino}, &a); err != nil {
		return 0, 0, opErr(op, f.name, err)
	}
	f.learn(&a)
	f.learnLayout(&a)
	size = max(f.size, int64(a.Size))
	inline = min(int64(a.InlineLen), size)
	if a.Flags&wire.AttrChunks == 0 || a.Flags&wire.AttrReleased != 0 || f.c.noChunkMap.Load() || len(f.lay().Chains) == 0 {
		inline = size // all data, as far as anybody can tell here
	}
	return size, inline, nil
}

// DataBytes returns how many of the file's bytes are stored: those in
// the blocks of its chunks that hold data (64 KiB each, the last one of a
// chunk as long as the chunk) and its inline bytes. Size less DataBytes
// is what its holes save. A file the chunks cannot tell about (released,
// on older targets) counts whole.
func (f *File) DataBytes(ctx context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	size, inline, err := f.mapStartLocked(ctx, "map")
	if err != nil {
		return 0, err
	}
	total := inline
	unmapped, err := f.scanRuns(ctx, inline, size, func(runs [][2]int64, _, _ int64) bool {
		for _, r := range runs {
			total += r[1] - r[0]
		}
		return false
	})
	switch {
	case err != nil:
		return 0, opErr("map", f.name, err)
	case unmapped >= 0:
		return size, nil // the targets cannot tell: all data
	}
	return total, nil
}

// seekIn answers a seek from at within a window [at, end) whose data is
// runs (file ranges in order, adjacent ones merged): the first byte of
// data, or the first hole's, at or after at, if the window has one.
func seekIn(runs [][2]int64, at, end int64, hole bool) (int64, bool) {
	if !hole {
		if len(runs) == 0 {
			return 0, false
		}
		return max(runs[0][0], at), true
	}
	for _, r := range runs {
		if r[0] > at {
			break // a hole at at
		}
		at = max(at, r[1])
	}
	return at, at < end
}

// dataRuns returns the file ranges of [off, off+n) that the file's chunks
// hold data for, in order, adjacent ones merged. f.mu is held.
func (f *File) dataRuns(ctx context.Context, off, n int64) ([][2]int64, error) {
	var out [][2]int64
	err := f.withLayout(ctx, false, func(l placement.Layout) error {
		out = out[:0]
		ext := l.Split(off, n)
		// One request per chunk, for the chunk range its extents span.
		type span struct {
			chain    placement.ChainID
			off, end int64
			runs     []wire.ChunkRun
		}
		spans := map[int]*span{}
		for _, e := range ext {
			s := spans[e.Slot]
			if s == nil {
				spans[e.Slot] = &span{chain: e.Chain, off: e.ChunkOff, end: e.ChunkOff + e.Len}
				continue
			}
			s.off, s.end = min(s.off, e.ChunkOff), max(s.end, e.ChunkOff+e.Len)
		}
		data := l.DataID(f.ino)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(32)
		for slot, s := range spans {
			g.Go(func() error {
				var r wire.ChunkMapResp
				_, err := f.c.chunkCall(gctx, chunkReq{chain: s.chain, op: wire.OpChunkMap, resp: &r,
					msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
						return &wire.ChunkMapReq{ChunkRef: wire.ChunkRef{Target: t, ChainRef: ref, Ino: data, Slot: uint32(slot)}, Off: uint64(s.off), Len: uint64(s.end - s.off), Qos: f.c.qos}
					}})
				s.runs = r.Runs
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		for _, e := range ext {
			out = appendExtentRuns(out, e, spans[e.Slot].runs)
		}
		return nil
	})
	return out, err
}

// appendExtentRuns appends to out the file ranges of extent e that the
// chunk runs (chunk ranges in order) cover, merging adjacent ones; out's
// last range must end at or before e's first byte.
func appendExtentRuns(out [][2]int64, e placement.Extent, runs []wire.ChunkRun) [][2]int64 {
	lo, hi := uint64(e.ChunkOff), uint64(e.ChunkOff+e.Len)
	i := sort.Search(len(runs), func(i int) bool { return runs[i].End > lo })
	for ; i < len(runs) && runs[i].Off < hi; i++ {
		from := e.FileOff + int64(max(runs[i].Off, lo)-lo)
		to := e.FileOff + int64(min(runs[i].End, hi)-lo)
		if k := len(out) - 1; k >= 0 && out[k][1] == from {
			out[k][1] = to
			continue
		}
		out = append(out, [2]int64{from, to})
	}
	return out
}
