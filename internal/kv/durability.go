package kv

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// SyncMode says when the pebble engine makes a commit durable against a
// crash of the machine (power loss, kernel panic). Against a crash of the
// process (kill -9) every acknowledged commit is safe in both modes: its
// record reached the operating system (write(2)) before Update returned.
type SyncMode uint8

const (
	// SyncGroup (the default) acknowledges a commit once its record is
	// written, and makes it durable within the sync window: a background
	// syncer syncs the commit log at most once per window, and only when
	// there are commits to sync. DB.Sync, and a transaction that called
	// Txn.RequireSync, make everything committed so far durable at once.
	// A power loss loses at most the commits of the last window (plus one
	// sync's duration), and always a suffix: the store comes back as it
	// was after some commit, never with a later commit and without an
	// earlier one.
	SyncGroup SyncMode = iota
	// SyncAlways syncs every group of commits before acknowledging it (one
	// sync per group, shared by the transactions committed together).
	SyncAlways
)

// DefaultSyncWindow is the sync window of SyncGroup when none is given.
const DefaultSyncWindow = 5 * time.Millisecond

// MaxSyncWindow bounds the sync window.
const MaxSyncWindow = time.Minute

func (m SyncMode) String() string {
	switch m {
	case SyncGroup:
		return "group"
	case SyncAlways:
		return "always"
	}
	return fmt.Sprintf("SyncMode(%d)", uint8(m))
}

// ParseSyncMode parses "group" or "always".
func ParseSyncMode(s string) (SyncMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "group":
		return SyncGroup, nil
	case "always":
		return SyncAlways, nil
	}
	return 0, fmt.Errorf("kv: sync mode %q: want group or always: %w", s, errs.ErrInvalid)
}

// syncState is what the syncer knows about the commits of one DB. Commits
// are counted by generation (the committer's gen).
type syncState struct {
	committed uint64 // the newest commit's generation
	synced    uint64 // every commit up to this generation is durable
	// dirtySince is no later than the acknowledgement of the oldest commit
	// after synced; zero when there is none.
	dirtySince time.Time
	waiting    bool // a DB.Sync call waits
	failed     bool // a sync failed: nothing more will be synced
}

// syncPolicy is the decision of when to sync, apart from any I/O: the
// syncer feeds it events and does what it says.
type syncPolicy struct {
	window time.Duration
}

// committed records that commit gen was acknowledged at now; durable says
// that it was synced before, which makes every earlier commit durable too
// (the log is synced as a whole).
func (p syncPolicy) committed(s *syncState, gen uint64, durable bool, now time.Time) {
	s.committed = max(s.committed, gen)
	switch {
	case durable:
		s.synced = max(s.synced, gen)
		if s.synced >= s.committed {
			s.dirtySince = time.Time{}
		}
	case s.dirtySince.IsZero() && s.committed > s.synced:
		s.dirtySince = now
	}
}

// next says, at now, whether to sync at once and, if not, how long to wait
// before asking again (0: until the next event).
func (p syncPolicy) next(s syncState, now time.Time) (syncNow bool, wait time.Duration) {
	if s.failed || s.committed <= s.synced {
		return false, 0
	}
	if s.waiting {
		return true, 0
	}
	if age := now.Sub(s.dirtySince); age < p.window {
		return false, p.window - age
	}
	return true, 0
}

// synced records that a sync that started at start, when target was the
// newest commit, completed. Commits after target were acknowledged after
// start, so start bounds their age from below.
func (p syncPolicy) synced(s *syncState, target uint64, start time.Time) {
	s.synced = max(s.synced, target)
	if s.committed > s.synced {
		s.dirtySince = start
	} else {
		s.dirtySince = time.Time{}
	}
}

// syncer makes commits durable in the background under SyncGroup: it
// syncs the store when syncPolicy says so, and serves DB.Sync, sharing one
// sync among the callers waiting at the time.
type syncer struct {
	policy syncPolicy
	sync   func() error // makes every commit so far durable
	kick   chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		st      syncState
		waiters []syncWaiter
		err     error // the failed sync's error, once st.failed
	}
	syncs atomic.Uint64 // syncs done, for tests and statistics
}

type syncWaiter struct {
	target uint64
	done   chan error // buffered(1)
}

func newSyncer(window time.Duration, sync func() error) *syncer {
	s := &syncer{
		policy: syncPolicy{window: window},
		sync:   sync,
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
	}
	s.wg.Go(s.run)
	return s
}

// committed is called by the committer after commit gen; durable says
// that it (and so every earlier one) was synced.
func (s *syncer) committed(gen uint64, durable bool) {
	s.mu.Lock()
	wasIdle := s.mu.st.dirtySince.IsZero()
	s.policy.committed(&s.mu.st, gen, durable, time.Now())
	startTimer := wasIdle && !s.mu.st.dirtySince.IsZero()
	if durable {
		s.releaseLocked()
	}
	s.mu.Unlock()
	if startTimer {
		s.poke()
	}
}

func (s *syncer) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// wait returns once every commit acknowledged before the call is durable.
func (s *syncer) wait(ctx context.Context) error {
	s.mu.Lock()
	if s.mu.st.failed {
		err := s.mu.err
		s.mu.Unlock()
		return err
	}
	target := s.mu.st.committed
	if s.mu.st.synced >= target {
		s.mu.Unlock()
		return nil
	}
	w := syncWaiter{target: target, done: make(chan error, 1)}
	s.mu.waiters = append(s.mu.waiters, w)
	s.mu.st.waiting = true
	s.mu.Unlock()
	s.poke()
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		// The waiter stays queued; its sync happens anyway.
		return ctx.Err()
	}
}

// releaseLocked wakes the waiters whose commits are durable. The caller
// holds s.mu.
func (s *syncer) releaseLocked() {
	keep := s.mu.waiters[:0]
	for _, w := range s.mu.waiters {
		switch {
		case s.mu.st.failed:
			w.done <- s.mu.err
		case w.target <= s.mu.st.synced:
			w.done <- nil
		default:
			keep = append(keep, w)
		}
	}
	clear(s.mu.waiters[len(keep):])
	s.mu.waiters = keep
	s.mu.st.waiting = len(keep) > 0
}

func (s *syncer) run() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		now := time.Now()
		s.mu.Lock()
		syncNow, wait := s.policy.next(s.mu.st, now)
		target := s.mu.st.committed
		s.mu.Unlock()
		if syncNow {
			err := s.sync()
			s.syncs.Add(1)
			s.mu.Lock()
			if err != nil {
				s.mu.st.failed = true
				s.mu.err = fmt.Errorf("kv: sync: %w", err)
			} else {
				s.policy.synced(&s.mu.st, target, now)
			}
			s.releaseLocked()
			s.mu.Unlock()
			continue
		}
		var fire <-chan time.Time
		if wait > 0 {
			timer.Reset(wait)
			fire = timer.C
		}
		select {
		case <-fire:
		case <-s.kick:
			timer.Stop()
		case <-s.stop:
			return
		}
	}
}

// close stops the syncer. Waiters still queued (their callers gave up) are
// dropped; the store's own close makes the rest durable.
func (s *syncer) close() {
	close(s.stop)
	s.wg.Wait()
}
