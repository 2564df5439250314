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
