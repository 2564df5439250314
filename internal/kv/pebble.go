package kv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluice-fs/sluice/internal/errs"
)

// PebbleOptions configures OpenPebble. The zero value (or nil) gives the
// defaults.
type PebbleOptions struct {
	// CacheSize is the block cache size in bytes; 0 means 64 MiB.
	CacheSize int64

	// MemTableSize is the size of one memtable in bytes; 0 means 16 MiB.
	MemTableSize uint64

	// Logger receives pebble's messages: informational ones at debug level,
	// errors at error level. nil discards them.
	Logger *slog.Logger

	// ReadCacheEntries bounds the in-memory cache of point reads
	// (readcache.go); 0 means 262,144 entries, negative disables it.
	ReadCacheEntries int
}

const (
	defaultReadCacheEntries   = 256 << 10
	defaultPebbleCacheSize    = 64 << 20
	defaultPebbleMemTableSize = 16 << 20
)

// Validate reports whether the options are usable.
func (o *PebbleOptions) Validate() error {
	if o.CacheSize < 0 {
		return fmt.Errorf("kv: pebble options: negative CacheSize %d: %w", o.CacheSize, errs.ErrInvalid)
	}
	if o.MemTableSize >= 4<<30 {
		return fmt.Errorf("kv: pebble options: MemTableSize %d is 4 GiB or more: %w", o.MemTableSize, errs.ErrInvalid)
	}
	return nil
}

// OpenPebble opens (creating if needed) the pebble database in dir. Every
// Update that returns nil was synced to disk (pebble.Sync) before returning.
func OpenPebble(dir string, opts *PebbleOptions) (DB, error) {
	var o PebbleOptions
	if opts != nil {
		o = *opts
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.CacheSize == 0 {
		o.CacheSize = defaultPebbleCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = defaultPebbleMemTableSize
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	pdb, err := pebble.Open(dir, &pebble.Options{
		CacheSize:          o.CacheSize,
		MemTableSize:       o.MemTableSize,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{logger},
	})
	if err != nil {
		return nil, fmt.Errorf("kv: open pebble %s: %w", dir, err)
	}
	if o.ReadCacheEntries == 0 {
		o.ReadCacheEntries = defaultReadCacheEntries
	}
	st := newPebbleStore(pdb)
	st.cache = newReadCache(o.ReadCacheEntries)
	return newDB(st), nil
}

// pebbleLogger routes pebble's log messages to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf is called by pebble on a broken invariant; it must not return.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Log(context.Background(), slog.LevelError+4, msg, "component", "pebble")
	panic("kv: pebble: " + msg)
}

// pebbleStore reads through pebble snapshots that it takes itself, right
// after each commit returns, and shares among transactions. Pebble makes a
// batch visible as soon as it is in the memtable, possibly before its WAL
// sync completes, so reading the live database (or a snapshot taken at any
// moment) could show data a crash would lose. A snapshot taken after the
// committer's own synced commit returned, with no other writer, holds only
// durable data.
type pebbleStore struct {
	db *pebble.DB
	mu sync.RWMutex // guards cur; held for writing only to replace it
	// cur is the snapshot of the committed state; nil after close.
	cur *pebbleSnap
	// cache holds point reads and committed writes by generation; nil if
	// disabled. It is set before the store is shared.
	cache *readCache
}

// pebbleSnap is a shared snapshot, closed when its last user releases it.
type pebbleSnap struct {
	s    *pebble.Snapshot
	gen  uint64
	refs atomic.Int64 // one for being cur, one per reader
}

func (p *pebbleSnap) unref() {
	if p.refs.Add(-1) == 0 {
		_ = p.s.Close() // only unlinks the snapshot; cannot fail
	}
}

func newPebbleStore(db *pebble.DB) *pebbleStore {
	s := &pebbleStore{db: db}
	s.publish(0)
	return s
}

// publish makes a snapshot of the current state, which holds gen batches,
// the one that transactions read.
func (s *pebbleStore) publish(gen uint64) {
	next := &pebbleSnap{s: s.db.NewSnapshot(), gen: gen}
	next.refs.Store(1)
	s.mu.Lock()
	old := s.cur
	s.cur = next
	s.mu.Unlock()
	if old != nil {
		old.unref()
	}
}

func (s *pebbleStore) snapshot() (reader, uint64, error) {
	s.mu.RLock()
	c := s.cur
	if c != nil {
		c.refs.Add(1)
	}
	s.mu.RUnlock()
	if c == nil {
		return nil, 0, ErrClosed
	}
	return &pebbleReader{r: c.s, done: c.unref, cache: s.cache, gen: c.gen}, c.gen, nil
}

// newBatch returns an indexed batch: its reads merge the batch's writes
// over the live database, which is the committed state because the
// committer is its only writer.
func (s *pebbleStore) newBatch() (batch, error) {
	s.mu.RLock()
	gen := s.cur.gen
	s.mu.RUnlock()
	b := s.db.NewIndexedBatch()
	return &pebbleBatch{pebbleReader: pebbleReader{r: b, done: func() { _ = b.Close() }}, s: s, gen: gen + 1}, nil
}

func (s *pebbleStore) close() error {
	s.mu.Lock()
	c := s.cur
	s.cur = nil
	s.mu.Unlock()
	if c != nil {
		c.unref()
	}
	return s.db.Close()
}

type pebbleReader struct {
	r     pebble.Reader
	done  func()    // releases r
	value io.Closer // pins the value last returned by get
	// cache, for snapshot readers only: gen is the snapshot's generation.
	cache *readCache
	gen   uint64
}

func (p *pebbleReader) get(key []byte) ([]byte, bool, error) {
	p.unpin()
	if p.cache != nil {
		if v, found, ok := p.cache.get(key, p.gen); ok {
			return v, found, nil
		}
	}
	v, closer, err := p.r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		if p.cache != nil {
			p.cache.fill(key, nil, false, p.gen)
		}
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if p.cache != nil {
		p.cache.fill(key, v, true, p.gen)
	}
	p.value = closer
	return v, true, nil
}

func (p *pebbleReader) unpin() {
	if p.value != nil {
		_ = p.value.Close() // releases memory; cannot fail
		p.value = nil
	}
}

func (p *pebbleReader) iter(start, end []byte) (iterator, error) {
	if len(start) == 0 {
		start = nil // same bound; pebble's invariant checks index a non-nil one
	}
	it, err := p.r.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return nil, err
	}
	return pebbleIter{it}, nil
}

