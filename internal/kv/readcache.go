package kv

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// readCache keeps recently read and written values of the pebble engine in
// memory, so that point reads (the metadata service's lookups and stats)
// skip pebble's iterator machinery. It is exactly consistent with the
// snapshots transactions read, by generation:
//
//   - The committer, the only writer, puts every key a batch wrote (value or
//     deletion) with the batch's generation, after the batch is committed
//     (in the commit log and pebble) and before the snapshot of that
//     generation is published.
//   - A reader whose snapshot has generation g uses an entry only if the
//     entry's generation is <= g; otherwise it reads pebble.
//   - After a miss, a reader may insert what it read from its snapshot, with
//     its own generation, only if the key has no entry (a commit after the
//     snapshot would have left one) and its generation is at least the
//     shard's floor. A full shard is cleared and its floor raised to the
//     highest generation it held, so a reader whose snapshot may predate a
//     forgotten commit can no longer insert.
//
// Range scans do not use the cache.
type readCache struct {
	seed         maphash.Seed
	shards       []cacheShard
	max          int // entries per shard
	hits, misses atomic.Uint64
}

type cacheShard struct {
	mu      sync.RWMutex
	m       map[string]cacheEntry
	maxGen  uint64 // highest generation put in m
	floor   uint64 // readers below this generation may not insert
	padding [32]byte
}

type cacheEntry struct {
	value []byte // nil with found false: the key does not exist
	found bool
	// big: the key holds a value over maxCachedValue, which the cache
	// does not keep; readers go to pebble. The entry stays, so that a
	// reader of an older snapshot cannot insert the value before it.
	big bool
	gen uint64
}

// maxCachedValue is the largest value the cache keeps: inode records,
// names, and the bytes of files up to 4 KiB (inline data is a CRC32C and
// the bytes). Larger inline data (16 KiB by default, up to 1 MiB) would
// otherwise let the cache hold gigabytes.
const maxCachedValue = 4<<10 + 4

const cacheShards = 64

// newReadCache returns a cache of about entries entries, or nil if
// entries <= 0.
func newReadCache(entries int) *readCache {
	if entries <= 0 {
		return nil
	}
	c := &readCache{seed: maphash.MakeSeed(), shards: make([]cacheShard, cacheShards), max: max(entries/cacheShards, 1)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]cacheEntry)
	}
	return c
}

func (c *readCache) shard(key []byte) *cacheShard {
	return &c.shards[maphash.Bytes(c.seed, key)%cacheShards]
}

// get returns the value of key as of generation gen, if the cache knows it.
func (c *readCache) get(key []byte, gen uint64) (value []byte, found, ok bool) {
	s := c.shard(key)
	s.mu.RLock()
	e, hit := s.m[string(key)]
	s.mu.RUnlock()
	if !hit || e.gen > gen || e.big {
		c.misses.Add(1)
		return nil, false, false
	}
	c.hits.Add(1)
	return e.value, e.found, true
}

// fill records what a reader at generation gen read from its snapshot.
func (c *readCache) fill(key, value []byte, found bool, gen uint64) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen < s.floor {
		return
	}
	if _, present := s.m[string(key)]; present {
		return
	}
	if len(s.m) >= c.max {
		s.resetLocked()
		if gen < s.floor {
			return
		}
	}
	if len(value) > maxCachedValue {
		s.m[string(key)] = cacheEntry{found: found, big: true, gen: gen}
		return
	}
	var v []byte
	if found {
		v = append(make([]byte, 0, len(value)), value...)
	}
	s.m[string(key)] = cacheEntry{value: v, found: found, gen: gen}
}

// put records a committed write of generation gen. value and found say
// what the key now holds; value must not be modified afterwards.
func (c *readCache) put(key, value []byte, found bool, gen uint64) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= c.max {
		s.resetLocked()
	}
	if len(value) > maxCachedValue {
		s.m[string(key)] = cacheEntry{found: found, big: true, gen: gen}
	} else {
		s.m[string(key)] = cacheEntry{value: value, found: found, gen: gen}
	}
	s.maxGen = max(s.maxGen, gen)
}

// resetLocked empties the shard. Its floor becomes the highest generation
// it held, so that nothing older can be inserted in place of a forgotten
// commit. s.mu is held.
func (s *cacheShard) resetLocked() {
	clear(s.m)
	s.floor = max(s.floor, s.maxGen)
}
