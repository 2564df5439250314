package client

import (
	"math/rand/v2"
	"testing"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/placement"
)

// TestSplitAtBlocks checks splitAtBlocks on random extents: the pieces
// cover each extent exactly, in order, on its chunk; an extent is split
// only around at least unreadMinBlocks whole blocks, into pieces of whole
// blocks of at most maxExtentIO and edges shorter than a block; extents
// already on blocks are cut only when longer than maxExtentIO, and short
// ones are left whole.
func TestSplitAtBlocks(t *testing.T) {
	const b = checksum.BlockSize
	rng := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		var ext []placement.Extent
		fileOff := rng.Int64N(1 << 30)
		for i := range 1 + rng.IntN(4) {
			chunkOff := rng.Int64N(64) * b
			if rng.IntN(2) == 0 {
				chunkOff += rng.Int64N(b)
			}
			n := 1 + rng.Int64N(12*b)
			switch rng.IntN(4) {
			case 0:
				n = max(rng.Int64N(12)*b, 1)
			case 1:
				n = 1 + rng.Int64N(3*maxExtentIO)
			case 2:
				n = (1 + rng.Int64N(3*maxExtentIO/b)) * b
			}
			ext = append(ext, placement.Extent{Slot: i, Chain: placement.ChainID(10 + i), FileOff: fileOff, ChunkOff: chunkOff, Len: n})
			fileOff += n
		}
		out := splitAtBlocks(ext)
		j := 0
		for _, e := range ext {
			start, end := e.ChunkOff, e.ChunkOff+e.Len
			mid := (end/b*b - (start+b-1)/b*b)
			edges := start%b != 0 || end%b != 0
			wantSplit := (edges && mid >= unreadMinBlocks*b) || (!edges && e.Len > maxExtentIO)
			at, pieces := start, 0
			for j < len(out) && out[j].Slot == e.Slot && at < end {
				p := out[j]
				if p.Chain != e.Chain || p.ChunkOff != at || p.FileOff-p.ChunkOff != e.FileOff-e.ChunkOff || p.Len <= 0 {
					t.Fatalf("extent %+v: piece %+v does not follow at %d", e, p, at)
				}
				if wantSplit && p.Len >= b && (p.ChunkOff%b != 0 || (p.ChunkOff+p.Len)%b != 0 || p.Len > maxExtentIO) {
					t.Fatalf("extent %+v: piece %+v of a block or more is not on blocks or longer than %d", e, p, maxExtentIO)
				}
				at += p.Len
				pieces++
				j++
			}
			if at != end {
				t.Fatalf("extent %+v: pieces end at %d", e, at)
			}
			if !wantSplit && pieces != 1 {
				t.Fatalf("extent %+v split in %d pieces", e, pieces)
			}
			if want := 3 + (mid-1)/maxExtentIO; wantSplit && (pieces < 2 || int64(pieces) > want) {
				t.Fatalf("extent %+v split in %d pieces, want 2 to %d", e, pieces, want)
			}
		}
		if j != len(out) {
			t.Fatalf("%d pieces left over", len(out)-j)
		}
	}
}
