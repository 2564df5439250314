package kvcache

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func val(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed*31 + i*7)
	}
	return b
}

func putAll(t *testing.T, s *share, key string, v []byte, upload uint64) uint8 {
	t.Helper()
	var st uint8
	for off := 0; ; off += 2 * blockSize {
		end := min(off+2*blockSize, len(v))
		var err error
		st, err = s.put(&wire.KVPutReq{Key: key, Upload: upload, Total: uint64(len(v)), Off: uint64(off)}, v[off:end])
		if err != nil {
			t.Fatalf("put %q part at %d: %v", key, off, err)
		}
		if end == len(v) {
			return st
		}
	}
}

func newShare(t *testing.T, capacity uint64, ttl time.Duration, c *clock) (*share, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "s")
	cfg := &wire.KVConfig{Capacity: capacity, TTL: int64(ttl), Replicas: 1, Targets: []placement.TargetID{1}}
	s, err := openShare(dir, cfg, c.now)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func TestShareLifecycle(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1e6, 0)}
	s, dir := newShare(t, 64<<20, time.Hour, c)
	v := val(1, 5*blockSize+123)
	if st := putAll(t, s, "a", v, 1); st != wire.KVStored {
		t.Fatalf("put: status %d", st)
	}
	if st := putAll(t, s, "a", val(2, 100), 2); st != wire.KVExisted {
		t.Fatalf("second put of a key: status %d, want existed", st)
	}
	got, total, err := read(s, "a", 3*blockSize-5, 2*blockSize)
	if err != nil || total != uint64(len(v)) || !bytes.Equal(got, v[3*blockSize-5:5*blockSize-5]) {
		t.Fatalf("ranged get: %d bytes of %d, %v", len(got), total, err)
	}
	if p := s.exists([]string{"a", "b"}); !p[0] || p[1] {
		t.Fatalf("exists: %v", p)
	}
	// Restart: the index comes back from the files.
	s.close()
	s2, err := openShare(dir, nil, c.now)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := read(s2, "a", 0, MaxValue); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("after reopening: %d bytes, %v", len(got), err)
	}
	// A flipped byte on disk is corruption, never wrong bytes.
	p := s2.valuePath("a")
	b, _ := os.ReadFile(p)
	b[len(b)-10] ^= 0x40
	os.WriteFile(p, b, 0o644)
	if _, _, err := read(s2, "a", 0, MaxValue); errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("get of a damaged value: %v", err)
	}
	if n := s2.del([]string{"a", "zz"}); n != 1 {
		t.Fatalf("delete: %d", n)
	}
	// TTL: past it the value is gone, and the key can be put again.
	putAll(t, s2, "t", val(3, 10), 3)
	c.add(time.Hour + time.Second)
	if _, _, err := read(s2, "t", 0, 10); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("get past the TTL: %v", err)
	}
	if st := putAll(t, s2, "t", val(4, 10), 4); st != wire.KVStored {
		t.Fatalf("put after expiry: status %d", st)
	}
}

