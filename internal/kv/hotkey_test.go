package kv_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-fs/sluice/internal/kv"
)

// TestHotKey checks that many writers of one key all get through: the
// priority given to an Update that keeps losing keeps it from running out
// of attempts.
func TestHotKey(t *testing.T) {
	engines := map[string]func(t *testing.T) kv.DB{
		"memory": func(*testing.T) kv.DB { return kv.NewMemory() },
		"pebble": func(t *testing.T) kv.DB { return openPebble(t, t.TempDir()) },
	}
	for name, open := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			defer db.Close()
			const workers, incs = 64, 10
			var wg sync.WaitGroup
			var calls, most atomic.Int64
			for range workers {
				wg.Go(func() {
					for range incs {
						n := int64(0)
						err := db.Update(t.Context(), func(tx kv.Txn) error {
							n++
							v, err := tx.Get([]byte("hot"))
							if err != nil && err != kv.ErrNotFound {
								return err
							}
							c, _ := strconv.Atoi(string(v))
							tx.Set([]byte("hot"), []byte(strconv.Itoa(c+1)))
							return nil
						})
						if err != nil {
							t.Errorf("increment: %v", err)
							return
						}
						calls.Add(n)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
					}
				})
			}
			wg.Wait()
			err := db.View(t.Context(), func(tx kv.Txn) error {
				v, err := tx.Get([]byte("hot"))
				if err == nil && string(v) != strconv.Itoa(workers*incs) {
					t.Errorf("hot = %s, want %d", v, workers*incs)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d increments: %d attempts, at most %d for one", workers*incs, calls.Load(), most.Load())
		})
	}
}
