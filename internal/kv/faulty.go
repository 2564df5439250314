package kv

import (
	"context"
	"fmt"
)

// Fault points of NewFaulty: the op passed to its inject function.
const (
	FaultView   = "view"   // View fails before running its function
	FaultUpdate = "update" // Update fails before running its function
	FaultGet    = "get"    // Txn.Get fails
	FaultScan   = "scan"   // Txn.Scan fails before visiting any key
	FaultCommit = "commit" // the commit fails; nothing is written
	FaultAck    = "ack"    // the commit succeeds but Update reports an error (an ambiguous outcome)
	FaultSync   = "sync"   // Sync fails without syncing
)

// NewFaulty returns a DB that passes every operation to db, except that it
// first calls inject with the operation's fault point (FaultView, ...) and,
// if inject returns an error, fails that operation with an error wrapping
// it. It lets callers test their error paths.
//
// inject is called from the goroutines that use the DB, concurrently; a
// FaultCommit error makes Update return without writing (the function is not
// run again), a FaultAck error makes it return after the writes committed.
// Closing the faulty DB closes db.
func NewFaulty(db DB, inject func(op string) error) DB {
	return &faulty{db: db, inject: inject}
}

type faulty struct {
	db     DB
	inject func(op string) error
}

func (f *faulty) View(ctx context.Context, fn func(tx Txn) error) error {
	if err := f.inject(FaultView); err != nil {
		return fmt.Errorf("kv: view: %w", err)
	}
	return f.db.View(ctx, func(tx Txn) error {
		return fn(faultyTxn{tx, f.inject})
	})
}

func (f *faulty) Update(ctx context.Context, fn func(tx Txn) error) error {
	if err := f.inject(FaultUpdate); err != nil {
		return fmt.Errorf("kv: update: %w", err)
	}
	err := f.db.Update(ctx, func(tx Txn) error {
		if err := fn(faultyTxn{tx, f.inject}); err != nil {
			return err
		}
		// Failing the function discards the transaction: a commit that
		// failed before anything reached the disk.
		if err := f.inject(FaultCommit); err != nil {
			return fmt.Errorf("kv: update: commit: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := f.inject(FaultAck); err != nil {
		return fmt.Errorf("kv: update: commit outcome: %w", err)
	}
	return nil
}

func (f *faulty) Sync(ctx context.Context) error {
	if err := f.inject(FaultSync); err != nil {
		return fmt.Errorf("kv: sync: %w", err)
	}
	return f.db.Sync(ctx)
}

func (f *faulty) Close() error { return f.db.Close() }

type faultyTxn struct {
	Txn
	inject func(op string) error
}

func (t faultyTxn) Get(key []byte) ([]byte, error) {
	if err := t.inject(FaultGet); err != nil {
		return nil, fmt.Errorf("kv: get %q: %w", abbrev(key), err)
	}
	return t.Txn.Get(key)
}

func (t faultyTxn) Scan(start, end []byte, limit int, fn func(key, value []byte) bool) error {
	if err := t.inject(FaultScan); err != nil {
		return fmt.Errorf("kv: scan [%q, %q): %w", abbrev(start), abbrev(end), err)
	}
	return t.Txn.Scan(start, end, limit, fn)
}
