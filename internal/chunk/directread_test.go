package chunk

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
)

// TestDirectReaderRandom: after random writes (aligned and not, sparse,
// zero-filled), truncates and syncs, a DirectReader opened once per chunk
// reads every range exactly as Store.ReadAt does, with the same length.
func TestDirectReaderRandom(t *testing.T) {
	s := openStore(t, t.TempDir())
	r := rand.New(rand.NewPCG(25, 26))
	readers := map[ID]*DirectReader{}
	defer func() {
		for _, d := range readers {
			d.Close()
		}
	}()
	for i := range 600 {
		id := ID{Ino: uint64(1 + r.IntN(6)), Slot: uint32(r.IntN(2))}
		switch k := r.IntN(6); {
		case k == 0:
			if err := s.Truncate(id, r.Int64N(5*BlockSize)); err != nil {
				t.Fatal(err)
			}
		case k == 1:
			mustWrite(t, s, id, r.Int64N(4*BlockSize), make([]byte, 1+r.IntN(2*BlockSize)), false)
		default:
			off := r.Int64N(4 * BlockSize)
			if r.IntN(2) == 0 {
				off = off / BlockSize * BlockSize
			}
			mustWrite(t, s, id, off, pattern(uint64(i), 1+r.IntN(2*BlockSize)), r.IntN(8) == 0)
		}
		d := readers[id]
		if d == nil {
			data, sum, err := s.OpenDirect(id)
			if errs.CodeOf(err) == errs.NotFound {
				continue
			}
			if err != nil {
				t.Fatalf("step %d: OpenDirect(%v): %v", i, id, err)
			}
			d = NewDirectReader(data, sum)
			readers[id] = d
		}
		off := r.Int64N(6 * BlockSize)
		n := 1 + r.IntN(3*BlockSize)
		got := make([]byte, n)
		gn, glen, err := d.ReadAt(got, off)
		if err != nil {
			t.Fatalf("step %d: direct read of %v at %d+%d: %v", i, id, off, n, err)
		}
		want := make([]byte, n)
		wn, wlen, err := s.ReadAt(id, off, want)
		if err != nil {
			t.Fatal(err)
		}
		if gn != wn || glen != wlen || !bytes.Equal(got[:gn], want[:wn]) {
			t.Fatalf("step %d: %v at %d+%d: direct %d bytes (length %d), store %d (length %d), equal %v",
				i, id, off, n, gn, glen, wn, wlen, bytes.Equal(got[:gn], want[:wn]))
		}
	}
}

// TestDirectReaderRefuses: a block whose bytes do not match its entry
// (rotted on disk) gives ErrDirectUnverified, never its bytes; a removed
// chunk gives ErrDirectGone, and its files were not recycled for a new
// chunk; a missing chunk is NotFound.
func TestDirectReaderRefuses(t *testing.T) {
	s := openStore(t, t.TempDir())
	id := ID{Ino: 9}
	mustWrite(t, s, id, 0, pattern(1, 3*BlockSize), true)
	data, sum, err := s.OpenDirect(id)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDirectReader(data, sum)
	defer d.Close()
	dataPath, _ := s.Paths(id)
	f, err := os.OpenFile(dataPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xFF, 0xFE}, BlockSize+100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	buf := make([]byte, BlockSize)
	if _, _, err := d.ReadAt(buf, 0); err != nil {
		t.Fatalf("a sound block: %v", err)
	}
	if _, _, err := d.ReadAt(buf, BlockSize+50); !errors.Is(err, ErrDirectUnverified) {
		t.Fatalf("a rotted block: %v, want ErrDirectUnverified", err)
	}
	if _, _, err := d.ReadAt(buf[:10], BlockSize+200); !errors.Is(err, ErrDirectUnverified) {
		t.Fatalf("a piece of a rotted block: %v, want ErrDirectUnverified", err)
	}
	if err := s.Remove(id.Ino, []uint32{id.Slot}); err != nil {
		t.Fatal(err)
	}
	// A new chunk must not take the removed one's files.
	mustWrite(t, s, ID{Ino: 10}, 0, pattern(2, BlockSize), false)
	if _, _, err := d.ReadAt(buf, 0); !errors.Is(err, ErrDirectGone) {
		t.Fatalf("a removed chunk: %v, want ErrDirectGone", err)
	}
	if _, _, err := s.OpenDirect(id); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("OpenDirect of a removed chunk: %v, want not found", err)
	}
}
