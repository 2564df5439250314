package chunk

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluice-fs/sluice/internal/checksum"
)

// Info is a chunk's length and a digest of its logical content.
type Info struct {
	ID     ID
	Len    int64
	Digest uint64
}

// ChunkInfo returns chunk id's length and digest: an FNV-1a hash over the
// CRC32C and length of each block's logical content (holes and zero blocks
// count as the zeros they read as), so two chunks with the same length and
// digest read the same, however their bytes are laid out. A missing chunk
// gives Info{ID: id} and found false. The entries are verified as they
// are read; the data is not read.
func (s *Store) ChunkInfo(id ID) (info Info, found bool, err error) {
	h, err := s.lockChunk(id, false, false)
	if err == errNoChunk {
		return Info{ID: id}, false, nil
	}
	if err != nil {
		return Info{}, false, fmt.Errorf("chunk: stat chunk %v on target %d: %w", id, s.opts.Target, err)
	}
	defer s.unlock(h, false)
	info = Info{ID: id, Len: h.length}
	nblk := (h.length + BlockSize - 1) / BlockSize
	raw := make([]byte, min(nblk, maxBatch)*entrySize)
	ents := make([]entry, min(nblk, maxBatch))
	d := checksum.NewDigester()
	for b0 := int64(0); b0 < nblk; b0 += maxBatch {
		n := min(nblk-b0, maxBatch)
		// Entries past the sidecar's end are holes.
		have := max(min(n, h.sumSize/entrySize-b0), 0)
		if have > 0 {
			if err := s.readEntries(h, b0, raw, ents[:have]); err != nil {
				return Info{}, false, err
			}
		}
		for i := range n {
			blk := b0 + i
			size := min(int64(BlockSize), h.length-blk*BlockSize)
			var c uint32
			if i < have && ents[i].hasData() {
				e := ents[i]
				c = crcZeros(e.cur.crc, size-int64(e.cur.n))
			} else {
				c = crcZeros(0, size)
			}
			d.Block(c, size)
		}
	}
	info.Digest = d.Sum64()
	return info, true, nil
}

// List returns up to limit chunks after `after` in (Ino, Slot) order (a
// zero after: from the start), with their lengths and digests (see Stat),
// and whether more follow. It reads the whole directory tree each call.
func (s *Store) List(after ID, limit int) ([]Info, bool, error) {
	var ids []ID
	for i := range 256 {
		dir := filepath.Join(s.dir, "chunks", fmt.Sprintf("%02x", i))
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, false, fmt.Errorf("chunk: list target %d: %w", s.opts.Target, ioErr(err))
		}
		for _, e := range ents {
			base, ok := strings.CutSuffix(e.Name(), ".sum")
			if !ok {
				continue
			}
			if id, ok := parseName(base); ok && cmpID(id, after) > 0 {
				ids = append(ids, id)
			}
		}
	}
	slices.SortFunc(ids, cmpID)
	more := false
	if limit > 0 && len(ids) > limit {
		ids, more = ids[:limit], true
	}
	out := make([]Info, 0, len(ids))
	for _, id := range ids {
		info, found, err := s.ChunkInfo(id)
		if err != nil {
			return nil, false, err
		}
		if found { // else removed since the directory was read
			out = append(out, info)
		}
	}
	return out, more, nil
}

func cmpID(a, b ID) int {
	return cmp.Or(cmp.Compare(a.Ino, b.Ino), cmp.Compare(a.Slot, b.Slot))
}
