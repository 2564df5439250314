package client

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// tierShare lets the ranged GETs of one released file's copy be used by
// every consumer in this client: the reads of its Files and the restore
// that a read started. A sequential reader and the restore ask for the
// same aligned segments (tierSegment blocks, restoreUnit bytes), so
// without it each segment was fetched twice, once for the reader and once
// for the restore. A fetch is registered under its exact range; whoever
// asks for the same range of the same copy while it is in flight waits
// for it, and after it ended takes its bytes, checked already (tierGet),
// never changed afterwards. Completed fetches are kept, oldest forgotten
// first, up to maxShareBytes; a failed one is forgotten at once.
type tierShare struct {
	joined atomic.Uint64 // consumers that took another's fetch (RestoreStats.Shared)

	mu    sync.Mutex
	m     map[shareKey]*tierFetch
	order []shareKey // completed fetches, oldest first (some maybe gone)
	bytes int64      // of the completed fetches in m
}

// shareKey is a fetched range of one copy (generation; an imported
// object's ETag) of a file.
type shareKey struct {
	ino, gen uint64
	etag     string
	off, n   int64
}

// maxShareBytes bounds the bytes of completed fetches a client keeps for
// other consumers: a reader up to this far ahead of the restore (or the
// restore ahead of a reader) still saves it a GET.
const maxShareBytes = 64 << 20

// join returns the fetch registered under k and false, or registers fresh
// under k and returns it and true: the caller then performs it and calls
// done.
func (s *tierShare) join(k shareKey, fresh *tierFetch) (*tierFetch, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fe := s.m[k]; fe != nil {
		s.joined.Add(1)
		return fe, false
	}
	if s.m == nil {
		s.m = make(map[shareKey]*tierFetch)
	}
	s.m[k] = fresh
	return fresh, true
}

// done records the end of the caller's fetch fe under k (after fe.done is
// closed): a failed fetch is forgotten, so that the next consumer asks
// again; a completed one is kept within maxShareBytes.
func (s *tierShare) done(k shareKey, fe *tierFetch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[k] != fe {
		return // forgotten meanwhile (dropIno)
	}
	if fe.err != nil {
		delete(s.m, k)
		return
	}
	s.order = append(s.order, k)
	s.bytes += int64(len(fe.data))
	for s.bytes > maxShareBytes && len(s.order) > 0 {
		old := s.order[0]
		s.order = s.order[1:]
		if e := s.m[old]; e != nil && e.completed() {
			s.bytes -= int64(len(e.data))
			delete(s.m, old)
		}
	}
}

// dropIno forgets every fetch of ino: its restore committed, and reads
// go to its chunks.
func (s *tierShare) dropIno(ino uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, fe := range s.m {
		if k.ino == ino {
			if fe.completed() {
				s.bytes -= int64(len(fe.data))
			}
			delete(s.m, k)
		}
	}
	// Their keys leave the eviction order too: a client restoring many
	// files while under the byte bound would otherwise keep every key.
	s.order = slices.DeleteFunc(s.order, func(k shareKey) bool { return k.ino == ino })
}

// completed reports whether fe ended without an error.
func (fe *tierFetch) completed() bool {
	select {
	case <-fe.done:
		return fe.err == nil
	default:
		return false
	}
}

// wait waits for fe to end, or for ctx.
func (fe *tierFetch) wait(ctx context.Context) error {
	select {
	case <-fe.done:
		return fe.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
