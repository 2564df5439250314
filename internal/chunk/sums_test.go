package chunk

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/sluice-fs/sluice/internal/checksum"
)

// TestReadAtSums: a read's pieces' CRC32Cs (the range split at every
// block boundary) are those of the bytes read, for random writes,
// truncates and holes and random reads, across steps of maxBatch blocks.
func TestReadAtSums(t *testing.T) {
	s := openStore(t, t.TempDir())
	r := rand.New(rand.NewPCG(3, 4))
	id := ID{Ino: 9, Slot: 1}
	for round := range 300 {
		switch r.IntN(4) {
		case 0:
			if err := s.Truncate(id, r.Int64N(6*BlockSize)); err != nil {
				t.Fatal(err)
			}
		default:
			off := r.Int64N(5 * BlockSize)
			if r.IntN(10) == 0 {
				off = r.Int64N(maxBatch+3) * BlockSize // a big write past a batch
			}
			data := pattern(uint64(round), 1+r.IntN(3*BlockSize))
			if err := s.WriteAt(id, off, data, false); err != nil {
				t.Fatal(err)
			}
		}
		off := r.Int64N(6 * BlockSize)
		size := 1 + r.IntN(4*BlockSize)
		if r.IntN(10) == 0 {
			off, size = r.Int64N(2)*BlockSize+r.Int64N(100), (maxBatch+2)*BlockSize
		}
		p := make([]byte, size)
		sums := make([]uint32, checksum.Pieces(off, size))
		n, _, err := s.ReadAtSums(id, off, p, sums)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, size)
		if m, _, err := s.ReadAt(id, off, want); err != nil || m != n || !bytes.Equal(p[:n], want[:n]) {
			t.Fatalf("round %d: ReadAtSums read %d bytes, ReadAt %d (%v), or other bytes", round, n, m, err)
		}
		data, at := p[:n], off
		for i := range checksum.Pieces(off, n) {
			end := min(len(data), int(BlockSize-at%BlockSize))
			if got := checksum.BlockCRC(data[:end]); got != sums[i] {
				t.Fatalf("round %d: read of %d at %d: piece %d (%d bytes at %d) has CRC32C %08x, ReadAtSums says %08x", round, n, off, i, end, at, got, sums[i])
			}
			data, at = data[end:], at+int64(end)
		}
	}
}
