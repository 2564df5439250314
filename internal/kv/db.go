package kv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pause"
)

const (
	// maxAttempts bounds how often Update runs its function when commits
	// conflict.
	maxAttempts = 100

	// priorityAfter is the number of conflicts after which an Update queues
	// for priority (see committer.reservation), so that a hot key cannot
	// starve it.
	priorityAfter = 4
)

// db is the transaction layer shared by the engines: it implements DB over a
// store, with optimistic transactions and a group committer.
//
// Locks (the gate's, committer.mu, the stores' own) are never held together.
type db struct {
	gate
	st store
	c  *committer
	// syncer makes commits durable in the background (SyncGroup); nil
	// when every commit is synced.
	syncer *syncer

	// priority is held by the one Update that has priority: a token, so
	// that Updates queue for it and can give up waiting when ctx ends.
	priority chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// gate admits View and Update calls until it is shut, and lets Close wait
// for the calls in progress. Every engine embeds one.
type gate struct {
	ops sync.WaitGroup // calls in progress
	mu  sync.Mutex
	// closed is set by shut; guarded by mu.
	closed bool
}

// newDB returns the transaction layer over st. Under SyncGroup a syncer
// syncs st within window of each commit; under SyncAlways every commit is
// synced.
func newDB(st store, mode SyncMode, window time.Duration) *db {
	d := &db{st: st, priority: make(chan struct{}, 1)}
	if mode == SyncGroup {
		d.syncer = newSyncer(window, st.sync)
	}
	d.c = newCommitter(st, mode == SyncAlways, d.syncer)
	return d
}

// enter registers a View or Update call, failing once shut was called;
// the call ends with exit.
func (g *gate) enter() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	g.ops.Add(1)
	return nil
}

func (g *gate) exit() { g.ops.Done() }

func (g *gate) closing() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// shut refuses new calls and waits for those in progress.
// retry decides, after commit attempt number attempt ended with err,
// whether Update runs the transaction again; if not, it returns what
// Update returns (nil after a successful commit).
func (g *gate) retry(err error, attempt int) (again bool, _ error) {
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, errConflict):
		return false, fmt.Errorf("kv: update: %w", err)
	case attempt >= maxAttempts:
		return false, fmt.Errorf("kv: update: still conflicting after %d attempts: %w", attempt, errs.ErrConflict)
	case g.closing():
		return false, fmt.Errorf("kv: update: %w", ErrClosed)
	}
	return true, nil
}

func (g *gate) shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.ops.Wait()
}

// begin starts a transaction over a fresh snapshot.
func (d *db) begin(writable bool, attempt int) (*txn, error) {
	snap, gen, err := d.st.snapshot()
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return newTxn(snap, writable, gen, attempt), nil
}

func (d *db) View(ctx context.Context, fn func(tx Txn) error) error {
	if err := d.enter(); err != nil {
		return fmt.Errorf("kv: view: %w", err)
	}
	defer d.exit()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kv: view: %w", err)
	}
	tx, err := d.begin(false, 1)
	if err != nil {
		return fmt.Errorf("kv: view: %w", err)
	}
	if err := run(tx, fn); err != nil {
		return err
	}
	return tx.err
}

// run calls fn and ends tx's read phase, even if fn panics.
func run(tx *txn, fn func(tx Txn) error) error {
	defer tx.finish()
	return fn(tx)
}

// Update runs fn until its transaction commits without conflict. A context
// error is checked before each attempt and before the commit is handed to
// the committer; once handed over, Update waits for the outcome, so an
// error from ctx always means that nothing was written.
func (d *db) Update(ctx context.Context, fn func(tx Txn) error) error {
	if err := d.enter(); err != nil {
		return fmt.Errorf("kv: update: %w", err)
	}
	defer d.exit()
	prio := false // this call holds d.priority
	defer func() {
		if prio {
			d.c.unreserve()
			<-d.priority
		}
	}()
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kv: update: %w", err)
		}
		tx, err := d.begin(true, attempt)
		if err != nil {
			return fmt.Errorf("kv: update: %w", err)
		}
		tx.priority = prio
		err = run(tx, fn)
		switch {
		case err != nil:
			return err
		case tx.err != nil:
			return tx.err
		case !tx.hasWrites():
			// A read-only transaction read one consistent, committed
			// snapshot: it is serializable as of that snapshot.
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kv: update: %w", err)
		}
		committing(ctx)
		if again, err := d.retry(d.c.commit(tx), attempt); !again {
			return err
		}
		if attempt >= priorityAfter && !prio {
			select {
			case d.priority <- struct{}{}:
				prio = true
			case <-ctx.Done():
				return fmt.Errorf("kv: update: waiting for priority: %w", ctx.Err())
			}
		}
		if !prio {
			if err := backoff(ctx, attempt); err != nil {
				return fmt.Errorf("kv: update: %w", err)
			}
		}
	}
}

