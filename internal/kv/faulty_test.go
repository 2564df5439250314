package kv_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/kv/kvtest"
)

// faults is an inject function that fails chosen operations.
type faults struct {
	mu   sync.Mutex
	fail map[string]error
	seen map[string]int
}

func (f *faults) inject(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]int{}
	}
	f.seen[op]++
	return f.fail[op]
}

func (f *faults) set(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail == nil {
		f.fail = map[string]error{}
	}
	f.fail[op] = err
}

// With no fault injected the wrapper is a conforming DB.
func TestFaultyConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.DB {
		return kv.NewFaulty(kv.NewMemory(), func(string) error { return nil })
	})
}

func TestFaulty(t *testing.T) {
	t.Parallel()
	var f faults
	db := kv.NewFaulty(kv.NewMemory(), f.inject)
	defer db.Close()
	ctx := t.Context()
	setA := func(tx kv.Txn) error { tx.Set([]byte("a"), []byte("1")); return nil }
	readA := func(tx kv.Txn) error { _, err := tx.Get([]byte("a")); return err }
	scanAll := func(tx kv.Txn) error {
		return tx.Scan(nil, nil, 0, func(_, _ []byte) bool { return true })
	}
	exists := func() bool {
		err := db.View(ctx, readA)
		if err != nil && !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("View: %v", err)
		}
		return err == nil
	}
	injected := errs.New(errs.Unavailable, "injected: disk gone")

	f.set(kv.FaultCommit, injected)
	if err := db.Update(ctx, setA); !errors.Is(err, injected) {
		t.Fatalf("Update with a failing commit = %v, want the injected error", err)
	}
	if exists() {
		t.Fatal("a failed commit wrote")
	}
	f.set(kv.FaultCommit, nil)

	f.set(kv.FaultAck, injected)
	if err := db.Update(ctx, setA); !errors.Is(err, injected) {
		t.Fatalf("Update with a lost acknowledgement = %v, want the injected error", err)
	}
	if !exists() {
		t.Fatal("a commit whose acknowledgement was lost did not write")
	}
	f.set(kv.FaultAck, nil)

	for _, c := range []struct {
		op string
		fn func(tx kv.Txn) error
	}{{kv.FaultGet, readA}, {kv.FaultScan, scanAll}} {
		f.set(c.op, injected)
		if err := db.View(ctx, c.fn); !errors.Is(err, injected) {
			t.Errorf("View with failing %s = %v, want the injected error", c.op, err)
		}
		if err := db.Update(ctx, c.fn); !errors.Is(err, injected) {
			t.Errorf("Update with failing %s = %v, want the injected error", c.op, err)
		}
		f.set(c.op, nil)
		if err := db.View(ctx, c.fn); err != nil {
			t.Errorf("View after clearing the %s fault: %v", c.op, err)
		}
	}

	for _, op := range []string{kv.FaultView, kv.FaultUpdate} {
		f.set(op, injected)
		called := false
		fn := func(kv.Txn) error { called = true; return nil }
		run := db.View
		if op == kv.FaultUpdate {
			run = db.Update
		}
		err := run(ctx, fn)
		if !errors.Is(err, injected) || called {
			t.Errorf("%s fault: err = %v, fn called = %v; want the injected error and no call", op, err, called)
		}
		f.set(op, nil)
	}

	for _, op := range []string{kv.FaultView, kv.FaultUpdate, kv.FaultGet, kv.FaultScan, kv.FaultCommit, kv.FaultAck} {
		if f.seen[op] == 0 {
			t.Errorf("fault point %s was never consulted", op)
		}
	}
}
