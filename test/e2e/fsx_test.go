package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
)

// fsxLayouts are the layouts the exerciser runs on: one target, four
// targets with the smallest stripes (every write crosses chunks), and the
// default.
var fsxLayouts = []client.Layout{{StripeCount: 1}, {StripeCount: 4, StripeSize: 64 << 10}, {}}

// TestFsxClient runs the data-integrity exerciser through the client
// library on a real server, on fixed seeds and a fresh one (logged).
// SLUICE_FSX_SEED, SLUICE_FSX_OPS and SLUICE_FSX_LONG=1 replay a seed or
// run longer (see package fsx).
func TestFsxClient(t *testing.T) {
	plan, err := fsx.PlanFromEnv(1500, 1, 12)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "")
	c := s.client()
	ctx := context.Background()
	for li, lay := range fsxLayouts {
		dir := fmt.Sprintf("/fsx-%d", li)
		if err := c.Mkdir(ctx, dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := c.SetLayout(ctx, dir, lay); err != nil {
			t.Fatal(err)
		}
		for _, seed := range plan.Seeds {
			cfg := fsx.Config{Seed: seed, Ops: plan.Ops, MaxSize: 8 << 20, MaxIO: 4 << 20, Boundaries: []int64{4 << 10, 64 << 10, 1 << 20, max(lay.StripeSize, 64<<10)}}
			st, err := fsx.Run(ctx, &fsx.Client{C: c, Dir: dir, Ctx: ctx}, cfg)
			if err != nil {
				t.Fatalf("layout %+v: %v", lay, err)
			}
			t.Logf("layout stripe count %d size %d, seed %d: %v", lay.StripeCount, lay.StripeSize, seed, st)
		}
	}
}
