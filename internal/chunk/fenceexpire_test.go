package chunk

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestExpireFencesDecision checks the decision alone: a chunk's clock
// starts when it is first seen gone, a fence expires once its chunk has
// been gone for the grace, chunks seen again drop out, a time in the
// future counts as now.
func TestExpireFencesDecision(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a, b, c, d := ID{Ino: 1}, ID{Ino: 1, Slot: 1}, ID{Ino: 2}, ID{Ino: 3}
	grace := time.Minute

	since, expire := expireFences(nil, []ID{a, b}, t0, grace)
	if len(expire) != 0 || !since[a].Equal(t0) || !since[b].Equal(t0) || len(since) != 2 {
		t.Fatalf("first sight: since %v, expire %v", since, expire)
	}
	// b is gone no more (a thaw made it again, say): dropped. c is new.
	since, expire = expireFences(since, []ID{a, c}, t0.Add(grace-time.Nanosecond), grace)
	if len(expire) != 0 || len(since) != 2 || !since[a].Equal(t0) || !since[c].Equal(t0.Add(grace-time.Nanosecond)) {
		t.Fatalf("before the grace: since %v, expire %v", since, expire)
	}
	since[d] = t0.Add(time.Hour) // a clock that went back: counts from now
	since, expire = expireFences(since, []ID{a, c, d}, t0.Add(grace), grace)
	if !slices.Equal(expire, []ID{a}) || len(since) != 2 || !since[d].Equal(t0.Add(grace)) {
		t.Fatalf("at the grace: since %v, expire %v", since, expire)
	}
	if _, expire = expireFences(since, []ID{c, d}, t0.Add(10*grace), grace); len(expire) != 2 {
		t.Fatalf("long after: expire %v", expire)
	}
	if _, expire = expireFences(nil, []ID{a}, t0, 0); !slices.Equal(expire, []ID{a}) {
		t.Fatalf("no grace: expire %v", expire)
	}
}

// TestExpireFences walks fences through expiry on a store: a frozen chunk
// that still exists keeps its fence however long; a removed one keeps it
// until it has been seen gone for the grace, then loses it durably (a
// reopened store does not load it, and a write makes the chunk again); a
// reopened store starts the clock again; Freeze starts it again too.
func TestExpireFences(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	kept, gone, refrozen := ID{Ino: 9}, ID{Ino: 9, Slot: 1}, ID{Ino: 9, Slot: 2}
	for _, id := range []ID{kept, gone, refrozen} {
		mustWrite(t, s, id, 0, pattern(uint64(id.Slot), 1000), true)
	}
	if err := s.Freeze(kept, gone, refrozen); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(9, []uint32{gone.Slot, refrozen.Slot}); err != nil {
		t.Fatal(err)
	}
	grace := time.Minute
	t0 := time.Now()
	expireAt := func(now time.Time, want int) {
		t.Helper()
		if n, err := s.ExpireFences(now, grace); err != nil || n != want {
			t.Fatalf("ExpireFences at +%v: %d, %v; want %d", now.Sub(t0), n, err, want)
		}
	}
	expireAt(t0, 0) // the clock of gone and refrozen starts
	expireAt(t0.Add(grace/2), 0)
	if err := s.Freeze(refrozen); err != nil { // frozen again: a new grace
		t.Fatal(err)
	}
	expireAt(t0.Add(grace/2+time.Second), 0)
	expireAt(t0.Add(grace), 1)
	if !s.Frozen(kept) || s.Frozen(gone) || !s.Frozen(refrozen) {
		t.Fatalf("after the grace: frozen kept %v, gone %v, refrozen %v", s.Frozen(kept), s.Frozen(gone), s.Frozen(refrozen))
	}
	if _, err := os.Stat(filepath.Join(dir, "fences", "0000000000000009.00000001")); !os.IsNotExist(err) {
		t.Fatalf("the expired fence's file: %v", err)
	}
	if held, expired := s.Fences(); held != 2 || expired != 1 {
		t.Fatalf("Fences: %d held, %d expired; want 2, 1", held, expired)
	}
	// A write makes the chunk again (what a stale client without a lease
	// would do: the reason fences wait for the grace).
	mustWrite(t, s, gone, 0, []byte("new"), true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir)
	if !s.Frozen(kept) || s.Frozen(gone) || !s.Frozen(refrozen) {
		t.Fatalf("reopened: frozen kept %v, gone %v, refrozen %v", s.Frozen(kept), s.Frozen(gone), s.Frozen(refrozen))
	}
	t1 := time.Now()
	if n, err := s.ExpireFences(t1, grace); err != nil || n != 0 {
		t.Fatalf("reopened, first pass: %d, %v; want 0 (the clock starts again)", n, err)
	}
	if n, err := s.ExpireFences(t1.Add(grace), grace); err != nil || n != 1 {
		t.Fatalf("reopened, a grace later: %d, %v; want 1", n, err)
	}
	if !s.Frozen(kept) || s.Frozen(refrozen) {
		t.Fatalf("at the end: frozen kept %v, refrozen %v", s.Frozen(kept), s.Frozen(refrozen))
	}
}

