package checkpoint

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/fsx/fsxtest"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestFsxAbsorb runs the data-integrity exerciser through a client that
// stages in memory (/dev/shm) under the absorb policy: random writes,
// truncates, syncs and re-opens go through staging, drains and reused
// data files, and every read must return the model's bytes.
func TestFsxAbsorb(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{Metas: 1, Nodes: 1, TargetsPerNode: 4, Embedded: true, HeartbeatTimeout: 10 * time.Second})
	addr := cl.MetaAddrs()
	ctx := context.Background()
	admin := proctest.Client(t, addr)
	staging := memStaging(t)
	c, err := client.New(ctx, client.Options{Server: addr, StagingDir: staging})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	layouts := []client.Layout{{StripeCount: 1}, {StripeCount: 4, StripeSize: 64 << 10}}
	fsxtest.Run(t, admin, layouts, 1000, []uint64{31, 32}, func(dir string) fsx.Target {
		if err := admin.SetAbsorb(ctx, dir, client.AbsorbOn); err != nil {
			t.Fatal(err)
		}
		return &fsx.Client{C: c, Dir: dir, Ctx: ctx}
	})
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	st := c.StagingStats()
	t.Logf("staging: %+v", st)
	if st.Segments == 0 || st.Recycled == 0 {
		t.Fatalf("staging stats %+v: want segments staged, some in reused files", st)
	}
}
