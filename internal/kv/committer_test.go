package kv

import (
	"context"
	"strconv"
	"sync"
	"testing"
)

// TestCommitLeader: a transaction that finds the committer idle commits
// on its own goroutine (one group per Update, every group led by its
// caller), and with many writers at once the groups that arrive while
// one is being processed are committed by the committer goroutine, with
// every commit applied exactly once.
func TestCommitLeader(t *testing.T) {
	engines := map[string]func(t *testing.T) DB{
		"memory": func(*testing.T) DB { return NewMemory() },
		"pebble": func(t *testing.T) DB {
			db, err := OpenPebble(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
	}
	for name, open := range engines {
		t.Run(name, func(t *testing.T) {
			kvdb := open(t)
			defer kvdb.Close()
			c := kvdb.(*db).c
			ctx := context.Background()
			incr := func() error {
				return kvdb.Update(ctx, func(tx Txn) error {
					v, err := tx.Get([]byte("n"))
					if err != nil && err != ErrNotFound {
						return err
					}
					n, _ := strconv.Atoi(string(v))
					tx.Set([]byte("n"), []byte(strconv.Itoa(n+1)))
					return nil
				})
			}
			groups0, leads0 := c.groups.Load(), c.leads.Load()
			const alone = 100
			for range alone {
				if err := incr(); err != nil {
					t.Fatal(err)
				}
			}
			if g, l := c.groups.Load()-groups0, c.leads.Load()-leads0; g != alone || l != alone {
				t.Fatalf("%d lone updates: %d groups, %d led by their caller; want %d and %d", alone, g, l, alone, alone)
			}

			const workers, each = 16, 50
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range each {
						if err := incr(); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			err := kvdb.View(ctx, func(tx Txn) error {
				v, err := tx.Get([]byte("n"))
				if err == nil && string(v) != strconv.Itoa(alone+workers*each) {
					t.Errorf("n = %s after %d increments", v, alone+workers*each)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d concurrent increments: %d groups, %d led by a caller", workers*each, c.groups.Load()-groups0-alone, c.leads.Load()-leads0-alone)
		})
	}
}
