package chunk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// Fence expiry (see doc.go, "Fences"; ADR 0023, addendum).
//
// A fence outlives its chunk so that a client still holding the layout
// that named the chunk is refused (errs.Moved) instead of writing a chunk
// nobody will read or reading a hole. Clients use a layout for chunk I/O
// only within a lease after they learnt it from the metadata service
// (client.Options.LayoutLease), and a frozen chunk is removed only after
// the file left its data ID, so once the chunk has been gone for longer
// than the lease plus the longest a request takes, no client can still
// send a request that needs the fence. Options.FenceGrace is that bound;
// ExpireFences removes the fences that outlived it.

// expireFences decides which fences expire: gone lists the frozen chunks
// that do not exist now, since says when each was first seen gone (absent:
// not before now), grace is how long a chunk must have been gone. It
// returns when each chunk of gone that stays frozen was first seen gone,
// and the chunks whose fences expire. Chunks not in gone (still there)
// are dropped from since: their clock starts when they are seen gone.
func expireFences(since map[ID]time.Time, gone []ID, now time.Time, grace time.Duration) (next map[ID]time.Time, expire []ID) {
	next = make(map[ID]time.Time, len(gone))
	for _, id := range gone {
		t, ok := since[id]
		if !ok || t.After(now) {
			t = now
		}
		if now.Sub(t) >= grace {
			expire = append(expire, id)
			continue
		}
		next[id] = t
	}
	return next, expire
}

// maxExpire bounds the fences ExpireFences removes while Freeze and Thaw
// wait (a file removal each): it takes and leaves fences.op between such
// batches.
const maxExpire = 1024

// ExpireFences removes the fences of frozen chunks that this store has
// seen gone for at least grace (the first call that finds a chunk gone
// starts its clock: after Open, every fence waits a whole grace again).
// The removal is durable before it returns, as Thaw's. It returns the
// number of fences removed.
func (s *Store) ExpireFences(now time.Time, grace time.Duration) (int, error) {
	f := &s.fences
	f.op.Lock()
	f.mu.RLock()
	ids := make([]ID, 0, len(f.m))
	for id := range f.m {
		ids = append(ids, id)
	}
	f.mu.RUnlock()
	var gone []ID
	for _, id := range ids {
		if _, ok := f.since[id]; ok {
			// Seen gone before: a frozen chunk is never made again (its
			// writes are refused), so it is gone still.
			gone = append(gone, id)
			continue
		}
		_, sum := s.Paths(id)
		switch _, err := os.Lstat(sum); {
		case errors.Is(err, fs.ErrNotExist):
			gone = append(gone, id)
		case err != nil:
			f.op.Unlock()
			return 0, fmt.Errorf("chunk: expire fences on target %d: %w", s.opts.Target, ioErr(err))
		}
	}
	next, expire := expireFences(f.since, gone, now, grace)
	// The expired stay in since until they are removed: a Freeze meanwhile
	// drops them from it, and they are kept.
	for _, id := range expire {
		t, ok := f.since[id]
		if !ok {
			t = now.Add(-grace)
		}
		next[id] = t
	}
	f.since = next
	f.op.Unlock()

	removed := 0
	for len(expire) > 0 {
		if s.fenceStop != nil {
			select {
			case <-s.fenceStop:
				return removed, nil // closing: the rest at the next Open's grace
			default:
			}
		}
		batch := expire[:min(maxExpire, len(expire))]
		expire = expire[len(batch):]
		f.op.Lock()
		keep := batch[:0]
		for _, id := range batch {
			if t, ok := f.since[id]; ok && now.Sub(t) >= grace {
				keep = append(keep, id)
			}
		}
		err := s.thawLocked(keep)
		f.op.Unlock()
		if err != nil {
			return removed, err
		}
		removed += len(keep)
		f.expired.Add(uint64(len(keep)))
	}
	return removed, nil
}

// Fences returns the number of fences the store holds and the number
// ExpireFences removed since Open.
func (s *Store) Fences() (held int, expired uint64) {
	return int(s.fences.n.Load()), s.fences.expired.Load()
}

// expireLoop calls ExpireFences every quarter of grace (at most every
// minute, at least every 10 ms) until Close.
func (s *Store) expireLoop(grace time.Duration) {
	defer close(s.fenceDone)
	t := time.NewTicker(min(max(grace/4, 10*time.Millisecond), time.Minute))
	defer t.Stop()
	for {
		select {
		case <-s.fenceStop:
			return
		case <-t.C:
		}
		if s.fences.n.Load() == 0 {
			continue
		}
		n, err := s.ExpireFences(time.Now(), grace)
		switch {
		case err != nil:
			s.log.Warn("chunk: expiring fences", "err", err)
		case n > 0:
			s.log.Info("chunk: fences of removed chunks expired", "fences", n, "grace", grace)
		}
	}
}
