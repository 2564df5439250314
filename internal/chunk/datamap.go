package chunk

import "fmt"

// DataRuns returns where chunk id's bytes in [off, off+n) live in its
// data file: the runs of blocks whose entries say their bytes are stored,
// as [start, end) chunk offsets in order, adjacent blocks merged, clipped
// to the range and to the chunk's length; and the chunk's length. A hole,
// a zero block (see Punch) and bytes past the chunk's length are not data:
// they read as zeros. The answer is what the blocks' entries say now, the
// map lseek(2)'s SEEK_DATA and SEEK_HOLE give through a file's chunks. A
// missing chunk has no runs (length 0), unless it is frozen: errs.Moved.
func (s *Store) DataRuns(id ID, off, n int64) (runs [][2]int64, length int64, err error) {
	if err := s.checkRange("map", id, off, n); err != nil {
		return nil, 0, err
	}
	h, err := s.lockChunk(id, false, false)
	if err == errNoChunk {
		if s.Frozen(id) {
			return nil, 0, s.moved(id)
		}
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("chunk: map chunk %v on target %d at %d+%d: %w", id, s.opts.Target, off, n, err)
	}
	defer s.unlock(h, false)
	length = h.length
	end := min(off+n, length)
	if off >= end {
		return nil, length, nil
	}
	// Entries past the sidecar's end are holes.
	top := min((end+BlockSize-1)/BlockSize, (h.sumSize+entrySize-1)/entrySize)
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	for b0 := off / BlockSize; b0 < top; b0 += maxBatch {
		ents := sc.old[:min(maxBatch, top-b0)]
		if err := s.readEntries(h, b0, sc.oldRaw[:], ents); err != nil {
			return nil, length, err
		}
		for i, e := range ents {
			if !e.hasData() {
				continue
			}
			bs := (b0 + int64(i)) * BlockSize
			from, to := max(bs, off), min(bs+int64(e.cur.n), end)
			if from >= to {
				continue
			}
			if k := len(runs) - 1; k >= 0 && runs[k][1] == from {
				runs[k][1] = to
				continue
			}
			runs = append(runs, [2]int64{from, to})
		}
	}
	return runs, length, nil
}
