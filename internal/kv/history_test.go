package kv

import (
	"fmt"
	"testing"
)

// TestValidationIsExact checks the committer's two validation paths: the
// history filter sends a transaction whose keys were rewritten to exact
// validation, which accepts it when the values it read are unchanged; and a
// transaction older than the history's horizon is still validated exactly
// rather than rejected.
func TestValidationIsExact(t *testing.T) {
	t.Parallel()
	mem := NewMemory().(*db)
	defer mem.Close()
	ctx := t.Context()
	set := func(kvs ...string) {
		t.Helper()
		err := mem.Update(ctx, func(tx Txn) error {
			for i := 0; i < len(kvs); i += 2 {
				tx.Set([]byte(kvs[i]), []byte(kvs[i+1]))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	set("k", "v", "other", "1")

	tests := []struct {
		name      string
		during    func() // runs between the transaction's read and its commit
		wantCalls int
	}{
		{"rewritten with the same value", func() { set("k", "v") }, 1},
		{"changed and changed back", func() { set("k", "w"); set("k", "v") }, 1},
		{"changed", func() { set("k", "w") }, 2},
		{"history overflowed, key untouched", func() {
			for i := range maxHistoryKeys/1000 + 2 {
				err := mem.Update(ctx, func(tx Txn) error {
					for j := range 1000 {
						tx.Set(fmt.Appendf(nil, "filler/%d/%d", i, j), nil)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}, 1},
	}
	for _, tc := range tests {
		set("k", "v")
		exact := mem.c.exact.Load()
		calls := 0
		err := mem.Update(ctx, func(tx Txn) error {
			calls++
			if _, err := tx.Get([]byte("k")); err != nil {
				return err
			}
			if err := tx.Scan([]byte("k"), []byte("l"), 0, func(_, _ []byte) bool { return true }); err != nil {
				return err
			}
			if calls == 1 {
				tc.during()
			}
			tx.Set([]byte("out"), []byte(tc.name))
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if calls != tc.wantCalls {
			t.Errorf("%s: fn ran %d times, want %d", tc.name, calls, tc.wantCalls)
		}
		if mem.c.exact.Load() == exact {
			t.Errorf("%s: no exact validation happened", tc.name)
		}
	}
	if mem.c.hist.horizon == 0 || mem.c.hist.size > maxHistoryKeys+1000 {
		t.Errorf("history not pruned: horizon %d, %d keys", mem.c.hist.horizon, mem.c.hist.size)
	}
}

// TestReadCacheBigValues: the read cache keeps no value over
// maxCachedValue, yet remembers that the key was written, so that a reader
// of an older snapshot cannot put the value before it in its place.
func TestReadCacheBigValues(t *testing.T) {
	c := newReadCache(64)
	big := make([]byte, maxCachedValue+1)
	c.put([]byte("k"), big, true, 5)
	if _, _, ok := c.get([]byte("k"), 5); ok {
		t.Fatal("a big value was served from the cache")
	}
	c.fill([]byte("k"), []byte("older"), true, 4)
	if _, _, ok := c.get([]byte("k"), 5); ok {
		t.Fatal("a reader of an older snapshot replaced the big value's entry")
	}
	c.fill([]byte("f"), big, true, 6)
	if _, _, ok := c.get([]byte("f"), 6); ok {
		t.Fatal("a big value read was kept")
	}
	c.put([]byte("k"), []byte("small"), true, 7)
	if v, found, ok := c.get([]byte("k"), 7); !ok || !found || string(v) != "small" {
		t.Fatalf("small value after a big one: %q %v %v", v, found, ok)
	}
}
