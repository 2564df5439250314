package kv

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// errConflict is the committer's verdict on a transaction whose reads
// changed before it could commit. Update retries on it and never returns it.
var errConflict = errors.New("kv: transaction conflict")

// committer is the single writer of a store. Update hands it finished
// transactions; it takes all pending ones as a group, validates them in
// order against the committed state plus the writes of the transactions
// accepted before them in the group, and commits the accepted ones in one
// batch. Under SyncAlways, or when an accepted transaction asked for it
// (Txn.RequireSync), the batch is synced before the group is woken: one
// sync for the whole group. Otherwise the syncer, if any, syncs later.
//
// Validation order is commit order, so the committed history is serial.
// A transaction is valid if every Get and Scan it made would return the
// same result now. The history of recently written keys proves that for
// most transactions without reading the store; the others are validated
// exactly, by reading their keys and ranges again through the batch.
//
// Who commits a group: a transaction that arrives while no group is being
// processed commits itself, with whatever else is pending, on its own
// goroutine (the leader), so a lone writer never waits for a hand-off to
// another goroutine and back (two wake-ups, most of an uncontended
// commit's time on a small machine). Transactions that arrive while a
// group is being processed wait for the committer goroutine, which takes
// them as the next group once the one in progress is done. Only one group
// is processed at a time (mu.busy), so commits stay serial.
type committer struct {
	st store
	// always makes every group's commit synced (SyncAlways, and engines
	// without a syncer).
	always bool
	// syncer learns of every commit; nil under SyncAlways.
	syncer *syncer

	// gen counts committed batches: the generation of the store's newest
	// snapshot. Only the goroutine processing a group uses it (mu.busy).
	gen uint64

	wake chan struct{} // capacity 1: pending work
	stop chan struct{} // closed by close
	wg   sync.WaitGroup

	mu struct {
		sync.Mutex
		pending *group // collects transactions until the committer takes it
		// busy: a group is being processed (by a leader or the committer
		// goroutine); gen, hist and the store's batches belong to whoever
		// set it.
		busy bool
		// reserved is the read set of the priority Update's last rejected
		// attempt, or nil. While it is set, other transactions that write
		// into it are rejected, so the priority Update's next attempt, which
		// reads a snapshot taken after the rejection, commits (unless it
		// reads other keys, which it then reserves). The committer sets it;
		// the priority Update clears it when it ends.
		reserved *reservation
	}

	// Statistics, for benchmarks and tests.
	groups    atomic.Uint64 // batches committed
	committed atomic.Uint64 // transactions committed
	conflicts atomic.Uint64 // transactions rejected
	exact     atomic.Uint64 // transactions validated by reading the store

	leads atomic.Uint64 // groups processed by a leader (not the goroutine), committed or all rejected

	hist *history // only the goroutine processing a group uses it (mu.busy)
}

// reservation is a read set that only the priority Update may write into.
type reservation struct {
	keys   map[string]struct{}
	ranges []rangeRead // seen is not used
}

func newReservation(tx *txn) *reservation {
	r := &reservation{keys: make(map[string]struct{}, len(tx.reads)), ranges: tx.scans}
	for _, pr := range tx.reads {
		r.keys[string(pr.key)] = struct{}{}
	}
	return r
}

// blocks reports whether tx writes into r.
func (r *reservation) blocks(tx *txn) bool {
	if r == nil || tx.priority {
		return false
	}
	hit := false
	tx.writes.Scan(func(w write) bool {
		if _, hit = r.keys[string(w.key)]; hit {
			return false
		}
		for _, rr := range r.ranges {
			if bytes.Compare(w.key, rr.start) >= 0 && below(w.key, rr.end) {
				hit = true
				return false
			}
		}
		return true
	})
	return hit
}

func (c *committer) unreserve() {
	c.mu.Lock()
	c.mu.reserved = nil
	c.mu.Unlock()
}

// group is the set of transactions committed by one batch.
type group struct {
	txns []*txn
	done chan struct{} // closed when every txn's commitErr is final
}

func newCommitter(st store, always bool, sy *syncer) *committer {
	c := &committer{
		st:     st,
		always: always,
		syncer: sy,
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		hist:   newHistory(),
	}
	c.wg.Go(c.run)
	return c
}

// commit hands tx to the committer and waits for the verdict: nil once the
// writes are durable and visible, errConflict, or a store error. If no
// group is being processed, the caller processes tx's group itself.
func (c *committer) commit(tx *txn) error {
	c.mu.Lock()
	g := c.mu.pending
	if g == nil {
		g = &group{done: make(chan struct{})}
		c.mu.pending = g
	}
	g.txns = append(g.txns, tx)
	if !c.mu.busy {
		var res *reservation
		g, res = c.takeLocked() // g itself, with what else is pending
		c.mu.Unlock()
		c.leads.Add(1)
		c.lead(g, res)
		return tx.commitErr
	}
	// A group is being processed: whoever processes it wakes the
	// committer goroutine for tx's group when it is done (idle).
	c.mu.Unlock()
	<-g.done
	return tx.commitErr
}

// lead processes group g on the caller's goroutine. A panic there (the
// engine's broken invariants: pebble's Fatalf) ends the process, as it
// did on the committer goroutine, instead of reaching a caller that may
// recover it (the wire server recovers its handlers' panics) and leave
// the store busy for good.
func (c *committer) lead(g *group, res *reservation) {
	defer func() {
		if r := recover(); r != nil {
			go func() { panic(fmt.Sprintf("kv: commit: %v", r)) }()
			select {} // the panic above ends the process
		}
	}()
	c.finish(g, res)
}