// TestShareEvictionLease fills a share while a reader holds a lease on
// the oldest value: the least recently used unleased values go, the
// leased one stays until its reader finished.
func TestShareEvictionLease(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1e6, 0)}
	s, _ := newShare(t, 10*blockSize, 0, c)
	for i := range 8 {
		putAll(t, s, fmt.Sprintf("k%d", i), val(i, blockSize), uint64(i))
	}
	// Read the first half of k0: a lease until the rest is read.
	if _, _, err := read(s, "k0", 0, blockSize/2); err != nil {
		t.Fatal(err)
	}
	for i := 8; i < 14; i++ {
		putAll(t, s, fmt.Sprintf("k%d", i), val(i, blockSize), uint64(i))
	}
	if p := s.exists([]string{"k0", "k1", "k13"}); !p[0] || p[1] || !p[2] {
		t.Fatalf("after filling: k0 (leased) %v, k1 (LRU) %v, k13 (newest) %v", p[0], p[1], p[2])
	}
	got, _, err := read(s, "k0", blockSize/2, blockSize)
	if err != nil || !bytes.Equal(got, val(0, blockSize)[blockSize/2:]) {
		t.Fatalf("rest of the leased value: %d bytes, %v", len(got), err)
	}
	st := s.stat()
	if st.Used > 10*blockSize || st.Evictions == 0 {
		t.Fatalf("stats %+v", st)
	}
	// Its lease ended with that read: filling the share again evicts it
	// in its turn.
	for i := 14; i < 30; i++ {
		putAll(t, s, fmt.Sprintf("k%d", i), val(i, blockSize), uint64(i))
	}
	if p := s.exists([]string{"k0"}); p[0] {
		t.Fatal("k0 never evicted after its lease ended")
	}
	// Everything leased: a put is refused and nothing is lost.
	s2, _ := newShare(t, 2*blockSize, 0, c)
	putAll(t, s2, "x", val(1, blockSize), 1)
	read(s2, "x", 0, 10)
	if _, err := s2.put(&wire.KVPutReq{Key: "y", Upload: 2, Total: 2 * blockSize}, val(2, 2*blockSize)); errs.CodeOf(err) != errs.NoSpace {
		t.Fatalf("put into a share whose values are all leased: %v", err)
	}
	if p := s2.exists([]string{"x"}); !p[0] {
		t.Fatal("the leased value was evicted by a refused put")
	}
}

// TestShareConcurrentPuts: of many puts of one key, one stores its value
// and the others learn the key existed; the value read is the winner's.
func TestShareConcurrentPuts(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1e6, 0)}
	s, _ := newShare(t, 256<<20, 0, c)
	var wg sync.WaitGroup
	status := make([]uint8, 16)
	for i := range status {
		wg.Go(func() { status[i] = putAll(t, s, "same", val(i, 3*blockSize+i), uint64(i)) })
	}
	wg.Wait()
	winner := -1
	for i, st := range status {
		if st == wire.KVStored {
			if winner >= 0 {
				t.Fatalf("puts %d and %d both stored", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no put stored")
	}
	if got, _, err := read(s, "same", 0, MaxValue); err != nil || !bytes.Equal(got, val(winner, 3*blockSize+winner)) {
		t.Fatalf("value after concurrent puts: %d bytes, %v", len(got), err)
	}
}

// read is a get into a new buffer (the verified path).
func read(s *share, key string, off, n uint64) ([]byte, uint64, error) {
	g, err := s.get(key, off, n, false)
	if err != nil {
		return nil, 0, err
	}
	defer g.release()
	return bytes.Clone(g.data), g.total, nil
}

// TestStaleUploads is the decision alone: uploads idle for the limit or
// longer, and no others.
func TestStaleUploads(t *testing.T) {
	now := time.Unix(1e6, 0)
	ups := map[upKey]*upload{
		{"a", 1}: {last: now.Add(-uploadIdle - time.Second)},
		{"b", 2}: {last: now.Add(-uploadIdle)},
		{"c", 3}: {last: now.Add(-uploadIdle + time.Second)},
		{"d", 4}: {last: now},
	}
	got := staleUploads(ups, now, uploadIdle)
	slices.SortFunc(got, func(x, y upKey) int { return strings.Compare(x.key, y.key) })
	if !slices.Equal(got, []upKey{{"a", 1}, {"b", 2}}) {
		t.Fatalf("stale uploads %v, want a and b", got)
	}
	if got := staleUploads(nil, now, uploadIdle); len(got) != 0 {
		t.Fatalf("stale uploads of none: %v", got)
	}
}

// TestShareIdleUpload: an upload whose client stopped sending parts is
// dropped, with its temporary file, by the next new upload once it has
// been idle for uploadIdle; a later part of it, like a part of an upload
// the target never saw begin (it restarted in between), is refused as
// stale instead of starting a value that could never complete.
func TestShareIdleUpload(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1e6, 0)}
	s, dir := newShare(t, 64<<20, 0, c)
	v := val(5, 3*blockSize)
	tmpFiles := func() int {
		ents, err := os.ReadDir(filepath.Join(dir, "tmp"))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	if st, err := s.put(&wire.KVPutReq{Key: "k", Upload: 1, Total: uint64(len(v))}, v[:blockSize]); err != nil || st != wire.KVPart {
		t.Fatalf("first part: %d, %v", st, err)
	}
	c.add(uploadIdle - time.Second)
	putAll(t, s, "other", val(6, 10), 2)
	if n := tmpFiles(); n != 1 {
		t.Fatalf("%d temporary files after a new put before the limit, want 1 (the open upload)", n)
	}
	c.add(time.Second)
	putAll(t, s, "other2", val(7, 10), 3)
	if n := tmpFiles(); n != 0 {
		t.Fatalf("%d temporary files after the idle upload was dropped", n)
	}
	if _, err := s.put(&wire.KVPutReq{Key: "k", Upload: 1, Total: uint64(len(v)), Off: blockSize}, v[blockSize:]); errs.CodeOf(err) != errs.Stale {
		t.Fatalf("a later part of a dropped upload: %v, want stale", err)
	}
	if _, err := s.put(&wire.KVPutReq{Key: "n", Upload: 9, Total: uint64(len(v)), Off: 2 * blockSize}, v[2*blockSize:]); errs.CodeOf(err) != errs.Stale {
		t.Fatalf("a part of an upload never begun here: %v, want stale", err)
	}
	if p := s.exists([]string{"k", "n"}); p[0] || p[1] {
		t.Fatalf("values of refused parts exist: %v", p)
	}
	// The value put again from its start is stored.
	if st := putAll(t, s, "k", v, 4); st != wire.KVStored {
		t.Fatalf("put again: status %d", st)
	}
	if got, _, err := read(s, "k", 0, MaxValue); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("value put again: %d bytes, %v", len(got), err)
	}
}

