// Package kv defines the ordered, transactional key-value engine that the
// metadata service stores its namespace in, and ships its engines:
//
//   - Memory: an in-memory engine for unit tests (not durable);
//   - Pebble: the default embedded engine, on github.com/cockroachdb/pebble/v2.
//
// Later engines (etcd, TiKV, FoundationDB) implement the same DB interface
// and must pass the same conformance suite (kvtest.Run).
//
// # Transactions
//
// Update runs a function against a transaction and commits its writes
// atomically. Transactions are serializable: every value a transaction read
// (Get, and the keys a Scan visited or would have visited) must be unchanged
// at commit time, or the commit fails with a conflict and Update runs the
// function again from the start, up to a retry limit (then it returns an
// error wrapping errs.ErrConflict). The function must therefore have no side
// effects outside the transaction, or only idempotent ones.
//
// Blind writes (Set or Delete of a key the transaction never read) never
// cause a conflict: the last committed writer wins. The metadata service
// relies on this for directory timestamps so that concurrent creates in one
// directory do not conflict.
//
// An Update that returns nil is durable: its writes survive a crash of the
// process or the machine. Engines group the commits of concurrent
// transactions into one synced write (group commit), so concurrency raises
// throughput.
//
// Reads inside a transaction see its own earlier writes (Get and Scan).
//
// Keys and values passed in are copied by the engine; slices returned to the
// caller are the caller's to keep and must not be modified by the engine
// afterwards. All methods of DB are safe for concurrent use; a Txn is used by
// one goroutine only and only until its function returns.
package kv

import (
	"context"
	"errors"

	"github.com/sluice-fs/sluice/internal/errs"
)

// ErrNotFound is returned by Txn.Get for a missing key.
var ErrNotFound = errors.New("kv: key not found")

// ErrClosed is returned by operations on a closed DB.
var ErrClosed = &errs.Error{Code: errs.Unavailable, Msg: "kv: database closed"}

// DB is an ordered, transactional key-value store.
type DB interface {
	// View runs fn in a read-only transaction over a consistent snapshot.
	// Set and Delete inside View return an error from View.
	View(ctx context.Context, fn func(tx Txn) error) error

	// Update runs fn in a read-write transaction and commits its writes
	// atomically and durably if fn returns nil. fn's error is returned
	// unchanged and nothing is written. See the package comment for the
	// conflict and retry rules.
	Update(ctx context.Context, fn func(tx Txn) error) error

	// Close releases the engine. It waits for commits in progress.
	Close() error
}

// Txn is one transaction. It is not safe for concurrent use.
type Txn interface {
	// Get returns the value of key, or ErrNotFound.
	Get(key []byte) ([]byte, error)

	// Scan calls fn for each key in [start, end) in ascending order, until
	// fn returns false or limit keys were visited (limit <= 0: no limit).
	// end == nil means no upper bound. In an Update, the range actually
	// visited counts as read for conflict detection (phantoms included).
	Scan(start, end []byte, limit int, fn func(key, value []byte) bool) error

	// Set writes key = value when the transaction commits.
	Set(key, value []byte)

	// Delete removes key when the transaction commits (no error if absent).
	Delete(key []byte)
}

// PrefixEnd returns the smallest key greater than every key with the given
// prefix, for use as Scan's end; nil if there is none.
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
