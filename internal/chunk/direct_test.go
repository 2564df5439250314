package chunk

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
)

// readAll reads f from its start.
func readAll(t *testing.T, f *os.File) []byte {
	t.Helper()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<40))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenData(t *testing.T) {
	s := openStore(t, t.TempDir())
	id := ID{Ino: 1}
	if _, _, err := s.OpenData(id); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("missing chunk: %v, want NotFound", err)
	}
	data := pattern(1, 3*BlockSize+100)
	mustWrite(t, s, id, 0, data, false)
	f, n, err := s.OpenData(id)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(data)) || !bytes.Equal(readAll(t, f), data) {
		t.Fatalf("OpenData: length %d, content differs from what was written", n)
	}
	f.Close()

	// A hole in the middle, then a block whose bytes on disk are stale.
	sparse := ID{Ino: 2}
	mustWrite(t, s, sparse, 2*BlockSize, pattern(2, 10), false)
	if _, _, err := s.OpenData(sparse); errs.CodeOf(err) != errs.NotSupported {
		t.Fatalf("chunk with a hole: %v, want NotSupported", err)
	}
	zeroed := ID{Ino: 3}
	mustWrite(t, s, zeroed, 0, pattern(3, 2*BlockSize), false)
	if err := s.Truncate(zeroed, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Truncate(zeroed, 2*BlockSize); err != nil {
		t.Fatal(err)
	}
	if f, _, err := s.OpenData(zeroed); err == nil {
		got := readAll(t, f)
		f.Close()
		want, _ := mustRead(t, s, zeroed, 0, 2*BlockSize)
		if !bytes.Equal(got, want) {
			t.Fatal("OpenData of a truncated-and-grown chunk returned bytes that differ from ReadAt")
		}
	} else if errs.CodeOf(err) != errs.NotSupported {
		t.Fatalf("truncated-and-grown chunk: %v", err)
	}

	// A flipped bit is found before the file is handed out.
	bad := ID{Ino: 4}
	mustWrite(t, s, bad, 0, pattern(4, BlockSize), false)
	path, _ := s.Paths(bad)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[100] ^= 1
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.OpenData(bad); errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("corrupt chunk: %v, want Corruption", err)
	}
}

// TestOpenDataVerifiesEveryPiece: OpenData checks a chunk of several
// pieces (maxBatch blocks, one read each); a flipped bit in any piece,
// the last partial block included, keeps the file from being handed out,
// and a sound chunk is handed out whole.
func TestOpenDataVerifiesEveryPiece(t *testing.T) {
	s := openStore(t, t.TempDir())
	const piece = maxBatch * BlockSize
	size := int64(6*piece + 3*BlockSize + 77)
	data := pattern(9, int(size))
	for i, at := range []int64{-1, 0, piece + 5, 3*piece + BlockSize, size - 1} {
		id := ID{Ino: uint64(100 + i)}
		mustWrite(t, s, id, 0, data, false)
		if at >= 0 {
			path, _ := s.Paths(id)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			b := []byte{data[at] ^ 0x10}
			if _, err := f.WriteAt(b, at); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		f, n, err := s.OpenData(id)
		if at < 0 {
			if err != nil {
				t.Fatal(err)
			}
			if n != size || !bytes.Equal(readAll(t, f), data) {
				t.Fatalf("OpenData: length %d, content differs from what was written", n)
			}
			f.Close()
			continue
		}
		if errs.CodeOf(err) != errs.Corruption {
			if f != nil {
				f.Close()
			}
			t.Fatalf("bit flipped at %d of %d: %v, want Corruption", at, size, err)
		}
	}
}

// TestOpenDataRandom checks the one promise that matters for a direct
// reader: whenever OpenData hands out a file, its bytes are exactly what
// ReadAt returns, after any sequence of writes and truncates.
func TestOpenDataRandom(t *testing.T) {
	s := openStore(t, t.TempDir())
	r := rand.New(rand.NewPCG(5, 6))
	opened := 0
	for i := range 400 {
		id := ID{Ino: uint64(1 + r.IntN(8))}
		switch r.IntN(4) {
		case 0:
			if err := s.Truncate(id, r.Int64N(4*BlockSize)); err != nil {
				t.Fatal(err)
			}
		default:
			off := r.Int64N(3 * BlockSize)
			if r.IntN(2) == 0 {
				off = off / BlockSize * BlockSize
			}
			mustWrite(t, s, id, off, pattern(uint64(i), 1+r.IntN(2*BlockSize)), false)
		}
		f, n, err := s.OpenData(id)
		if err != nil {
			if errs.CodeOf(err) != errs.NotSupported && errs.CodeOf(err) != errs.NotFound {
				t.Fatalf("step %d: OpenData(%v): %v", i, id, err)
			}
			continue
		}
		opened++
		got := readAll(t, f)
		f.Close()
		want, clen := mustRead(t, s, id, 0, int(n)+BlockSize)
		if clen != n || !bytes.Equal(got, want) {
			t.Fatalf("step %d: OpenData(%v) gave %d bytes (length %d), ReadAt %d (length %d), contents equal: %v",
				i, id, len(got), n, len(want), clen, bytes.Equal(got, want))
		}
	}
	if opened == 0 {
		t.Fatal("OpenData never handed out a file")
	}
	t.Logf("%d of 400 opens were direct", opened)
}
