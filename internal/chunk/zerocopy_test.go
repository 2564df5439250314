package chunk

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/pagecache"
)

// needCachestat skips the test where the kernel has no cachestat(2)
// (before 6.5; ReadFileRange then hands nothing out), and fails it in CI.
func needCachestat(t *testing.T) {
	t.Helper()
	if !pagecache.Supported() {
		if os.Getenv("CI") == "true" {
			t.Fatal("the kernel has no cachestat(2) (CI=true: the tests need Linux 6.5 or later)")
		}
		t.Skip("the kernel has no cachestat(2) (Linux 6.5 or later)")
	}
}

// TestReadFileRange checks, over random writes, truncates and reads, that
// a range ReadFileRange hands out holds the bytes ReadAt reads, with the
// CRC32C of each block, and that it never hands out a range that does not
// start on a block.
func TestReadFileRange(t *testing.T) {
	needCachestat(t)
	s := openStore(t, t.TempDir())
	r := rand.New(rand.NewPCG(5, 6))
	id := ID{Ino: 11, Slot: 2}
	handed := 0
	for round := range 400 {
		switch r.IntN(5) {
		case 0:
			if err := s.Truncate(id, r.Int64N(6*BlockSize)); err != nil {
				t.Fatal(err)
			}
		case 1: // a block of zeros (not stored) or a hole
			if err := s.WriteAt(id, r.Int64N(5)*BlockSize, make([]byte, BlockSize), false); err != nil {
				t.Fatal(err)
			}
		default:
			off := r.Int64N(5 * BlockSize)
			if r.IntN(2) == 0 {
				off -= off % BlockSize
			}
			if err := s.WriteAt(id, off, pattern(uint64(round), 1+r.IntN(3*BlockSize)), false); err != nil {
				t.Fatal(err)
			}
		}
		off := r.Int64N(6) * BlockSize
		if r.IntN(8) == 0 {
			off += 1 + r.Int64N(BlockSize-1)
		}
		size := 1 + r.IntN(4*BlockSize)
		fr, ok := s.ReadFileRange(id, off, size)
		want := make([]byte, size)
		n, clen, err := s.ReadAt(id, off, want)
		if err != nil {
			t.Fatal(err)
		}
		want = want[:n]
		if !ok {
			continue
		}
		handed++
		got := make([]byte, fr.N)
		_, rerr := fr.F.ReadAt(got, fr.Off)
		fr.F.Close()
		switch {
		case rerr != nil:
			t.Fatalf("round %d: reading the range: %v", round, rerr)
		case off%BlockSize != 0:
			t.Fatalf("round %d: handed out a range at %d, not on a block", round, off)
		case fr.Off != off || fr.N != n || fr.ChunkLen != clen:
			t.Fatalf("round %d: range %d+%d of a chunk of %d, ReadAt read %d bytes of %d", round, fr.Off, fr.N, fr.ChunkLen, n, clen)
		case !bytes.Equal(got, want):
			t.Fatalf("round %d: the range's bytes differ from ReadAt's", round)
		case len(fr.Sums) != checksum.Pieces(off, n):
			t.Fatalf("round %d: %d sums for %d pieces", round, len(fr.Sums), checksum.Pieces(off, n))
		}
		for i := range fr.Sums {
			lo := i * BlockSize
			hi := min(n, lo+BlockSize)
			if c := checksum.BlockCRC(want[lo:hi]); c != fr.Sums[i] {
				t.Fatalf("round %d: block %d has CRC32C %08x, the range says %08x", round, i, c, fr.Sums[i])
			}
		}
	}
	if handed < 20 {
		t.Fatalf("only %d of 400 ranges handed out: the test no longer exercises ReadFileRange", handed)
	}
}

// TestReadFileRangeCold: a range whose pages are not in the page cache is
// declined (its sender would wait for the disk), and handed out again once
// a read brought them back.
func TestReadFileRangeCold(t *testing.T) {
	needCachestat(t)
	s := openStore(t, t.TempDir())
	id := ID{Ino: 12, Slot: 0}
	mustWrite(t, s, id, 0, pattern(1, 3*BlockSize+100), true)
	fr, ok := s.ReadFileRange(id, 0, 4*BlockSize)
	if !ok {
		t.Fatal("a cached range of whole blocks was declined")
	}
	if fr.N != 3*BlockSize+100 || len(fr.Sums) != 4 {
		t.Fatalf("range of %d bytes with %d sums, want %d and 4", fr.N, len(fr.Sums), 3*BlockSize+100)
	}
	// Drop the (clean, synced) pages of the data file.
	if err := unix.Fadvise(int(fr.F.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	fr.F.Close()
	if fr, ok := s.ReadFileRange(id, 0, 4*BlockSize); ok {
		fr.F.Close()
		t.Fatal("a range not in the page cache was handed out")
	}
	mustRead(t, s, id, 0, 4*BlockSize)
	fr, ok = s.ReadFileRange(id, 0, 4*BlockSize)
	if !ok {
		t.Fatal("a range read back into the page cache was declined")
	}
	fr.F.Close()
}

// TestReadFileRangeDeclines: ranges over a hole, over a block of zeros
// (not in the data file), or past a block whose bytes end before the
// range's next block are declined; the whole blocks around them are not.
func TestReadFileRangeDeclines(t *testing.T) {
	needCachestat(t)
	s := openStore(t, t.TempDir())
	id := ID{Ino: 13, Slot: 0}
	mustWrite(t, s, id, 0, pattern(1, BlockSize), false)             // block 0: data
	mustWrite(t, s, id, 2*BlockSize, pattern(2, BlockSize), false)   // block 1: a hole; block 2: data
	mustWrite(t, s, id, 3*BlockSize, make([]byte, BlockSize), false) // block 3: zeros
	mustWrite(t, s, id, 4*BlockSize, pattern(3, BlockSize/2), false) // block 4: half a block...
	mustWrite(t, s, id, 5*BlockSize, pattern(4, BlockSize), false)   // ...then block 5: data
	for _, c := range []struct {
		off, n int64
		ok     bool
	}{
		{0, BlockSize, true},
		{0, 2 * BlockSize, false},            // the hole
		{2 * BlockSize, BlockSize, true},     // block 2 alone
		{2 * BlockSize, 2 * BlockSize, true}, // written zeros are bytes like others
		{4 * BlockSize, BlockSize, false},    // block 4's bytes end halfway: the rest reads as zeros
		{5 * BlockSize, BlockSize, true},
		{5 * BlockSize, 3 * BlockSize, true}, // cut at the chunk's end
		{100, BlockSize, false},              // not on a block
		{6 * BlockSize, BlockSize, false},    // past the end
	} {
		fr, ok := s.ReadFileRange(id, c.off, int(c.n))
		if ok {
			fr.F.Close()
		}
		if ok != c.ok {
			t.Errorf("range %d+%d: handed out %v, want %v", c.off, c.n, ok, c.ok)
		}
	}
	// A block of zeros made by growing the chunk over a hole is not in
	// the data file.
	z := ID{Ino: 14, Slot: 0}
	mustWrite(t, s, z, 0, pattern(5, BlockSize), false)
	if err := s.Truncate(z, 2*BlockSize); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, BlockSize} {
		if fr, ok := s.ReadFileRange(z, off, 2*BlockSize); ok {
			fr.F.Close()
			t.Errorf("range %d+%d over a block of zeros not in the data file: handed out", off, 2*BlockSize)
		}
	}
	if fr, ok := s.ReadFileRange(z, 0, BlockSize); !ok {
		t.Error("the block before the zeros: declined")
	} else {
		fr.F.Close()
	}
}
