package kv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

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

	// Sync says when commits become durable against a crash of the
	// machine (see Durability in the package comment); the zero value is
	// SyncGroup.
	Sync SyncMode

	// SyncWindow bounds, under SyncGroup, how long an acknowledged commit
	// may wait for its sync; 0 means DefaultSyncWindow (5 ms). At most
	// MaxSyncWindow.
	SyncWindow time.Duration

	// FS holds the database and its commit log; nil means the operating
	// system's (vfs.Default). Tests pass vfs.NewCrashableMem() to simulate
	// power loss.
	FS vfs.FS

	// LogSegmentSize is the size at which the commit log starts a new
	// segment and pebble flushes its memtables, so that older segments can
	// be removed; 0 means 64 MiB.
	LogSegmentSize int64
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
	if o.Sync != SyncGroup && o.Sync != SyncAlways {
		return fmt.Errorf("kv: pebble options: unknown sync mode %v: %w", o.Sync, errs.ErrInvalid)
	}
	if o.SyncWindow < 0 || o.SyncWindow > MaxSyncWindow {
		return fmt.Errorf("kv: pebble options: SyncWindow %v is not between 0 and %v: %w", o.SyncWindow, MaxSyncWindow, errs.ErrInvalid)
	}
	if o.LogSegmentSize < 0 {
		return fmt.Errorf("kv: pebble options: negative LogSegmentSize %d: %w", o.LogSegmentSize, errs.ErrInvalid)
	}
	return nil
}

// OpenPebble opens (creating if needed) the pebble database in dir, and
// replays its commit log (dir/commitlog) over it. Every Update that
// returns nil survives a crash of the process; it survives a crash of the
// machine at once under SyncAlways, within opts.SyncWindow under SyncGroup
// (see Durability in the package comment).
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
	if o.SyncWindow == 0 {
		o.SyncWindow = DefaultSyncWindow
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	hook := &tableHookFS{FS: o.FS}
	pdb, err := pebble.Open(dir, &pebble.Options{
		CacheSize:          o.CacheSize,
		MemTableSize:       o.MemTableSize,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{logger},
		FS:                 hook,
		// The commit log replaces pebble's WAL (see Durability).
		DisableWAL: true,
	})
	if err != nil {
		return nil, fmt.Errorf("kv: open pebble %s: %w", dir, err)
	}
	log, err := recoverCommitLog(pdb, o.FS, o.FS.PathJoin(dir, commitLogDir), o.LogSegmentSize)
	if err != nil {
		pdb.Close()
		return nil, fmt.Errorf("kv: open pebble %s: %w", dir, err)
	}
	hook.log.Store(log)
	if o.ReadCacheEntries == 0 {
		o.ReadCacheEntries = defaultReadCacheEntries
	}
	st := newPebbleStore(pdb, log, logger)
	st.cache = newReadCache(o.ReadCacheEntries)
	return newDB(st, o.Sync, o.SyncWindow), nil
}

// recoverCommitLog replays the commit log in dir over pdb, makes the
// result durable in pebble's tables, removes the replayed segments and
// starts a new one.
func recoverCommitLog(pdb *pebble.DB, fs vfs.FS, dir string, segmentSize int64) (*commitLog, error) {
	log, err := openCommitLog(fs, dir, segmentSize)
	if err != nil {
		return nil, err
	}
	nums, err := log.segments()
	if err != nil {
		return nil, err
	}
	last, err := log.replay(func(payload []byte) error {
		b := pdb.NewBatch()
		defer b.Close()
		if err := b.SetRepr(payload); err != nil {
			return errs.New(errs.Corruption, "kv: commit log record is not a batch: %v", err)
		}
		return pdb.Apply(b, pebble.NoSync)
	})
	if err != nil {
		return nil, err
	}
	if len(nums) > 0 {
		// The segments were synced before they were read, so the tables
		// hold nothing they could lose; once the tables are durable, the
		// segments are not needed. A crash before they are all gone
		// replays them again, which changes nothing.
		if err := pdb.Flush(); err != nil {
			return nil, fmt.Errorf("flush replayed commit log: %w", err)
		}
		if err := log.removeBefore(last + 1); err != nil {
			return nil, err
		}
	}
	if err := log.start(last + 1); err != nil {
		return nil, err
	}
	return log, nil
}

