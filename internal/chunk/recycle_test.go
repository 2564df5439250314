package chunk

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRecycledFilesStartEmpty: a removed chunk's files go to the pool,
// and a new chunk made from them holds only what was written to it: on
// disk (its data file's size and its checksum entries) and when read.
func TestRecycledFilesStartEmpty(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	old := ID{Ino: 7, Slot: 1}
	mustWrite(t, s, old, 0, pattern(1, 5*BlockSize+123), true)
	if err := s.Remove(old.Ino, []uint32{old.Slot}); err != nil {
		t.Fatal(err)
	}
	if n := s.free.size(); n != 2 {
		t.Fatalf("%d files pooled after removing a chunk, want its 2", n)
	}
	id := ID{Ino: 8, Slot: 0}
	mustWrite(t, s, id, 0, []byte("fresh"), true)
	if n := s.free.size(); n != 0 {
		t.Fatalf("%d files pooled after creating a chunk, want 0 (both taken)", n)
	}
	got, clen := mustRead(t, s, id, 0, 6*BlockSize)
	if clen != 5 || string(got) != "fresh" {
		t.Fatalf("new chunk: length %d, content %q", clen, got)
	}
	dataPath, sumPath := s.Paths(id)
	if fi, err := os.Stat(dataPath); err != nil || fi.Size() != 5 {
		t.Fatalf("new chunk's data file: %v, %v; want 5 bytes", fi, err)
	}
	if fi, err := os.Stat(sumPath); err != nil || fi.Size() != entrySize {
		t.Fatalf("new chunk's checksum file: %v, %v; want one entry", fi, err)
	}
	// Its extension past the old length reads zeros, not the old bytes.
	mustWrite(t, s, id, 4*BlockSize, []byte("end"), false)
	got, clen = mustRead(t, s, id, 0, 6*BlockSize)
	if clen != 4*BlockSize+3 || !isZero(got[5:4*BlockSize]) || string(got[4*BlockSize:]) != "end" {
		t.Fatalf("extended chunk: length %d, old bytes back: %v", clen, !isZero(got[5:4*BlockSize]))
	}
	if _, _, _, chunks, _ := s.Stat(); chunks != 1 {
		t.Errorf("%d chunks counted, want 1", chunks)
	}
}

// TestDirectReaderKeepsRemovedChunk: the data file of a chunk that
// OpenData handed out is not recycled when the chunk is removed: the
// direct reader keeps reading the bytes it opened while new chunks are
// made and written.
func TestDirectReaderKeepsRemovedChunk(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	id := ID{Ino: 9, Slot: 0}
	want := pattern(2, 2*BlockSize)
	mustWrite(t, s, id, 0, want, true)
	f, n, err := s.OpenData(id)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := s.Remove(id.Ino, []uint32{id.Slot}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		mustWrite(t, s, ID{Ino: 10 + uint64(i)}, 0, pattern(3, 2*BlockSize), true)
	}
	got, err := io.ReadAll(io.NewSectionReader(f, 0, n))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("direct reader after the chunk's removal: %d bytes, %v; equal %v", len(got), err, bytes.Equal(got, want))
	}
}

// TestOpenEmptiesPool: files under free/ at Open (a crash may have left
// one untruncated) are removed, not reused.
func TestOpenEmptiesPool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	s.Close()
	stale := filepath.Join(dir, "free", "zz")
	if err := os.WriteFile(stale, pattern(4, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("a file left in the pool survived Open: %v", err)
	}
	id := ID{Ino: 11}
	mustWrite(t, s, id, 0, []byte("a"), false)
	if got, clen := mustRead(t, s, id, 0, 2000); clen != 1 || string(got) != "a" {
		t.Fatalf("chunk after Open: length %d, content %q", clen, got)
	}
}

// TestRecycleConcurrent: writers of different chunks create, check and
// remove them concurrently, so that files move between chunks through the
// pool while others are written; every chunk reads back exactly what was
// written to it.
func TestRecycleConcurrent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{Target: testTarget, Logger: quietLogger(), MaxOpenChunks: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	done := make(chan error, 8)
	for w := range 8 {
		go func() {
			for i := range 40 {
				id := ID{Ino: uint64(100 + w), Slot: uint32(i % 3)}
				want := pattern(uint64(w*1000+i), 1+(w*7919+i*104729)%(3*BlockSize))
				if err := s.WriteAt(id, 0, want, i%4 == 0); err != nil {
					done <- err
					return
				}
				got := make([]byte, 4*BlockSize)
				n, clen, err := s.ReadAt(id, 0, got)
				if err != nil || clen != int64(len(want)) || !bytes.Equal(got[:n], want) {
					done <- fmt.Errorf("writer %d step %d: read %d bytes of length %d, %v; want %d", w, i, n, clen, err, len(want))
					return
				}
				if err := s.Remove(id.Ino, []uint32{id.Slot}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if _, used, _, chunks, _ := s.Stat(); used != 0 || chunks != 0 {
		t.Errorf("after every removal: %d chunks, %d bytes", chunks, used)
	}
}

// TestPrecreate: a store with Options.Precreate fills its pool with empty
// files in the background, new chunks take them (and start empty: they
// hold only what was written to them), the pool is filled again, and
// Close stops the filler; a store reopened without it starts with an
// empty pool.
func TestPrecreate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{Target: 1, Precreate: 40})
	if err != nil {
		t.Fatal(err)
	}
	waitPool := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, n := s.Precreated(); n == want {
				return
			}
			if time.Now().After(deadline) {
				_, n := s.Precreated()
				t.Fatalf("pool holds %d files after 30 s, want %d", n, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitPool(40)
	for i := range 10 {
		id := ID{Ino: uint64(100 + i)}
		mustWrite(t, s, id, 0, []byte(fmt.Sprint("chunk ", i)), i%2 == 0)
	}
	waitPool(40) // filled again
	made, _ := s.Precreated()
	if made < 60 {
		t.Errorf("%d files precreated for a pool of 40 and 10 chunks (20 files) taken, want at least 60", made)
	}
	for i := range 10 {
		id := ID{Ino: uint64(100 + i)}
		got, clen := mustRead(t, s, id, 0, BlockSize)
		if want := fmt.Sprint("chunk ", i); string(got) != want || clen != int64(len(want)) {
			t.Fatalf("chunk %d reads %q (length %d), want %q", i, got, clen, want)
		}
		dataPath, _ := s.Paths(id)
		if fi, err := os.Stat(dataPath); err != nil || fi.Size() != int64(len(fmt.Sprint("chunk ", i))) {
			t.Fatalf("chunk %d's data file: %v, %v", i, fi, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Options{Target: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if made, n := s2.Precreated(); made != 0 || n != 0 {
		t.Errorf("reopened without Precreate: %d made, %d pooled; want none", made, n)
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "free")); err != nil || len(ents) != 0 {
		t.Errorf("free/ after reopening: %d entries, %v; want empty", len(ents), err)
	}
	if _, err := Open(t.TempDir(), Options{Target: 1, Precreate: maxFree + 1}); err == nil {
		t.Error("Precreate above maxFree was accepted")
	}
}
