package chunk

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDataRuns: written blocks are data, holes, punched blocks and bytes
// past the chunk's end are not, and the runs are clipped to the range.
func TestDataRuns(t *testing.T) {
	s := openStore(t, t.TempDir())
	id := ID{Ino: 7, Slot: 1}
	if runs, n, err := s.DataRuns(id, 0, 1<<20); err != nil || runs != nil || n != 0 {
		t.Fatalf("missing chunk: %v, %d, %v", runs, n, err)
	}
	mustWrite(t, s, id, 0, pattern(1, 2*BlockSize), false)             // blocks 0-1
	mustWrite(t, s, id, 4*BlockSize+100, pattern(2, BlockSize), false) // blocks 4-5, 5 short
	end := int64(5*BlockSize + 100)
	for _, c := range []struct {
		off, n int64
		want   [][2]int64
	}{
		{0, 1 << 30, [][2]int64{{0, 2 * BlockSize}, {4 * BlockSize, end}}},
		{100, 10, [][2]int64{{100, 110}}},
		{2 * BlockSize, 2 * BlockSize, nil},
		{BlockSize + 5, 3*BlockSize + 1, [][2]int64{{BlockSize + 5, 2 * BlockSize}, {4 * BlockSize, 4*BlockSize + 6}}},
		{end, BlockSize, nil},
	} {
		runs, n, err := s.DataRuns(id, c.off, c.n)
		if err != nil || n != end || !slices.Equal(runs, c.want) {
			t.Errorf("DataRuns(%d, %d) = %v, %d, %v; want %v, %d", c.off, c.n, runs, n, err, c.want, end)
		}
	}
	if err := s.Punch(id, 0, BlockSize); err != nil {
		t.Fatal(err)
	}
	if err := s.Punch(id, 5*BlockSize, 100); err != nil { // the short last block, whole
		t.Fatal(err)
	}
	want := [][2]int64{{BlockSize, 2 * BlockSize}, {4 * BlockSize, 5 * BlockSize}}
	if runs, _, err := s.DataRuns(id, 0, 1<<30); err != nil || !slices.Equal(runs, want) {
		t.Fatalf("after punches: %v, %v; want %v", runs, err, want)
	}
	if _, _, err := s.DataRuns(id, -1, 10); err == nil {
		t.Fatal("a negative offset was accepted")
	}
}

// TestRandomDataRunsAgainstModel writes, truncates and punches chunks at
// random and checks the map against a model of their bytes after every
// step: every nonzero byte lies in a run, runs stay inside the asked
// range and the chunk, and a byte outside the runs reads as zero.
func TestRandomDataRunsAgainstModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	s := openStore(t, dir)
	models := make([]model, 3)
	for i := range 500 {
		c := r.IntN(len(models))
		id := ID{Ino: uint64(c), Slot: 2}
		switch op := r.IntN(10); {
		case op < 5:
			off := r.Int64N(8 * BlockSize)
			p := pattern(r.Uint64(), r.IntN(2*BlockSize)+1)
			if r.IntN(4) == 0 {
				clear(p) // zeros written are zeros, stored or not
			}
			mustWrite(t, s, id, off, p, false)
			models[c].write(off, p)
		case op < 6:
			size := r.Int64N(9 * BlockSize)
			if err := s.Truncate(id, size); err != nil {
				t.Fatalf("step %d: Truncate: %v", i, err)
			}
			if size > 0 || models[c] != nil {
				models[c].truncate(size)
			}
		default:
			off, n := r.Int64N(9*BlockSize), r.Int64N(3*BlockSize)+1
			if err := s.Punch(id, off, n); err != nil {
				t.Fatalf("step %d: Punch: %v", i, err)
			}
			if end := min(off+n, int64(len(models[c]))); off < end {
				clear(models[c][off:end])
			}
		}
		off := r.Int64N(10 * BlockSize)
		n := r.Int64N(10*BlockSize) + 1
		if r.IntN(2) == 0 {
			off, n = 0, 1<<40-1
		}
		checkRuns(t, s, id, models[c], off, n, fmt.Sprintf("step %d (seed %d)", i, seed))
	}
}

func checkRuns(t *testing.T, s *Store, id ID, m model, off, n int64, what string) {
	t.Helper()
	runs, length, err := s.DataRuns(id, off, n)
	if err != nil {
		t.Fatalf("%s: DataRuns(%d, %d): %v", what, off, n, err)
	}
	if length != int64(len(m)) {
		t.Fatalf("%s: length %d, model %d", what, length, len(m))
	}
	end := min(off+n, length)
	at := off
	for _, r := range runs {
		if r[0] < at || r[1] <= r[0] || r[1] > end {
			t.Fatalf("%s: DataRuns(%d, %d) = %v: run %v out of order or range (chunk %d bytes)", what, off, n, runs, r, length)
		}
		if k := bytes.IndexFunc(m[at:r[0]], func(c rune) bool { return c != 0 }); k >= 0 {
			t.Fatalf("%s: DataRuns(%d, %d) = %v: byte %d is %#x, outside every run", what, off, n, runs, at+int64(k), m[at+int64(k)])
		}
		at = r[1]
	}
	if at < end {
		if k := bytes.IndexFunc(m[at:end], func(c rune) bool { return c != 0 }); k >= 0 {
			t.Fatalf("%s: DataRuns(%d, %d) = %v: byte %d is %#x, past the last run", what, off, n, runs, at+int64(k), m[at+int64(k)])
		}
	}
}