// tableHookFS syncs the commit log before pebble creates a table (a flush
// or a compaction output), so that a table never holds a commit whose log
// record a crash of the machine could lose: the state in the tables is
// always a prefix of the durable log, and replaying the log over it is
// idempotent. log is nil until the log is recovered.
type tableHookFS struct {
	vfs.FS
	log atomic.Pointer[commitLog]
}

func (f *tableHookFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob") {
		if l := f.log.Load(); l != nil {
			if err := l.sync(); err != nil {
				return nil, fmt.Errorf("kv: sync commit log before creating %s: %w", name, err)
			}
		}
	}
	return f.FS.Create(name, category)
}

func (f *tableHookFS) Unwrap() vfs.FS { return f.FS }

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
// after each commit returns, and shares among transactions: a snapshot
// taken after the committer's own commit returned, with no other writer,
// holds exactly the commits whose records are in the commit log (and, for
// a synced commit, only once it is durable).
type pebbleStore struct {
	db  *pebble.DB
	log *commitLog
	lg  *slog.Logger
	// bg runs the removals of old log segments, each after its flush.
	bg sync.WaitGroup
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

func newPebbleStore(db *pebble.DB, log *commitLog, lg *slog.Logger) *pebbleStore {
	s := &pebbleStore{db: db, log: log, lg: lg}
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

func (s *pebbleStore) sync() error { return s.log.sync() }

// rotate starts a new log segment and flushes pebble's memtables, then
// (in the background) removes the segments whose commits the flush made
// durable in tables. Failures cost disk space only, except a failed log,
// which fails the next commit anyway.
func (s *pebbleStore) rotate() {
	next, err := s.log.rotate()
	if err != nil {
		return
	}
	done, err := s.db.AsyncFlush()
	if err != nil {
		s.lg.Warn("kv: flush after commit log rotation failed; old segments stay", "err", err)
		return
	}
	s.bg.Go(func() {
		<-done
		if err := s.log.removeBefore(next); err != nil {
			s.lg.Warn("kv: removing old commit log segments failed", "err", err)
		}
	})
}

// close syncs and closes the commit log and closes pebble. It does not
// flush pebble's memtables: the next open replays the log (what the last
// rotation's flush did not cover, at most about one segment) and flushes
// then. (A flush here would also trip pebble's invariant checks, enabled
// in race builds, on a table whose first key is the empty key.)
func (s *pebbleStore) close() error {
	s.mu.Lock()
	c := s.cur
	s.cur = nil
	s.mu.Unlock()
	if c != nil {
		c.unref()
	}
	s.bg.Wait()
	err := s.log.close()
	return errors.Join(err, s.db.Close())
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

// commit appends the batch to the commit log (and syncs the log if asked),
// applies it to pebble's memtable, then publishes the snapshot that shows
// it. In that order: pebble may flush the memtable to a table at any
// moment, and a table must never hold a commit the log does not.
func (b *pebbleBatch) commit(sync bool) error {
	b.unpin()
	pb := b.r.(*pebble.Batch)
	defer pb.Close() // frees memory; cannot fail after a commit
	if err := b.s.log.append(pb.Repr()); err != nil {
		return err
	}
	if sync {
		if err := b.s.log.sync(); err != nil {
			return err
		}
	}
	if err := pb.Commit(pebble.NoSync); err != nil {
		// The record is in the log and a reopen would apply it: the
		// outcome is unknown, so nothing may be committed after it.
		return b.s.log.fail(fmt.Errorf("apply to pebble: %w", err))
	}
	if b.s.cache != nil {
		// The cache learns the writes before the snapshot that shows them
		// is published (readcache.go). Later writes of a key in the batch
		// come later in writes, so they win.
		for _, w := range b.writes {
			b.s.cache.put(w.key, w.value, w.found, b.gen)
		}
	}
	b.s.publish(b.gen)
	if b.s.log.due() {
		b.s.rotate()
	}
	return nil
}
