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
// stages under the absorb policy, in memory (/dev/shm: drained data files
// are reused) and on the disk (they are not): random writes, truncates,
// syncs and re-opens go through staging and drains, and every read must
// return the model's bytes. "limit" stages on the disk under a limit of
// 1 MiB (--staging-max), so that segments are sealed early and writes
// wait for drains.
func TestFsxAbsorb(t *testing.T) {
	for _, place := range []string{"memory", "disk", "limit"} {
		t.Run(place, func(t *testing.T) {
			cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{Metas: 1, Nodes: 1, TargetsPerNode: 4, Embedded: true, HeartbeatTimeout: 10 * time.Second})
			addr := cl.MetaAddrs()
			ctx := context.Background()
			admin := proctest.Client(t, addr)
			staging, seeds := proctest.MemDir(t), []uint64{31, 32}
			var limit int64
			switch place {
			case "disk":
				staging, seeds = t.TempDir(), []uint64{33}
			case "limit":
				staging, seeds, limit = t.TempDir(), []uint64{34}, 1<<20
			}
			c, err := client.New(ctx, client.Options{Server: addr, StagingDir: staging, StagingMax: limit})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			layouts := []client.Layout{{StripeCount: 1}, {StripeCount: 4, StripeSize: 64 << 10}}
			fsxtest.Run(t, admin, layouts, 1000, seeds, func(dir string) fsx.Target {
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
			if st.Segments == 0 || (st.Recycled > 0) != (place == "memory") {
				t.Fatalf("staging stats %+v: want segments staged, in reused files only in memory", st)
			}
			if limit > 0 && (st.Throttled == 0 || st.PeakHeld > limit || st.Held != 0) {
				t.Fatalf("staging stats %+v: want writes that waited for room, never more than %d bytes held, none held at the end", st, limit)
			}
		})
	}
}