func (p *pebbleReader) release() {
	p.unpin()
	p.done()
}

type pebbleIter struct{ it *pebble.Iterator }

func (i pebbleIter) first() bool            { return i.it.First() }
func (i pebbleIter) next() bool             { return i.it.Next() }
func (i pebbleIter) key() []byte            { return i.it.Key() }
func (i pebbleIter) value() ([]byte, error) { return i.it.ValueAndErr() }
func (i pebbleIter) close() error           { return i.it.Close() }

type pebbleBatch struct {
	pebbleReader
	s      *pebbleStore
	gen    uint64       // the generation the batch makes
	writes []cacheWrite // what the batch writes, for the read cache
}

type cacheWrite struct {
	key, value []byte
	found      bool
}

func (b *pebbleBatch) set(key, value []byte) error {
	if b.s.cache != nil {
		b.writes = append(b.writes, cacheWrite{key, value, true})
	}
	return b.r.(*pebble.Batch).Set(key, value, nil)
}

func (b *pebbleBatch) delete(key []byte) error {
	if b.s.cache != nil {
		b.writes = append(b.writes, cacheWrite{key, nil, false})
	}
	return b.r.(*pebble.Batch).Delete(key, nil)
}

func (b *pebbleBatch) commit() error {
	b.unpin()
	pb := b.r.(*pebble.Batch)
	err := pb.Commit(pebble.Sync)
	if err == nil && b.s.cache != nil {
		// The cache learns the writes once they are durable and before
		// the snapshot that shows them is published (readcache.go). Later
		// writes of a key in the batch come later in writes, so they win.
		for _, w := range b.writes {
			b.s.cache.put(w.key, w.value, w.found, b.gen)
		}
	}
	if cerr := pb.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		b.s.publish(b.gen)
	}
	return err
}
