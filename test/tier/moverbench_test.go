package tier

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/mover"
)

// BenchmarkMoverPass times one tier mover pass (a dry run: the walk and
// the reads of policies and HSM states, no moves) over a tree of
// SLUICE_MOVER_BENCH_FILES files (default 10,000) in directories of 100,
// all under a policy, beside a walk of the same tree alone (the client
// library's Walk, the floor of a pass), and the most heap a pass held
// above what was live before it (sampled every 5 ms):
//
//	go test -run '^$' -bench MoverPass -benchtime 3x ./test/tier
func BenchmarkMoverPass(b *testing.B) {
	ctx := context.Background()
	fs := startFS(b)
	c := newClient(b, fs.addr, 0)
	n := envInt("SLUICE_MOVER_BENCH_FILES", 10000)
	var g errgroup.Group
	g.SetLimit(16)
	for d := range (n + 99) / 100 {
		dir := fmt.Sprintf("/ds/d%03d", d)
		if err := c.MkdirAll(ctx, dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := d * 100; i < min(n, (d+1)*100); i++ {
			g.Go(func() error {
				f, err := c.Create(ctx, fmt.Sprintf("%s/%05d", dir, i))
				if err != nil {
					return err
				}
				return f.Close()
			})
		}
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	fs.mustCLI("tier", "policy", "set", "/ds", "--archive-after", "1000h")
	mv := mover.New(c, mover.Options{DryRun: true})
	var pass, walk time.Duration
	var heapPeak uint64
	for range b.N {
		// The heap the pass holds at most, above what was live before it
		// (sampled every 5 ms).
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		stop, sampled := make(chan struct{}), make(chan uint64)
		go func() {
			var peak uint64
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
				select {
				case <-stop:
					sampled <- peak
					return
				case <-tick.C:
				}
			}
		}()
		t0 := time.Now()
		r, err := mv.Pass(ctx)
		pass += time.Since(t0)
		close(stop)
		if peak := <-sampled; peak > base {
			heapPeak = max(heapPeak, peak-base)
		}
		if err != nil {
			b.Fatal(err)
		}
		if r.Files != n || len(r.Planned) != 0 {
			b.Fatalf("pass found %d files and planned %d moves, want %d and none", r.Files, len(r.Planned), n)
		}
		t0 = time.Now()
		seen := 0
		if err := c.Walk(ctx, "/", func(string, *client.FileInfo, error) error { seen++; return nil }); err != nil {
			b.Fatal(err)
		}
		walk += time.Since(t0)
	}
	b.ReportMetric(pass.Seconds()/float64(b.N), "s/pass")
	b.ReportMetric(walk.Seconds()/float64(b.N), "s/walk")
	b.ReportMetric(pass.Seconds()/walk.Seconds(), "pass/walk")
	b.ReportMetric(float64(heapPeak)/(1<<20), "MiB-heap-peak")
}
