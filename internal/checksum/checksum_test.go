package checksum

import (
	"hash/crc32"
	"testing"
)

// TestDigest: the digest depends on every block's CRC and size and on
// their order, and BlockCRC is the standard CRC32C.
func TestDigest(t *testing.T) {
	if got, want := BlockCRC([]byte("123456789")), uint32(0xe3069283); got != want {
		t.Fatalf("BlockCRC of the check string: %#x, want %#x (CRC-32C)", got, want)
	}
	if BlockCRC(make([]byte, 10)) != crc32.Checksum(make([]byte, 10), crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatal("BlockCRC differs from hash/crc32's Castagnoli")
	}
	sum := func(blocks ...[2]uint32) uint64 {
		d := NewDigester()
		for _, b := range blocks {
			d.Block(b[0], int64(b[1]))
		}
		return d.Sum64()
	}
	base := sum([2]uint32{1, 65536}, [2]uint32{2, 100})
	for name, other := range map[string]uint64{
		"crc":     sum([2]uint32{1, 65536}, [2]uint32{3, 100}),
		"size":    sum([2]uint32{1, 65536}, [2]uint32{2, 101}),
		"order":   sum([2]uint32{2, 100}, [2]uint32{1, 65536}),
		"missing": sum([2]uint32{1, 65536}),
	} {
		if other == base {
			t.Errorf("a change of %s left the digest as it was", name)
		}
	}
	if sum([2]uint32{1, 65536}, [2]uint32{2, 100}) != base {
		t.Error("the same blocks gave another digest")
	}
}

func TestPieces(t *testing.T) {
	for _, tc := range []struct {
		off  int64
		n, w int
	}{
		{0, 0, 0}, {0, 1, 1}, {0, BlockSize, 1}, {0, BlockSize + 1, 2}, {BlockSize - 1, 1, 1},
		{BlockSize - 1, 2, 2}, {5, 3 * BlockSize, 4}, {BlockSize, 2 * BlockSize, 2},
	} {
		if got := Pieces(tc.off, tc.n); got != tc.w {
			t.Errorf("Pieces(%d, %d) = %d, want %d", tc.off, tc.n, got, tc.w)
		}
	}
}
