package chunk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Chunk fences, for online migration (see doc.go, "Fences").
//
// A migration copies a file's chunks to a new layout. Before it switches
// the file over, it freezes the old chunks on every replica: from then on
// a write or truncate of them fails with errs.Moved, so a client holding
// the old layout fetches the new one and retries there, and no write lands
// in data that was already copied. Reads go on while the chunk exists; once
// it is removed, a read fails with errs.Moved instead of reading a hole.

// fencesDir is the directory of the fence files in a store.
const fencesDir = "fences"

// fenceSet is the set of frozen chunks of a store.
type fenceSet struct {
	op sync.Mutex // held through Freeze, Thaw and ExpireFences: one at a time
	// since is when ExpireFences first found each frozen chunk gone
	// (guarded by op; in memory only: the clock starts again at Open).
	since   map[ID]time.Time
	expired atomic.Uint64 // fences ExpireFences removed since Open

	n  atomic.Int64 // len(m), read without mu: most stores have no fences
	mu sync.RWMutex
	m  map[ID]struct{}
}

// Freeze fences the chunks ids: when it returns nil, the fences are
// durable, every write and truncate of those chunks that returned nil
// before is in the chunk, and every later one fails with errs.Moved (as
// does a read of a frozen chunk that does not exist). Reads, syncs and
// removes of a frozen chunk work as before, and removing it keeps the
// fence. Freezing a frozen chunk again is harmless. If Freeze fails, some
// of the chunks may be frozen in memory only (until the store is closed)
// and some durably: call Freeze again, or Thaw.
func (s *Store) Freeze(ids ...ID) error {
	if len(ids) == 0 {
		return nil
	}
	f := &s.fences
	f.op.Lock()
	defer f.op.Unlock()
	// In memory first, so that every write that takes a chunk's lock from
	// now on sees the fence (WriteAt and Truncate check it under the lock);
	// then wait for the ones that hold it already.
	f.mu.Lock()
	for _, id := range ids {
		f.m[id] = struct{}{}
		// A fence frozen again waits its whole grace from now on.
		delete(f.since, id)
	}
	f.n.Store(int64(len(f.m)))
	f.mu.Unlock()
	for _, id := range ids {
		h, err := s.lockChunk(id, false, true)
		if err == errNoChunk {
			continue
		}
		if err != nil {
			return fmt.Errorf("chunk: freeze chunk %v on target %d: %w", id, s.opts.Target, err)
		}
		s.unlock(h, true)
	}
	// Every fence is written again, also one already frozen: an earlier
	// Freeze that failed may have left it in memory only.
	for _, id := range ids {
		fd, err := os.OpenFile(s.fencePath(id), os.O_WRONLY|os.O_CREATE, 0o644)
		if err == nil {
			err = fd.Close()
		}
		if err != nil {
			return fmt.Errorf("chunk: freeze chunk %v on target %d: %w", id, s.opts.Target, ioErr(err))
		}
	}
	if err := syncDir(filepath.Join(s.dir, fencesDir)); err != nil {
		return fmt.Errorf("chunk: freeze %d chunks on target %d: %w", len(ids), s.opts.Target, err)
	}
	return nil
}

// Thaw removes the fences of chunks ids (a migration given up): writes
// work again once it returns nil. The removal is durable before the
// fences stop holding writes back, so a crash cannot let a write in and
// then bring its fence back. Thawing a chunk that is not frozen does
// nothing.
func (s *Store) Thaw(ids ...ID) error {
	f := &s.fences
	f.op.Lock()
	defer f.op.Unlock()
	return s.thawLocked(ids)
}

// thawLocked is Thaw with fences.op held.
func (s *Store) thawLocked(ids []ID) error {
	f := &s.fences
	var gone []ID
	for _, id := range ids {
		if !s.Frozen(id) {
			continue
		}
		if err := os.Remove(s.fencePath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("chunk: thaw chunk %v on target %d: %w", id, s.opts.Target, ioErr(err))
		}
		gone = append(gone, id)
	}
	if len(gone) == 0 {
		return nil
	}
	if err := syncDir(filepath.Join(s.dir, fencesDir)); err != nil {
		return fmt.Errorf("chunk: thaw %d chunks on target %d: %w", len(gone), s.opts.Target, err)
	}
	f.mu.Lock()
	for _, id := range gone {
		delete(f.m, id)
		delete(f.since, id)
	}
	f.n.Store(int64(len(f.m)))
	f.mu.Unlock()
	return nil
}

// Frozen reports whether chunk id is frozen (see Freeze).
func (s *Store) Frozen(id ID) bool {
	f := &s.fences
	if f.n.Load() == 0 {
		return false
	}
	f.mu.RLock()
	_, ok := f.m[id]
	f.mu.RUnlock()
	return ok
}

// moved is the error of an operation refused by chunk id's fence.
func (s *Store) moved(id ID) error {
	return errs.New(errs.Moved, "chunk: chunk %v on target %d moved to another layout (frozen for migration)", id, s.opts.Target)
}

func (s *Store) fencePath(id ID) string {
	return filepath.Join(s.dir, fencesDir, fmt.Sprintf("%016x.%08x", id.Ino, id.Slot))
}

// loadFences reads the fences at Open, making the fences directory in a
// store that has none (one formatted before fences existed, or new).
func (s *Store) loadFences() error {
	dir := filepath.Join(s.dir, fencesDir)
	switch err := os.Mkdir(dir, 0o755); {
	case err == nil:
		if err := syncDir(s.dir); err != nil {
			return fmt.Errorf("chunk: open target %d: %w", s.opts.Target, err)
		}
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("chunk: open target %d: %w", s.opts.Target, ioErr(err))
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("chunk: open target %d: read fences: %w", s.opts.Target, ioErr(err))
	}
	m := make(map[ID]struct{}, len(ents))
	for _, e := range ents {
		id, ok := parseName(e.Name())
		if !ok || !e.Type().IsRegular() {
			s.log.Warn("chunk: ignoring unknown file", "file", filepath.Join(dir, e.Name()))
			continue
		}
		m[id] = struct{}{}
	}
	f := &s.fences
	f.mu.Lock()
	f.m = m
	f.since = map[ID]time.Time{}
	f.n.Store(int64(len(m)))
	f.mu.Unlock()
	return nil
}

// FrozenList returns the frozen chunks after after, in (Ino, Slot) order,
// at most limit of them (limit <= 0: all), and whether more follow: the
// fences a resync passes to a replica that joins a chain.
func (s *Store) FrozenList(after ID, limit int) ([]ID, bool) {
	f := &s.fences
	f.mu.RLock()
	ids := make([]ID, 0, len(f.m))
	for id := range f.m {
		if cmpID(id, after) > 0 {
			ids = append(ids, id)
		}
	}
	f.mu.RUnlock()
	slices.SortFunc(ids, cmpID)
	if limit > 0 && len(ids) > limit {
		return ids[:limit], true
	}
	return ids, false
}
