package kv

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

// BenchmarkUpdate measures small metadata-like transactions: each reads two
// keys (a directory inode, and the absent entry it creates) and writes three
// (the entry, the new inode, and a blind write of the directory's mtime),
// from a given number of goroutines. Group commit is what makes the durable
// engine scale with goroutines, so the benchmark reports commits per second
// and transactions per group; under SyncGroup (engine "pebble"), also the
// background syncs per second.
func BenchmarkUpdate(b *testing.B) {
	engines := []struct {
		name string
		open func(b *testing.B) DB
	}{
		{"memory", func(*testing.B) DB { return NewMemory() }},
		{"pebble", func(b *testing.B) DB { // SyncGroup, the default
			db, err := OpenPebble(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			return db
		}},
		{"pebble-always", func(b *testing.B) DB {
			db, err := OpenPebble(b.TempDir(), &PebbleOptions{Sync: SyncAlways})
			if err != nil {
				b.Fatal(err)
			}
			return db
		}},
	}
	for _, e := range engines {
		for _, goroutines := range []int{1, 4, 16, 64} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", e.name, goroutines), func(b *testing.B) {
				benchmarkUpdate(b, e.open(b), goroutines)
			})
		}
	}
}

func benchmarkUpdate(b *testing.B, kvdb DB, goroutines int) {
	defer kvdb.Close()
	const dirs = 64
	ctx := context.Background()
	err := kvdb.Update(ctx, func(tx Txn) error {
		for d := range dirs {
			tx.Set(fmt.Appendf(nil, "i/%04d", d), make([]byte, 64))
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Uint64
	value := make([]byte, 100)
	b.SetBytes(int64(len("e/0000/0000000000") + 16 + len("i/0000000000") + len(value) + len("m/0000") + 8))
	b.ReportAllocs()
	b.SetParallelism((goroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	c := kvdb.(*db).c
	groups0, commits0, conflicts0, exact0 := c.groups.Load(), c.committed.Load(), c.conflicts.Load(), c.exact.Load()
	syncs0 := kvdb.(*db).SyncStats()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var dir, entry, inode, mtime []byte
		for pb.Next() {
			n := next.Add(1)
			d := n % dirs
			dir = fmt.Appendf(dir[:0], "i/%04d", d)
			entry = fmt.Appendf(entry[:0], "e/%04d/%010d", d, n)
			inode = fmt.Appendf(inode[:0], "i/%010d", n)
			mtime = fmt.Appendf(mtime[:0], "m/%04d", d)
			err := kvdb.Update(ctx, func(tx Txn) error {
				if _, err := tx.Get(dir); err != nil {
					return err
				}
				if _, err := tx.Get(entry); err != ErrNotFound {
					return fmt.Errorf("entry exists: %v", err)
				}
				tx.Set(entry, inode)
				tx.Set(inode, value)
				tx.Set(mtime, entry[len(entry)-8:])
				return nil
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	groups, commits := c.groups.Load()-groups0, c.committed.Load()-commits0
	b.ReportMetric(float64(commits)/b.Elapsed().Seconds(), "txn/s")
	if groups > 0 {
		b.ReportMetric(float64(commits)/float64(groups), "txn/group")
	}
	if sy := kvdb.(*db).SyncStats() - syncs0; sy > 0 {
		b.ReportMetric(float64(sy)/b.Elapsed().Seconds(), "syncs/s")
	}
	b.ReportMetric(float64(c.conflicts.Load()-conflicts0)/float64(b.N), "conflicts/op")
	b.ReportMetric(float64(c.exact.Load()-exact0)/float64(b.N), "exact/op")
}
