package chunk

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Punch makes bytes [off, off+n) of chunk id read as zeros without
// changing its length, durably, and gives the space of the whole blocks
// in the range back to the file system: their entries become holes (the
// chunk's last block a "zero" entry of its length), then the data file's
// range is punched (fallocate(2) FALLOC_FL_PUNCH_HOLE). The bytes of the
// partial blocks at either end are written as zeros. Bytes past the
// chunk's length are left alone (they read as zeros already); a missing
// chunk is not an error. A frozen chunk (see Freeze) gives errs.Moved.
//
// The entries are durable before the data file is punched, so a crash
// in between leaves holes whose old bytes merely still take space. A file
// system that cannot punch keeps the bytes, unreferenced.
func (s *Store) Punch(id ID, off, n int64) error {
	if err := s.checkRange("punch", id, off, n); err != nil {
		return err
	}
	if s.Frozen(id) {
		return s.moved(id)
	}
	h, err := s.lockChunk(id, false, true)
	if err == errNoChunk {
		if s.Frozen(id) {
			return s.moved(id)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("chunk: punch chunk %v on target %d at %d+%d: %w", id, s.opts.Target, off, n, err)
	}
	defer s.unlock(h, true)
	if s.Frozen(id) {
		return s.moved(id) // checked under the chunk lock: see Freeze
	}
	if err := s.punchLocked(h, off, n); err != nil {
		return fmt.Errorf("chunk: punch chunk %v on target %d at %d+%d: %w", id, s.opts.Target, off, n, err)
	}
	return nil
}

// punchRange splits [off, end) of a chunk of length length into the
// whole blocks [b0, b1) it covers (the last block counts as whole up to
// the chunk's end) and the partial pieces before and after them: head is
// [off, headEnd), tail [tailOff, end); empty pieces have equal bounds.
// With no whole block, the range is all head.
func punchRange(off, end, length int64) (b0, b1, headEnd, tailOff int64) {
	end = min(end, length)
	if off >= end {
		return 0, 0, off, off
	}
	b0 = (off + BlockSize - 1) / BlockSize
	if end == length {
		b1 = (end + BlockSize - 1) / BlockSize
	} else {
		b1 = end / BlockSize
	}
	if b0 >= b1 {
		return 0, 0, end, end
	}
	return b0, b1, b0 * BlockSize, min(b1*BlockSize, end)
}

func (s *Store) punchLocked(h *handle, off, n int64) error {
	end := min(off+n, h.length)
	if off >= end {
		return nil
	}
	b0, b1, headEnd, tailOff := punchRange(off, end, h.length)
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	for _, piece := range [2][2]int64{{off, headEnd}, {tailOff, end}} {
		for at := piece[0]; at < piece[1]; {
			// Up to the next block boundary (a piece with no whole block
			// may span two blocks).
			m := min(piece[1], (at/BlockSize+1)*BlockSize) - at
			if err := s.writeLocked(h, sc, at, zeroBlock[:m], false); err != nil {
				return err
			}
			at += m
		}
	}
	if b0 < b1 {
		// The entries of the whole blocks, those that exist (entries past
		// the sidecar's end are holes already).
		last := (h.length - 1) / BlockSize
		top := min(b1, (h.sumSize+entrySize-1)/entrySize)
		if b0 < top {
			raw := make([]byte, (top-b0)*entrySize)
			for k := b0; k < top; k++ {
				e := entry{} // a hole
				if k == last {
					e = entry{cur: state{n: uint32(h.length - k*BlockSize)}, zero: true}
				}
				putEntry(raw[(k-b0)*entrySize:], uint32(k), e)
				delete(h.dirty, uint32(k))
			}
			if _, err := h.sum.WriteAt(raw, b0*entrySize); err != nil {
				return ioErr(err)
			}
			h.unsynced = true
		}
	}
	if err := s.syncLocked(h); err != nil {
		return err
	}
	if b0 < b1 {
		if from, to := b0*BlockSize, min(b1*BlockSize, h.dataSize); from < to {
			err := unix.Fallocate(int(h.data.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, from, to-from)
			if err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
				// The bytes are unreferenced: only their space is not
				// given back.
				s.log.Warn("chunk: punching the data file failed", "ino", h.id.Ino, "slot", h.id.Slot, "offset", from, "len", to-from, "err", err)
			}
		}
	}
	return nil
}
