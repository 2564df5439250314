// Package fsxtest runs the data-integrity exerciser (package fsx) from
// tests, on several layouts of a Sluice file system.
package fsxtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
)

// Run makes a directory /fsx-N for each layout through c, sets its layout,
// and runs the exerciser on the target that target returns for it (the
// directory's Sluice path) with each seed of the plan taken from the
// environment (fsx.PlanFromEnv with ops and the fixed seeds; all layouts,
// or the one SLUICE_FSX_LAYOUT numbers). Every run is logged with its
// layout's number and its seed; the first failure ends the test.
func Run(t testing.TB, c *client.Client, layouts []client.Layout, ops int, fixed []uint64, target func(dir string) fsx.Target) {
	t.Helper()
	plan, err := fsx.PlanFromEnv(ops, fixed...)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Layout >= len(layouts) {
		t.Fatalf("SLUICE_FSX_LAYOUT=%d: this test has layouts 0-%d", plan.Layout, len(layouts)-1)
	}
	ctx := context.Background()
	for li, lay := range layouts {
		// Every layout's directory is made, also where the plan skips
		// the layout: the caller may check them afterwards.
		dir := fmt.Sprintf("/fsx-%d", li)
		if err := c.Mkdir(ctx, dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := c.SetLayout(ctx, dir, lay); err != nil {
			t.Fatal(err)
		}
		if !plan.Runs(li) {
			continue
		}
		for _, seed := range plan.Seeds {
			cfg := fsx.Config{Seed: seed, Ops: plan.Ops, MaxSize: 8 << 20, MaxIO: 4 << 20,
				Boundaries: []int64{4 << 10, 64 << 10, 1 << 20, max(lay.StripeSize, 64<<10)}, NoAllocate: plan.NoAllocate}
			if plan.Ops >= progressFrom {
				// A long run says how far it got (go test -v shows it
				// as it goes), so that a run stopped by its timeout
				// still tells how much passed.
				cfg.Progress, cfg.ProgressEvery = logWriter{t}, progressEvery
			}
			st, err := fsx.Run(ctx, target(dir), cfg)
			if err != nil {
				t.Fatalf("layout %d %+v: %v", li, lay, err)
			}
			t.Logf("layout %d: stripe count %d size %d replicas %d components %d, seed %d: %v", li, lay.StripeCount, lay.StripeSize, max(lay.Replicas, 1), len(lay.Components), seed, st)
		}
	}
}

// Runs of at least progressFrom operations log their progress every
// progressEvery operations.
const (
	progressFrom  = 100_000
	progressEvery = 50_000
)

// logWriter writes each line it gets to the test's log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
