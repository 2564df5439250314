package meta

import (
	"context"
	"testing"

	"github.com/sluice-fs/sluice/internal/cluster"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

func TestSumUsage(t *testing.T) {
	t.Parallel()
	const gb = 1 << 30
	disk := func(id placement.TargetID, node string, fs uint64, capacity, used int64) wire.TargetAddr {
		return wire.TargetAddr{ID: id, Node: node, FS: fs, Capacity: capacity, Used: used}
	}
	for _, tc := range []struct {
		name                 string
		ts                   []wire.TargetAddr
		capacity, used, free int64
	}{
		{"none", nil, 0, 0, 0},
		{"four targets on one disk", []wire.TargetAddr{
			disk(1, "local", 7, 100*gb, 40*gb), disk(2, "local", 7, 100*gb, 40*gb),
			disk(3, "local", 7, 100*gb, 41*gb), disk(4, "local", 7, 100*gb, 41*gb),
		}, 100 * gb, 40 * gb, 60 * gb},
		{"two disks of one node", []wire.TargetAddr{
			disk(1, "n1", 7, 100*gb, 40*gb), disk(2, "n1", 8, 200*gb, 50*gb), disk(3, "n1", 7, 100*gb, 40*gb),
		}, 300 * gb, 90 * gb, 210 * gb},
		{"same device number on two nodes", []wire.TargetAddr{
			disk(1, "n1", 7, 100*gb, 40*gb), disk(2, "n2", 7, 100*gb, 10*gb),
		}, 200 * gb, 50 * gb, 150 * gb},
		{"file system unknown: each target counts", []wire.TargetAddr{
			disk(1, "n1", 0, 100*gb, 40*gb), disk(2, "n1", 0, 100*gb, 40*gb),
		}, 200 * gb, 80 * gb, 120 * gb},
		{"used over capacity frees nothing", []wire.TargetAddr{
			disk(1, "n1", 1, 10*gb, 12*gb),
		}, 10 * gb, 12 * gb, 0},
	} {
		capacity, used, free := sumUsage(tc.ts)
		if capacity != tc.capacity || used != tc.used || free != tc.free {
			t.Errorf("%s: capacity %d, used %d, free %d; want %d, %d, %d", tc.name, capacity, used, free, tc.capacity, tc.used, tc.free)
		}
	}
}

// TestStatfsCountsSharedFilesystemOnce: the four targets of `sluice serve`
// live in one data dir, so on one disk; their heartbeats say so (FS), and
// Statfs counts that disk once, also after a restart of the registry.
func TestStatfsCountsSharedFilesystemOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := kv.NewMemory()
	defer db.Close()
	rt, err := cluster.New(ctx, cluster.Options{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	req := &wire.HeartbeatReq{Node: cluster.LocalNode, Addr: "127.0.0.1:1", Incarnation: 1}
	for id := range uint32(4) {
		if err := rt.RegisterTarget(ctx, placement.TargetID(id+1), "127.0.0.1:1"); err != nil {
			t.Fatal(err)
		}
		req.Targets = append(req.Targets, wire.TargetStat{Target: placement.TargetID(id + 1), Capacity: 1000, Free: 600, Used: int64(id), FS: 2049})
	}
	if _, err := rt.Heartbeat(ctx, req); err != nil {
		t.Fatal(err)
	}
	check := func(what string, targets Targets) {
		t.Helper()
		s := newTestService(t, db, targets)
		st, err := s.Statfs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Capacity != 1000 || st.Used != 400 || st.Free != 600 || st.Targets != 4 {
			t.Errorf("%s: statfs %+v, want the one disk's capacity 1000, used 400, free 600, and 4 targets", what, st)
		}
	}
	check("live", rt)
	rt2, err := cluster.New(ctx, cluster.Options{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	check("reloaded", rt2)
}
