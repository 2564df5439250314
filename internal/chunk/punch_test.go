package chunk

import (
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
)

func TestPunchRange(t *testing.T) {
	t.Parallel()
	const B = BlockSize
	cases := []struct {
		off, end, length         int64
		b0, b1, headEnd, tailOff int64
	}{
		{0, 4 * B, 4 * B, 0, 4, 0, 4 * B},                        // the whole chunk
		{100, 3*B + 7, 10 * B, 1, 3, B, 3 * B},                   // partial ends
		{100, 200, 10 * B, 0, 0, 200, 200},                       // inside one block
		{B - 10, B + 10, 10 * B, 0, 0, B + 10, B + 10},           // across a boundary, no whole block
		{B, 5*B + 100, 5*B + 100, 1, 6, B, 5*B + 100},            // to the end: the last block is whole
		{B, 9 * B, 5*B + 100, 1, 6, B, 5*B + 100},                // past the end: clipped
		{7 * B, 9 * B, 5*B + 100, 0, 0, 7 * B, 7 * B},            // all past the end
		{5*B + 10, 6 * B, 5*B + 100, 0, 0, 5*B + 100, 5*B + 100}, // the last block's tail only
	}
	for _, c := range cases {
		b0, b1, h, tl := punchRange(c.off, c.end, c.length)
		if b0 != c.b0 || b1 != c.b1 || h != c.headEnd || tl != c.tailOff {
			t.Errorf("punchRange(%d, %d, %d) = %d, %d, %d, %d; want %d, %d, %d, %d", c.off, c.end, c.length, b0, b1, h, tl, c.b0, c.b1, c.headEnd, c.tailOff)
		}
	}
}

// allocated returns the bytes the file system holds for the file at path.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestPunch: a punch zeroes its range, keeps the chunk's length, gives
// the whole blocks' space back, and all of it holds across a restart.
func TestPunch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	id := ID{Ino: 9, Slot: 1}
	var m model
	p := pattern(1, 20*BlockSize+100)
	mustWrite(t, s, id, 0, p, true)
	m.write(0, p)
	data, _ := s.Paths(id)
	before := allocated(t, data)
	if err := s.Punch(id, 100, 17*BlockSize-50); err != nil {
		t.Fatal(err)
	}
	m.write(100, make([]byte, 17*BlockSize-50))
	checkModel(t, s, id, m, "after a punch")
	after := allocated(t, data)
	if freed := before - after; freed < 15*BlockSize {
		t.Fatalf("the data file holds %d bytes, %d before the punch: want at least %d freed", after, before, 15*BlockSize)
	}
	// To the end, the last partial block whole: the length stays.
	if err := s.Punch(id, 19*BlockSize, 5*BlockSize); err != nil {
		t.Fatal(err)
	}
	m.write(19*BlockSize, make([]byte, BlockSize+100))
	checkModel(t, s, id, m, "after a punch to the end")
	// Past the end: nothing; a missing chunk: nothing.
	if err := s.Punch(id, 30*BlockSize, BlockSize); err != nil {
		t.Fatal(err)
	}
	if err := s.Punch(ID{Ino: 10}, 0, BlockSize); err != nil {
		t.Fatalf("punch of a missing chunk: %v", err)
	}
	if _, err := os.Stat(dataPathOf(s, ID{Ino: 10})); !os.IsNotExist(err) {
		t.Fatalf("a punch made a missing chunk: %v", err)
	}
	checkModel(t, s, id, m, "after a punch past the end")
	// A write into a punched block.
	q := pattern(2, 3000)
	mustWrite(t, s, id, 5*BlockSize+10, q, false)
	m.write(5*BlockSize+10, q)
	checkModel(t, s, id, m, "after a write into a punched block")
	s.Close()
	s = openStore(t, dir)
	checkModel(t, s, id, m, "after a restart")
}

func dataPathOf(s *Store, id ID) string {
	data, _ := s.Paths(id)
	return data
}

// TestRandomPunchAgainstModel: writes, truncates, punches and restarts
// in a random order, each chunk checked against its model after every
// step. The seed is logged.
func TestRandomPunchAgainstModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	s, err := Open(dir, Options{Target: testTarget, Logger: quietLogger(), MaxOpenChunks: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	models := make([]model, 3)
	for i := range 400 {
		c := r.IntN(len(models))
		id := ID{Ino: uint64(c), Slot: 5}
		switch op := r.IntN(10); {
		case op < 4:
			off := r.Int64N(6 * BlockSize)
			p := pattern(r.Uint64(), r.IntN(3*BlockSize)+1)
			mustWrite(t, s, id, off, p, r.IntN(3) == 0)
			models[c].write(off, p)
		case op < 5:
			size := r.Int64N(7 * BlockSize)
			if err := s.Truncate(id, size); err != nil {
				t.Fatalf("step %d: Truncate: %v", i, err)
			}
			if size > 0 || models[c] != nil {
				models[c].truncate(size)
			}
		case op < 9:
			off := r.Int64N(7 * BlockSize)
			n := r.Int64N(4*BlockSize) + 1
			if r.IntN(3) == 0 { // block-aligned
				off, n = off/BlockSize*BlockSize, (n+BlockSize-1)/BlockSize*BlockSize
			}
			if err := s.Punch(id, off, n); err != nil {
				t.Fatalf("step %d: Punch(%d, %d): %v", i, off, n, err)
			}
			if end := min(off+n, int64(len(models[c]))); off < end {
				clear(models[c][off:end])
			}
		default:
			if err := s.Close(); err != nil {
				t.Fatalf("step %d: Close: %v", i, err)
			}
			if s, err = Open(dir, Options{Target: testTarget, Logger: quietLogger(), MaxOpenChunks: 2}); err != nil {
				t.Fatalf("step %d: reopen: %v", i, err)
			}
		}
		checkModel(t, s, id, models[c], fmt.Sprintf("step %d (seed %d)", i, seed))
	}
}
