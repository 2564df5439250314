package kv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

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
}

const (
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
	return newDB(&pebbleStore{db: pdb}), nil
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

type pebbleStore struct{ db *pebble.DB }

// snapshot reads through a pebble snapshot. Batches are committed with
// pebble.Sync, and pebble publishes a synced batch only after its WAL sync,
// so a snapshot holds only durable data.
func (s *pebbleStore) snapshot() (reader, error) {
	return &pebbleReader{r: s.db.NewSnapshot()}, nil
}

// newBatch returns an indexed batch: its reads merge the batch's writes
// over the database.
func (s *pebbleStore) newBatch() (batch, error) {
	return &pebbleBatch{pebbleReader{r: s.db.NewIndexedBatch()}}, nil
}

func (s *pebbleStore) close() error { return s.db.Close() }

type pebbleReader struct {
	r     pebble.Reader
	value io.Closer // pins the value last returned by get
}

func (p *pebbleReader) get(key []byte) ([]byte, bool, error) {
	p.unpin()
	v, closer, err := p.r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
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
	it, err := p.r.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return nil, err
	}
	return pebbleIter{it}, nil
}

func (p *pebbleReader) release() {
	p.unpin()
	_ = p.r.Close() // a snapshot or uncommitted batch: nothing to report
}

type pebbleIter struct{ it *pebble.Iterator }

func (i pebbleIter) first() bool            { return i.it.First() }
func (i pebbleIter) next() bool             { return i.it.Next() }
func (i pebbleIter) key() []byte            { return i.it.Key() }
func (i pebbleIter) value() ([]byte, error) { return i.it.ValueAndErr() }
func (i pebbleIter) close() error           { return i.it.Close() }

type pebbleBatch struct{ pebbleReader }

func (b *pebbleBatch) set(key, value []byte) error { return b.r.(*pebble.Batch).Set(key, value, nil) }
func (b *pebbleBatch) delete(key []byte) error     { return b.r.(*pebble.Batch).Delete(key, nil) }

func (b *pebbleBatch) commit() error {
	b.unpin()
	pb := b.r.(*pebble.Batch)
	err := pb.Commit(pebble.Sync)
	if cerr := pb.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}
