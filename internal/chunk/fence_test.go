package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
)

func wantMoved(t *testing.T, what string, err error) {
	t.Helper()
	if errs.CodeOf(err) != errs.Moved {
		t.Fatalf("%s: %v, want errs.Moved", what, err)
	}
}

func exists(t *testing.T, s *Store, id ID) bool {
	t.Helper()
	_, sum := s.Paths(id)
	_, err := os.Stat(sum)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// TestFreezeLifecycle walks a chunk through a migration: frozen (writes
// and truncates refused, reads and syncs work), removed (reads refused
// rather than reading a hole), across restarts, and thawed.
func TestFreezeLifecycle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	id, never := ID{Ino: 77, Slot: 3}, ID{Ino: 77, Slot: 4}
	p := pattern(1, 3*BlockSize+100)
	mustWrite(t, s, id, 0, p, false)

	if err := s.Freeze(id, never); err != nil {
		t.Fatal(err)
	}
	if err := s.Freeze(id); err != nil { // again: harmless
		t.Fatal(err)
	}
	if !s.Frozen(id) || !s.Frozen(never) || s.Frozen(ID{Ino: 77}) {
		t.Fatalf("Frozen: %v %v %v", s.Frozen(id), s.Frozen(never), s.Frozen(ID{Ino: 77}))
	}
	if _, err := os.Stat(filepath.Join(dir, "fences", "000000000000004d.00000003")); err != nil {
		t.Fatalf("fence file: %v", err)
	}
	wantMoved(t, "write of a frozen chunk", s.WriteAt(id, 10, []byte("x"), false))
	wantMoved(t, "sync write of a frozen chunk", s.WriteAt(id, 0, []byte("x"), true))
	wantMoved(t, "truncate of a frozen chunk", s.Truncate(id, 5))
	wantMoved(t, "truncate of a frozen chunk to 0", s.Truncate(id, 0))
	wantMoved(t, "write of a frozen chunk that does not exist", s.WriteAt(never, 0, []byte("x"), false))
	wantMoved(t, "truncate of a frozen chunk that does not exist", s.Truncate(never, 5))
	if exists(t, s, never) {
		t.Fatal("a refused write created the chunk")
	}
	if got, clen := mustRead(t, s, id, 0, len(p)+10); clen != int64(len(p)) || !bytes.Equal(got, p) {
		t.Fatalf("read of a frozen chunk: length %d, equal %v", clen, bytes.Equal(got, p))
	}
	if err := s.Sync(id, never); err != nil {
		t.Fatalf("sync of frozen chunks: %v", err)
	}
	if err := s.Remove(id.Ino, []uint32{id.Slot}); err != nil {
		t.Fatal(err)
	}
	if exists(t, s, id) || !s.Frozen(id) {
		t.Fatalf("after remove: exists %v, frozen %v", exists(t, s, id), s.Frozen(id))
	}
	for _, c := range []ID{id, never} {
		if n, clen, err := s.ReadAt(c, 0, make([]byte, 10)); errs.CodeOf(err) != errs.Moved {
			t.Fatalf("read of removed frozen %v: %d bytes, length %d, %v; want errs.Moved", c, n, clen, err)
		}
	}
	if err := s.Sync(id); err != nil {
		t.Fatalf("sync of a removed frozen chunk: %v", err)
	}
	if n, _, err := s.ReadAt(ID{Ino: 77}, 0, make([]byte, 10)); err != nil || n != 0 {
		t.Fatalf("read of a missing chunk that is not frozen: %d bytes, %v", n, err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if !s.Frozen(id) || !s.Frozen(never) {
		t.Fatal("fences lost across a restart")
	}
	_, _, err := s.ReadAt(id, 0, make([]byte, 10))
	wantMoved(t, "read of a removed frozen chunk after a restart", err)
	wantMoved(t, "write after a restart", s.WriteAt(id, 0, []byte("x"), false))

	if err := s.Thaw(id, ID{Ino: 5}); err != nil {
		t.Fatal(err)
	}
	if err := s.Thaw(id); err != nil { // again: harmless
		t.Fatal(err)
	}
	if s.Frozen(id) || !s.Frozen(never) {
		t.Fatalf("after thaw: frozen %v, other frozen %v", s.Frozen(id), s.Frozen(never))
	}
	if n, _, err := s.ReadAt(id, 0, make([]byte, 10)); err != nil || n != 0 {
		t.Fatalf("read of a thawed missing chunk: %d bytes, %v", n, err)
	}
	mustWrite(t, s, id, 0, []byte("again"), true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if s.Frozen(id) || !s.Frozen(never) {
		t.Fatalf("after thaw and a restart: frozen %v, other frozen %v", s.Frozen(id), s.Frozen(never))
	}
	if got, _ := mustRead(t, s, id, 0, 10); string(got) != "again" {
		t.Fatalf("thawed chunk reads %q", got)
	}
}

// TestOpenWithoutFences opens a store made before fences existed.
func TestOpenWithoutFences(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	mustWrite(t, s, ID{Ino: 1}, 0, []byte("x"), true)
	s.Close()
	if err := os.Remove(filepath.Join(dir, "fences")); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if err := s.Freeze(ID{Ino: 1}); err != nil {
		t.Fatal(err)
	}
	wantMoved(t, "write", s.WriteAt(ID{Ino: 1}, 0, []byte("y"), false))
}

// TestFreezeOrdersWrites races writers against Freeze: every write that
// returned nil is in the chunk when Freeze returns, and no write that
// started after Freeze returned succeeds.
func TestFreezeOrdersWrites(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	const writers, recSize, maxRecs = 8, 64, 2000
	for round := range 5 {
		ids := []ID{{Ino: uint64(100 + round), Slot: 0}, {Ino: uint64(100 + round), Slot: 1}}
		var frozen atomic.Bool
		var started sync.WaitGroup
		var wg sync.WaitGroup
		ok := make([][]int, writers) // records written, per writer
		for g := range writers {
			started.Add(1)
			wg.Go(func() {
				id := ids[g%len(ids)]
				for i := range maxRecs {
					if i == 10 {
						started.Done()
					}
					after := frozen.Load()
					rec := make([]byte, recSize)
					binary.LittleEndian.PutUint64(rec, uint64(g+1)<<32|uint64(i+1))
					err := s.WriteAt(id, int64((i*writers+g)*recSize), rec, i%7 == 0)
					if err != nil {
						if errs.CodeOf(err) != errs.Moved {
							t.Errorf("writer %d record %d: %v", g, i, err)
						}
						if i < 10 {
							started.Done()
						}
						return
					}
					if after {
						t.Errorf("writer %d record %d: written after Freeze returned", g, i)
					}
					ok[g] = append(ok[g], i)
				}
			})
		}
		started.Wait()
		if err := s.Freeze(ids...); err != nil {
			t.Fatal(err)
		}
		frozen.Store(true)
		// What the chunks hold when Freeze returns.
		snap := make([][]byte, len(ids))
		for k, id := range ids {
			snap[k], _ = mustRead(t, s, id, 0, writers*maxRecs*recSize)
		}
		wg.Wait()
		n := 0
		for g, recs := range ok {
			for _, i := range recs {
				off := (i*writers + g) * recSize
				b := snap[g%len(ids)]
				if off+8 > len(b) || binary.LittleEndian.Uint64(b[off:]) != uint64(g+1)<<32|uint64(i+1) {
					t.Fatalf("round %d: writer %d record %d was acknowledged but is not in the chunk when Freeze returned", round, g, i)
				}
				n++
			}
		}
		for k, id := range ids {
			if got, _ := mustRead(t, s, id, 0, writers*maxRecs*recSize); !bytes.Equal(got, snap[k]) {
				t.Fatalf("round %d: chunk %v changed after Freeze returned", round, id)
			}
		}
		t.Logf("round %d: %d writes before the fence", round, n)
	}
}
