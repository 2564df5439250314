package tier

import (
	"context"
	"fmt"
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
// library's Walk, the floor of a pass):
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
	for range b.N {
		t0 := time.Now()
		r, err := mv.Pass(ctx)
		if err != nil {
			b.Fatal(err)
		}
		pass += time.Since(t0)
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
}
