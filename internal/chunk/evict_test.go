package chunk

import (
	"bytes"
	"os"
	"testing"
)

// sumEntry reads block blk's entry of chunk id from its sidecar on disk.
func sumEntry(t *testing.T, s *Store, id ID, blk uint32) entry {
	t.Helper()
	_, sumPath := s.Paths(id)
	b, err := os.ReadFile(sumPath)
	if err != nil {
		t.Fatal(err)
	}
	e, err := parseEntry(b[blk*entrySize:(blk+1)*entrySize], blk)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestEvictKeepsSyncState checks that evicting a chunk with writes that
// are not durable neither syncs it nor forgets what is not durable: a
// later write to the same block keeps the block's last durable state as
// its fallback (prev), and Sync of the evicted chunk makes it durable.
func TestEvictKeepsSyncState(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{Target: testTarget, Logger: quietLogger(), MaxOpenChunks: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x, y, z := ID{Ino: 1}, ID{Ino: 2}, ID{Ino: 3}
	a, b, c := pattern(1, 1000), pattern(2, 1000), pattern(3, 1000)
	mustWrite(t, s, x, 0, a, true)  // durable: A
	mustWrite(t, s, x, 0, b, false) // B, not durable: prev = A
	durable := state{crc: crc(a), n: 1000}
	if e := sumEntry(t, s, x, 0); e.prev != durable {
		t.Fatalf("after the unsynced overwrite: prev %+v, want A %+v", e.prev, durable)
	}
	mustWrite(t, s, y, 0, a, false) // evicts x
	s.mu.Lock()
	_, tracked := s.mu.unsynced[x]
	_, open := s.mu.open[x]
	s.mu.Unlock()
	if open || !tracked {
		t.Fatalf("after eviction: x open %v, its sync state kept %v", open, tracked)
	}
	mustWrite(t, s, x, 0, c, false) // opens x again: B was never synced, so prev stays A
	if e := sumEntry(t, s, x, 0); e.prev != durable || e.cur != (state{crc: crc(c), n: 1000}) {
		t.Fatalf("after a write to the evicted chunk: entry %+v, want cur C and prev A %+v", e, durable)
	}
	if got, _ := mustRead(t, s, x, 0, 1000); !bytes.Equal(got, c) {
		t.Fatal("read of the evicted chunk's last write differs")
	}

	// Sync of a chunk evicted with unsynced writes syncs it.
	mustWrite(t, s, z, 0, a, false) // evicts x (C not durable)
	if err := s.Sync(x); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	_, tracked = s.mu.unsynced[x]
	h := s.mu.open[x]
	s.mu.Unlock()
	if tracked || h == nil || h.unsynced || len(h.dirty) != 0 {
		t.Fatalf("after Sync: sync state still kept %v, handle %v", tracked, h != nil)
	}
	mustWrite(t, s, x, 0, a, false) // C durable now: prev = C
	if e := sumEntry(t, s, x, 0); e.prev != (state{crc: crc(c), n: 1000}) {
		t.Fatalf("after Sync and a new write: prev %+v, want C", e.prev)
	}
}