// TestExpireLoop checks that a store opened with a FenceGrace removes the
// fence of a removed chunk by itself, and keeps that of one still there.
func TestExpireLoop(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{Target: 1, FenceGrace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kept, gone := ID{Ino: 5}, ID{Ino: 5, Slot: 1}
	mustWrite(t, s, kept, 0, []byte("kept"), true)
	mustWrite(t, s, gone, 0, []byte("gone"), true)
	if err := s.Freeze(kept, gone); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(5, []uint32{gone.Slot}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); s.Frozen(gone); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fence of a removed chunk never expired")
		}
	}
	if !s.Frozen(kept) {
		t.Fatal("the fence of a chunk still there expired")
	}
}

// BenchmarkFenceExpiry measures, for a store holding 100,000 fences of
// chunks that are gone: loading them at Open, ExpireFences's first pass
// (a stat per fence), a later pass before the grace (no stat), and the
// pass that removes them all (a file removal per fence, one directory
// sync). Reported per fence.
func BenchmarkFenceExpiry(b *testing.B) {
	const n = 100_000
	ids := make([]ID, n)
	for i := range ids {
		ids[i] = ID{Ino: uint64(1 + i/4), Slot: uint32(i % 4)}
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / n }
	for b.Loop() {
		dir := b.TempDir()
		s := openStore(b, dir)
		if err := s.Freeze(ids...); err != nil {
			b.Fatal(err)
		}
		s.Close()
		t0 := time.Now()
		s = openStore(b, dir)
		load := time.Since(t0)
		now := time.Now()
		t0 = time.Now()
		if k, err := s.ExpireFences(now, time.Minute); err != nil || k != 0 {
			b.Fatal(k, err)
		}
		first := time.Since(t0)
		t0 = time.Now()
		if k, err := s.ExpireFences(now.Add(time.Second), time.Minute); err != nil || k != 0 {
			b.Fatal(k, err)
		}
		again := time.Since(t0)
		t0 = time.Now()
		if k, err := s.ExpireFences(now.Add(time.Minute), time.Minute); err != nil || k != n {
			b.Fatal(k, err)
		}
		expire := time.Since(t0)
		if held, _ := s.Fences(); held != 0 {
			b.Fatalf("%d fences left", held)
		}
		s.Close()
		b.ReportMetric(per(load), "ns-open/fence")
		b.ReportMetric(per(first), "ns-first-pass/fence")
		b.ReportMetric(per(again), "ns-later-pass/fence")
		b.ReportMetric(per(expire), "ns-expire/fence")
	}
}

// TestExpireFencesBatches checks that one call removes more than
// maxExpire fences (in batches).
func TestExpireFencesBatches(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	ids := make([]ID, maxExpire+10)
	for i := range ids {
		ids[i] = ID{Ino: 40, Slot: uint32(i)}
	}
	if err := s.Freeze(ids...); err != nil { // chunks that never existed: gone
		t.Fatal(err)
	}
	t0 := time.Now()
	for i, want := range []int{0, maxExpire + 10, 0} {
		now := t0
		if i > 0 {
			now = t0.Add(time.Minute)
		}
		if n, err := s.ExpireFences(now, time.Minute); err != nil || n != want {
			t.Fatalf("call %d: %d, %v; want %d", i, n, err, want)
		}
	}
	if held, expired := s.Fences(); held != 0 || expired != uint64(len(ids)) {
		t.Fatalf("Fences: %d held, %d expired", held, expired)
	}
}
