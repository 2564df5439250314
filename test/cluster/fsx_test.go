package cluster

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestFsxReplicated runs the data-integrity exerciser through the client
// library on a cluster of real processes, on files kept on 2 replicas
// (stripe count 1, and 4 stripes of 64 KiB), and then checks that the
// replicas of every chain hold the same chunks. SLUICE_FSX_SEED,
// SLUICE_FSX_OPS and SLUICE_FSX_LONG=1 replay a seed or run longer.
func TestFsxReplicated(t *testing.T) {
	plan, err := fsx.PlanFromEnv(800, 5)
	if err != nil {
		t.Fatal(err)
	}
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{})
	c := proctest.Client(t, cl.MetaAddrs())
	ctx := context.Background()
	for li, lay := range []client.Layout{{StripeCount: 1, Replicas: 2}, {StripeCount: 4, StripeSize: 64 << 10, Replicas: 2}} {
		dir := fmt.Sprintf("/fsx-r%d", li)
		if err := c.Mkdir(ctx, dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := c.SetLayout(ctx, dir, lay); err != nil {
			t.Fatal(err)
		}
		for _, seed := range plan.Seeds {
			cfg := fsx.Config{Seed: seed, Ops: plan.Ops, MaxSize: 8 << 20, MaxIO: 4 << 20}
			st, err := fsx.Run(ctx, &fsx.Client{C: c, Dir: dir, Ctx: ctx}, cfg)
			if err != nil {
				t.Fatalf("layout %+v: %v", lay, err)
			}
			t.Logf("layout stripe count %d size %d replicas 2, seed %d: %v", lay.StripeCount, lay.StripeSize, seed, st)
		}
	}
	n := verifyReplicas(t, cl)
	if n == 0 {
		t.Fatal("no replicated chunk was compared")
	}
	t.Logf("%d chunks identical on their replicas", n)
}
