package kv

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestParseSyncMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want SyncMode
		ok   bool
	}{
		{"group", SyncGroup, true},
		{"always", SyncAlways, true},
		{" Always ", SyncAlways, true},
		{"", 0, false},
		{"never", 0, false},
	} {
		got, err := ParseSyncMode(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSyncMode(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if want := strings.ToLower(strings.TrimSpace(tc.in)); tc.ok && got.String() != want {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), want)
		}
	}
}

// TestSyncPolicy drives the policy through scripted events: a commit that
// nobody syncs explicitly is synced once it is a window old, an explicit
// Sync syncs at once, durable commits need no sync, and a sync that ran
// while commits arrived leaves them for the next one.
func TestSyncPolicy(t *testing.T) {
	const w = 5 * time.Millisecond
	p := syncPolicy{window: w}
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type want struct {
		now  bool
		wait time.Duration
	}
	check := func(step string, s syncState, now time.Time, w want) {
		t.Helper()
		gotNow, gotWait := p.next(s, now)
		if gotNow != w.now || gotWait != w.wait {
			t.Errorf("%s: next(%+v) = %v, %v; want %v, %v", step, s, gotNow, gotWait, w.now, w.wait)
		}
	}

	var s syncState
	check("idle", s, at(0), want{false, 0})

	p.committed(&s, 1, false, at(0))
	check("fresh commit", s, at(0), want{false, w})
	check("2 ms later", s, at(2*time.Millisecond), want{false, 3 * time.Millisecond})
	p.committed(&s, 2, false, at(3*time.Millisecond))
	check("a later commit keeps the oldest's deadline", s, at(3*time.Millisecond), want{false, 2 * time.Millisecond})
	check("window reached", s, at(w), want{true, 0})
	check("window passed", s, at(time.Second), want{true, 0})

	// The sync starts at 5 ms with target 2; commit 3 arrives meanwhile.
	p.committed(&s, 3, false, at(6*time.Millisecond))
	p.synced(&s, 2, at(5*time.Millisecond))
	if s.synced != 2 || s.dirtySince != at(5*time.Millisecond) {
		t.Errorf("after a sync that missed commit 3: %+v", s)
	}
	check("commit 3 counts from the sync's start", s, at(7*time.Millisecond), want{false, 3 * time.Millisecond})
	p.synced(&s, 3, at(10*time.Millisecond))
	check("all synced", s, at(time.Hour), want{false, 0})

	p.committed(&s, 4, false, at(20*time.Millisecond))
	s.waiting = true
	check("an explicit Sync does not wait for the window", s, at(20*time.Millisecond), want{true, 0})
	s.waiting = false

	p.committed(&s, 5, true, at(21*time.Millisecond))
	if s.synced != 5 || !s.dirtySince.IsZero() {
		t.Errorf("a durable commit makes everything before it durable: %+v", s)
	}
	check("after a durable commit", s, at(time.Hour), want{false, 0})

	p.committed(&s, 6, false, at(30*time.Millisecond))
	s.failed = true
	check("after a failed sync, never again", s, at(time.Hour), want{false, 0})
}

// TestSyncerWindow runs the syncer on a fake clock (synctest): a commit is
// synced one window after it was acknowledged, not before; an idle syncer
// does not sync; Sync shares one sync among its callers.
func TestSyncerWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const w = 5 * time.Millisecond
		var syncs atomic.Int32
		s := newSyncer(w, func() error { syncs.Add(1); return nil })
		defer s.close()

		time.Sleep(time.Second)
		synctest.Wait()
		if n := syncs.Load(); n != 0 {
			t.Fatalf("an idle syncer synced %d times", n)
		}

		s.committed(1, false)
		time.Sleep(w - time.Millisecond)
		synctest.Wait()
		if n := syncs.Load(); n != 0 {
			t.Fatalf("synced %d times before the window passed", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := syncs.Load(); n != 1 {
			t.Fatalf("%d syncs once the window passed, want 1", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := syncs.Load(); n != 1 {
			t.Fatalf("%d syncs with nothing new committed, want 1", n)
		}

		// Three callers wait for commit 2: one sync, at once.
		s.committed(2, false)
		errc := make(chan error, 3)
		for range 3 {
			go func() { errc <- s.wait(t.Context()) }()
		}
		synctest.Wait()
		for range 3 {
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		}
		if n := syncs.Load(); n != 2 {
			t.Fatalf("%d syncs after three concurrent Syncs, want 2", n)
		}
		if err := s.wait(t.Context()); err != nil || syncs.Load() != 2 {
			t.Fatalf("Sync with nothing to sync: %v, %d syncs", err, syncs.Load())
		}
	})
}

// TestSyncerFailure: a failed sync fails its waiters and every later Sync,
// and the syncer stops trying.
func TestSyncerFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("disk on fire")
		var syncs atomic.Int32
		s := newSyncer(time.Millisecond, func() error { syncs.Add(1); return boom })
		defer s.close()
		s.committed(1, false)
		if err := s.wait(t.Context()); !errors.Is(err, boom) {
			t.Fatalf("Sync after a failed sync = %v, want %v", err, boom)
		}
		s.committed(2, false)
		time.Sleep(time.Second)
		synctest.Wait()
		if n := syncs.Load(); n != 1 {
			t.Fatalf("%d syncs after a failure, want 1", n)
		}
		if err := s.wait(t.Context()); !errors.Is(err, boom) {
			t.Fatalf("later Sync = %v, want %v", err, boom)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := s.wait(ctx); !errors.Is(err, boom) {
			t.Fatalf("Sync with a canceled context after a failure = %v", err)
		}
	})
}
