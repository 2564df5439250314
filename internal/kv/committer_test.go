package kv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
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

// panicStore panics when a batch is started, as pebble does on a broken
// invariant (pebbleLogger.Fatalf).
type panicStore struct{ store }

func (panicStore) newBatch() (batch, error) { panic("broken invariant") }

// TestCommitPanicEndsProcess: a panic while a caller commits its own
// group ends the process, even if the caller recovers panics (as the wire
// server does for its handlers), as it did on the committer goroutine;
// the store is not left without a committer. The test runs itself as a
// child process.
func TestCommitPanicEndsProcess(t *testing.T) {
	if os.Getenv("SLUICE_KV_PANIC_CHILD") == "1" {
		d := newDB(panicStore{newMemStore()}, SyncAlways, 0)
		func() {
			defer func() { recover() }()
			d.Update(context.Background(), func(tx Txn) error { tx.Set([]byte("k"), nil); return nil })
		}()
		fmt.Println("the panic was swallowed")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommitPanicEndsProcess$")
	cmd.Env = append(os.Environ(), "SLUICE_KV_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), "kv: commit: broken invariant") {
		t.Fatalf("child: %v, output:\n%s\nwant a non-zero exit with the commit's panic", err, out)
	}
}

// TestCommitStats: the counters that metrics export (CommitStats) count
// what happened: a transaction whose read key another commit changed
// before its own commit is rejected once (a conflict, found by an exact
// validation) and committed on its retry; with a sync window the engine
// syncs in the background.
func TestCommitStats(t *testing.T) {
	kvdb, err := OpenPebble(t.TempDir(), &PebbleOptions{Sync: SyncGroup})
	if err != nil {
		t.Fatal(err)
	}
	defer kvdb.Close()
	cs, ok := kvdb.(interface{ CommitStats() CommitStats })
	if !ok {
		t.Fatal("the pebble engine has no CommitStats")
	}
	ctx := context.Background()
	before := cs.CommitStats()
	attempts := 0
	err = kvdb.Update(ctx, func(tx Txn) error {
		attempts++
		if _, err := tx.Get([]byte("k")); err != nil && err != ErrNotFound {
			return err
		}
		if attempts == 1 {
			// Another writer changes k between this read and this commit.
			done := make(chan error, 1)
			go func() {
				done <- kvdb.Update(ctx, func(tx Txn) error { tx.Set([]byte("k"), []byte("other")); return nil })
			}()
			if err := <-done; err != nil {
				return err
			}
		}
		tx.Set([]byte("k"), []byte("mine"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := kvdb.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	after := cs.CommitStats()
	d := CommitStats{Groups: after.Groups - before.Groups, Commits: after.Commits - before.Commits, Leads: after.Leads - before.Leads,
		Conflicts: after.Conflicts - before.Conflicts, Exact: after.Exact - before.Exact, Syncs: after.Syncs - before.Syncs}
	t.Logf("%d attempts: %+v", attempts, d)
	if attempts != 2 || d.Commits != 2 || d.Conflicts != 1 || d.Exact < 1 || d.Groups < 2 || d.Leads > d.Groups+d.Conflicts || d.Syncs < 1 {
		t.Fatalf("%d attempts, counters moved by %+v: want 2 commits, 1 conflict, an exact validation, 2 groups or more, a sync", attempts, d)
	}
}