// committingKey is the context key of WithCommitting's function.
type committingKey struct{}

// WithCommitting returns a context under which Update calls f each time a
// transaction it runs has done its reads and is handed over to be
// committed, before it waits for the commit (and, by the durability
// policy, its sync). A scheduler admitting the callers uses it to let
// others in while they wait (the metadata service's QoS gate); f may be
// called more than once.
func WithCommitting(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, committingKey{}, f)
}

func committing(ctx context.Context) {
	if f, ok := ctx.Value(committingKey{}).(func()); ok {
		f()
	}
}

// backoff waits a little before attempt+1. The state that beat the attempt
// is already committed, so the first retries go at once; later ones wait a
// random, growing while to break up convoys on a hot key.
func backoff(ctx context.Context, attempt int) error {
	if attempt < 3 {
		return nil
	}
	ceiling := min(time.Duration(attempt)*50*time.Microsecond, 2*time.Millisecond)
	return pause.For(ctx, rand.N(ceiling)+1)
}

// Sync waits for the syncer to make every commit acknowledged so far
// durable; without a syncer every commit already is.
func (d *db) Sync(ctx context.Context) error {
	if err := d.enter(); err != nil {
		return fmt.Errorf("kv: sync: %w", err)
	}
	defer d.exit()
	if d.syncer == nil {
		return nil
	}
	if err := d.syncer.wait(ctx); err != nil {
		return fmt.Errorf("kv: sync: %w", err)
	}
	return nil
}

// SyncStats returns the number of syncs the background syncer made (0
// without one). Tests and metrics find it with an interface check.
func (d *db) SyncStats() (syncs uint64) {
	if d.syncer == nil {
		return 0
	}
	return d.syncer.syncs.Load()
}

// Close waits for View, Update and Sync calls in progress, stops the
// committer and the syncer and closes the store, which makes every commit
// durable. Later calls return the first call's result.
func (d *db) Close() error {
	d.closeOnce.Do(func() {
		d.shut()
		d.c.close()
		if d.syncer != nil {
			d.syncer.close()
		}
		if err := d.st.close(); err != nil {
			d.closeErr = fmt.Errorf("kv: close: %w", err)
		}
	})
	return d.closeErr
}

// CommitStats counts a group-committing engine's work since it opened.
type CommitStats struct {
	Groups    uint64 // groups committed (one batch each)
	Commits   uint64 // transactions committed, in those groups
	Leads     uint64 // groups a lone writer processed on its own goroutine (also those all rejected)
	Conflicts uint64 // transactions rejected at commit (then retried)
	Exact     uint64 // transactions validated read by read (their keys changed since their snapshot)
	Syncs     uint64 // background syncs of the engine (0 when every commit syncs)
}

// CommitStats returns the engine's group-commit counters (memory and
// pebble engines). Metrics find it with an interface check on the DB.
func (d *db) CommitStats() CommitStats {
	st := CommitStats{
		Groups: d.c.groups.Load(), Commits: d.c.committed.Load(), Leads: d.c.leads.Load(),
		Conflicts: d.c.conflicts.Load(), Exact: d.c.exact.Load(),
	}
	if d.syncer != nil {
		st.Syncs = d.syncer.syncs.Load()
	}
	return st
}

// CacheStats returns how many point reads the engine's read cache answered
// and how many it did not; both are 0 for an engine without one (memory).
// Metrics find it with an interface check on the DB.
func (d *db) CacheStats() (hits, misses uint64) {
	if ps, ok := d.st.(*pebbleStore); ok && ps.cache != nil {
		return ps.cache.hits.Load(), ps.cache.misses.Load()
	}
	return 0, 0
}
