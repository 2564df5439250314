package cluster

import (
	"context"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/fsx/fsxtest"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestFsxReplicated runs the data-integrity exerciser through the client
// library on a cluster of real processes, on files kept on 2 replicas
// (stripe count 1, 4 stripes of 64 KiB, and a progressive layout), and
// then checks that the
// replicas of every chain hold the same chunks. SLUICE_FSX_SEED,
// SLUICE_FSX_OPS and SLUICE_FSX_LONG=1 replay a seed or run longer.
func TestFsxReplicated(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{})
	c := proctest.Client(t, cl.MetaAddrs())
	layouts := []client.Layout{{StripeCount: 1, Replicas: 2}, {StripeCount: 4, StripeSize: 64 << 10, Replicas: 2},
		// A progressive layout (ADR 0021) on replicated chains.
		{Replicas: 2, Components: []client.LayoutComponent{{End: 1 << 20, StripeSize: 64 << 10, StripeCount: 1}, {End: 5 << 20, StripeSize: 64 << 10, StripeCount: 2}, {StripeSize: 256 << 10}}}}
	fsxtest.Run(t, c, layouts, 800, []uint64{5}, func(dir string) fsx.Target {
		return &fsx.Client{C: c, Dir: dir, Ctx: context.Background()}
	})
	// Directories made below a replicated one keep its replicas.
	ctx := context.Background()
	if err := c.MkdirAll(ctx, "/fsx-0/sub/deeper", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := proctest.WriteFile(ctx, c, "/fsx-0/sub/deeper/f", []byte("replicated")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/fsx-0/sub/deeper", "/fsx-0/sub/deeper/f"} {
		if l, err := c.GetLayout(ctx, p); err != nil || l.Replicas != 2 {
			t.Errorf("%s: layout %+v, %v: want 2 replicas, inherited", p, l, err)
		}
	}
	n := verifyReplicas(t, cl)
	if n == 0 {
		t.Fatal("no replicated chunk was compared")
	}
	t.Logf("%d chunks identical on their replicas", n)
}