// takeLocked starts the processing of the pending group and returns it
// with the reservation in force. c.mu is held and no group is being
// processed.
func (c *committer) takeLocked() (*group, *reservation) {
	g := c.mu.pending
	c.mu.busy, c.mu.pending = true, nil
	return g, c.mu.reserved
}

// finish processes group g, wakes its transactions and ends the
// processing (idle).
func (c *committer) finish(g *group, res *reservation) {
	c.process(g, res)
	close(g.done)
	c.idle()
}

// idle ends the processing of a group and, if transactions arrived
// meanwhile, wakes the committer goroutine for them.
func (c *committer) idle() {
	c.mu.Lock()
	c.mu.busy = false
	more := c.mu.pending != nil
	c.mu.Unlock()
	if more {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// close stops the committer goroutine. The caller guarantees that no commit
// is in progress or will start.
func (c *committer) close() {
	close(c.stop)
	c.wg.Wait()
}

func (c *committer) run() {
	for {
		select {
		case <-c.wake:
		case <-c.stop:
			return
		}
		c.mu.Lock()
		if c.mu.pending == nil || c.mu.busy {
			// Nothing to do, or a leader is at work (it wakes us
			// again when it is done, if anything is left).
			c.mu.Unlock()
			continue
		}
		g, res := c.takeLocked()
		c.mu.Unlock()
		c.finish(g, res)
	}
}

// process decides and commits one group, setting every txn's commitErr.
// res is the reservation in force.
func (c *committer) process(g *group, res *reservation) {
	// Within a group the order is free: the priority transaction goes
	// first, then those that lost more often.
	slices.SortStableFunc(g.txns, func(a, b *txn) int {
		if a.priority != b.priority {
			if a.priority {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.attempt, a.attempt)
	})

	b, err := c.st.newBatch()
	if err != nil {
		for _, tx := range g.txns {
			tx.commitErr = fmt.Errorf("kv: commit: start batch: %w", err)
		}
		return
	}
	next := c.gen + 1 // this group's generation, if it commits
	var accepted []*txn
	durable := c.always
	for _, tx := range g.txns {
		if res.blocks(tx) {
			tx.commitErr = errConflict
			c.conflicts.Add(1)
			continue
		}
		if c.hist.changedSince(tx) {
			c.exact.Add(1)
			ok, err := validate(b, tx)
			if err != nil {
				tx.commitErr = fmt.Errorf("kv: commit: validate: %w", err)
				continue
			}
			if !ok {
				tx.commitErr = errConflict
				c.conflicts.Add(1)
				if tx.priority {
					res = newReservation(tx)
					c.mu.Lock()
					c.mu.reserved = res
					c.mu.Unlock()
				}
				continue
			}
		}
		if err := apply(b, tx); err != nil {
			// The batch may hold part of tx: commit none of the group.
			b.release()
			for _, tx := range g.txns {
				if tx.commitErr == nil {
					tx.commitErr = fmt.Errorf("kv: commit: %w", err)
				}
			}
			return
		}
		// Later members of the group must see tx's writes as newer than
		// their snapshots. If the batch fails, the entries only cost them an
		// exact validation.
		c.hist.record(next, tx)
		accepted = append(accepted, tx)
		durable = durable || tx.requireSync
	}
	if len(accepted) == 0 {
		b.release()
		return
	}
	if err := b.commit(durable); err != nil {
		for _, tx := range accepted {
			tx.commitErr = fmt.Errorf("kv: commit: %w", err)
		}
		return
	}
	if c.syncer != nil {
		c.syncer.committed(next, durable)
	}
	c.gen = next
	c.groups.Add(1)
	c.committed.Add(uint64(len(accepted)))
}

// validate reports whether every read of tx would return the same result
// from r as it did from tx's snapshot. Equal values count as unchanged, so
// a key rewritten with the value tx saw does not cause a conflict.
func validate(r reader, tx *txn) (bool, error) {
	for _, pr := range tx.reads {
		v, found, err := r.get(pr.key)
		if err != nil {
			return false, fmt.Errorf("get %q: %w", abbrev(pr.key), err)
		}
		if found != pr.found || !bytes.Equal(v, pr.value) {
			return false, nil
		}
	}
	for i := range tx.scans {
		ok, err := validateRange(r, &tx.scans[i])
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func validateRange(r reader, rr *rangeRead) (ok bool, err error) {
	it, err := r.iter(rr.start, rr.end)
	if err != nil {
		return false, fmt.Errorf("scan [%q, %q): %w", abbrev(rr.start), abbrev(rr.end), err)
	}
	defer func() {
		if cerr := it.close(); cerr != nil && err == nil {
			ok, err = false, fmt.Errorf("scan [%q, %q): %w", abbrev(rr.start), abbrev(rr.end), cerr)
		}
	}()
	i := 0
	for valid := it.first(); valid; valid = it.next() {
		if i == len(rr.seen) || !bytes.Equal(it.key(), rr.seen[i].key) {
			return false, nil // a key appeared or went away
		}
		v, err := it.value()
		if err != nil {
			return false, fmt.Errorf("scan [%q, %q): %w", abbrev(rr.start), abbrev(rr.end), err)
		}
		if !bytes.Equal(v, rr.seen[i].value) {
			return false, nil
		}
		i++
	}
	return i == len(rr.seen), nil
}

// apply adds tx's buffered writes to b.
func apply(b batch, tx *txn) error {
	var err error
	tx.writes.Scan(func(w write) bool {
		if w.del {
			err = b.delete(w.key)
		} else {
			err = b.set(w.key, w.value)
		}
		return err == nil
	})
	return err
}
