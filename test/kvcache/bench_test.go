package kvcache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/bench"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestKVBench measures the KV-cache store beside files on a local
// directory in the same run: put and get GB/s with p50/p99 latency for
// 64 KiB, 1 MiB and 16 MiB values at 1 and 16 clients, and the delete
// rate; as root also gets with the page cache dropped first, beside cold
// reads of the directory's files. It runs only with SLUICE_KV_BENCH=1
// (a few minutes); figures go to the test log as ratios to the local
// directory.
func TestKVBench(t *testing.T) {
	if os.Getenv("SLUICE_KV_BENCH") == "" {
		t.Skip("set SLUICE_KV_BENCH=1 to run the KV benchmark")
	}
	_, addr := serve(t, t.TempDir())
	ctx := context.Background()
	admin := proctest.Client(t, addr)
	if err := admin.KVCreate(ctx, "bench", client.KVConfig{Capacity: 16 << 30}); err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	cold := os.Geteuid() == 0
	if !cold {
		t.Log("not root: no cold reads (they drop the page cache)")
	}
	for _, size := range []int{64 << 10, 1 << 20, 16 << 20} {
		for _, clients := range []int{1, 16} {
			ops := max(256<<20/size/clients, 4) // per client
			val := value(size, size)
			stores := make([]*client.KVStore, clients)
			for i := range stores {
				s, err := proctest.Client(t, addr).KVOpen(ctx, "bench")
				if err != nil {
					t.Fatal(err)
				}
				stores[i] = s
			}
			key := func(c, i int) string { return fmt.Sprintf("%d-%d/%d/%d", size, clients, c, i) }
			kvPut := run(clients, ops, func(c, i int) error { _, err := stores[c].Put(ctx, []string{key(c, i)}, [][]byte{val}); return err })
			bufs := make([][]byte, clients)
			for c := range bufs {
				bufs[c] = make([]byte, size)
			}
			kvGet := run(clients, ops, func(c, i int) error {
				_, err := stores[c].Get(ctx, []string{key(c, i)}, [][]byte{bufs[c]})
				return err
			})
			dir := filepath.Join(local, fmt.Sprintf("%d-%d", size, clients))
			os.MkdirAll(dir, 0o755)
			lp := func(c, i int) string { return filepath.Join(dir, fmt.Sprintf("%d.%d", c, i)) }
			fsPut := run(clients, ops, func(c, i int) error { return os.WriteFile(lp(c, i), val, 0o644) })
			fsGetOne := func(c, i int) error {
				f, err := os.Open(lp(c, i))
				if err != nil {
					return err
				}
				_, err = f.ReadAt(bufs[c], 0)
				f.Close()
				return err
			}
			fsGet := run(clients, ops, fsGetOne)
			// Cold: the values read after the machine's page cache was
			// dropped (root only), the store's from its targets' disk and
			// the directory's from its disk.
			var kvCold, fsCold timing
			if cold {
				if err := bench.DropCaches(); err != nil {
					t.Fatal(err)
				}
				kvCold = run(clients, ops, func(c, i int) error {
					_, err := stores[c].Get(ctx, []string{key(c, i)}, [][]byte{bufs[c]})
					return err
				})
				if err := bench.DropCaches(); err != nil {
					t.Fatal(err)
				}
				fsCold = run(clients, ops, fsGetOne)
			}
			kvDel := run(clients, ops, func(c, i int) error { _, err := stores[c].Delete(ctx, []string{key(c, i)}); return err })
			fsDel := run(clients, ops, func(c, i int) error { return os.Remove(lp(c, i)) })
			bytes := float64(size * ops * clients)
			t.Logf("%8s x%-2d put %6.2f GB/s (%.2fx dir) p50 %v p99 %v | get %6.2f GB/s (%.2fx dir) p50 %v p99 %v | delete %7.0f/s (%.2fx dir)",
				sizeName(size), clients, bytes/kvPut.wall.Seconds()/1e9, fsPut.wall.Seconds()/kvPut.wall.Seconds(), kvPut.p(50), kvPut.p(99),
				bytes/kvGet.wall.Seconds()/1e9, fsGet.wall.Seconds()/kvGet.wall.Seconds(), kvGet.p(50), kvGet.p(99),
				float64(ops*clients)/kvDel.wall.Seconds(), fsDel.wall.Seconds()/kvDel.wall.Seconds())
			t.Logf("%8s x%-2d dir: put p50 %v p99 %v, get p50 %v p99 %v", sizeName(size), clients, fsPut.p(50), fsPut.p(99), fsGet.p(50), fsGet.p(99))
			if cold {
				t.Logf("%8s x%-2d cold get: kv %6.2f GB/s p50 %v p99 %v | dir %6.2f GB/s p50 %v p99 %v | kv / dir %.2fx",
					sizeName(size), clients, bytes/kvCold.wall.Seconds()/1e9, kvCold.p(50), kvCold.p(99),
					bytes/fsCold.wall.Seconds()/1e9, fsCold.p(50), fsCold.p(99), fsCold.wall.Seconds()/kvCold.wall.Seconds())
			}
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

type timing struct {
	wall time.Duration
	lat  []time.Duration
}

func (r timing) p(q int) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)*q/100, len(r.lat)-1)].Round(10 * time.Microsecond)
}

// run calls op(client, i) ops times on each of clients goroutines.
func run(clients, ops int, op func(c, i int) error) timing {
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	var failed error
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			mine := make([]time.Duration, 0, ops)
			for i := range ops {
				t0 := time.Now()
				if err := op(c, i); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if failed != nil {
		panic(failed)
	}
	slices.Sort(lat)
	return timing{wall: wall, lat: lat}
}