// TestShareRepeatedParts: a client whose connection broke sends its value
// again from the start under the same upload number. Parts that come
// twice count once (the value is not complete until its last block came),
// and a part of the upload that already stored the value hears "stored",
// while another upload of the key hears "existed".
func TestShareRepeatedParts(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1e6, 0)}
	s, dir := newShare(t, 64<<20, 0, c)
	v := val(8, 3*blockSize+100)
	part := func(off, end int) uint8 {
		t.Helper()
		st, err := s.put(&wire.KVPutReq{Key: "k", Upload: 7, Total: uint64(len(v)), Off: uint64(off)}, v[off:end])
		if err != nil {
			t.Fatalf("part [%d, %d): %v", off, end, err)
		}
		return st
	}
	part(0, blockSize)
	part(blockSize, 2*blockSize)
	part(0, blockSize) // sent again: the connection broke
	if st := part(blockSize, 2*blockSize); st != wire.KVPart {
		t.Fatalf("four parts covering two of four blocks: status %d, want part", st)
	}
	if p := s.exists([]string{"k"}); p[0] {
		t.Fatal("value exists before its last blocks came")
	}
	if st := part(2*blockSize, len(v)); st != wire.KVStored {
		t.Fatalf("last part: status %d", st)
	}
	if got, _, err := read(s, "k", 0, MaxValue); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("value: %d bytes, %v", len(got), err)
	}
	if st := part(0, blockSize); st != wire.KVStored {
		t.Fatalf("the storing upload's part again: status %d, want stored", st)
	}
	// After a restart too: the value file's header names its upload.
	s.close()
	var err error
	if s, err = openShare(dir, nil, c.now); err != nil {
		t.Fatal(err)
	}
	if st := part(0, blockSize); st != wire.KVStored {
		t.Fatalf("the storing upload's part again after a restart: status %d, want stored", st)
	}
	if st, err := s.put(&wire.KVPutReq{Key: "k", Upload: 8, Total: uint64(len(v))}, v[:blockSize]); err != nil || st != wire.KVExisted {
		t.Fatalf("another upload of the key: %d, %v; want existed", st, err)
	}
}
