package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/fsx/fsxtest"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/tcpproxy"
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

// TestFsxDrain runs the randomized exerciser on a 2-replica directory
// while `sluice target drain` moves the replicas of a target it uses to
// others (make before break: the new replica syncs while the writes go
// on): every read of the exerciser matches its model, the drain finishes,
// no chain keeps a replica on the target, and the replicas of every chain
// hold the same chunks.
func TestFsxDrain(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{})
	c := proctest.Client(t, cl.MetaAddrs())
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/d", client.Layout{StripeCount: 4, StripeSize: 64 << 10, Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	plan, err := fsx.PlanFromEnv(3000, 11)
	if err != nil {
		t.Fatal(err)
	}
	fsxDone := make(chan error, 1)
	go func() {
		var err error
		for _, seed := range plan.Seeds {
			cfg := fsx.Config{Seed: seed, Ops: plan.Ops, MaxSize: 8 << 20, MaxIO: 4 << 20,
				Boundaries: []int64{4 << 10, 64 << 10, 1 << 20}, NoAllocate: plan.NoAllocate}
			var st fsx.Stats
			if st, err = fsx.Run(ctx, &fsx.Client{C: c, Dir: "/d", Ctx: ctx}, cfg); err != nil {
				break
			}
			t.Logf("seed %d: %v", seed, st)
		}
		fsxDone <- err
	}()
	// Drain target 1 once the exerciser has written a while.
	time.Sleep(2 * time.Second)
	const drained = 1
	out, derr := clusterCLI(cl, "target", "drain", fmt.Sprint(drained))
	t.Logf("sluice target drain %d:\n%s", drained, out)
	select {
	case err := <-fsxDone:
		fsxDone <- err
		t.Logf("the exerciser ended before the drain did: the replicas moved under part of its run only")
	default:
		t.Logf("the drain ended while the exerciser ran")
	}
	if err := <-fsxDone; err != nil {
		t.Fatalf("exerciser during the drain: %v", err)
	}
	if derr != nil {
		t.Fatalf("sluice target drain: %v", derr)
	}
	ci, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range ci.Chains {
		if slices.ContainsFunc(ch.Replicas, func(r client.ReplicaInfo) bool { return r.Target == drained }) {
			t.Errorf("chain %d still has a replica on target %d: %+v", ch.ID, drained, ch)
		}
	}
	if n := settledReplicas(t, cl); n == 0 {
		t.Fatal("no replicated chunk was compared")
	}
}

// TestFsxReplicatedJitter is TestFsxReplicated with every storage node
// behind a proxy that delays each piece of what is sent to it by a random
// 0-2 ms (each node advertises its proxy): the client's requests to the
// chains' heads, on their four connections each, and the heads' forwards
// to the next replicas overtake one another as on a congested network.
// The replicas must still end identical and the files as the model says.
// SLUICE_FSX_SEED and SLUICE_FSX_OPS replay a seed.
func TestFsxReplicatedJitter(t *testing.T) {
	var listens, proxies []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listens = append(listens, ln.Addr().String())
		ln.Close()
		px := tcpproxy.Start(t, listens[len(listens)-1])
		px.SetJitter(2 * time.Millisecond)
		proxies = append(proxies, px.Addr)
	}
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{Nodes: 3, NodeArgs: func(i int) []string {
		return []string{"--listen", listens[i], "--advertise", proxies[i]}
	}})
	c := proctest.Client(t, cl.MetaAddrs())
	layouts := []client.Layout{{StripeCount: 1, Replicas: 2}, {StripeCount: 4, StripeSize: 64 << 10, Replicas: 2}}
	fsxtest.Run(t, c, layouts, 600, []uint64{9}, func(dir string) fsx.Target {
		return &fsx.Client{C: c, Dir: dir, Ctx: context.Background()}
	})
	if n := verifyReplicas(t, cl); n == 0 {
		t.Fatal("no replicated chunk was compared")
	} else {
		t.Logf("%d chunks identical on their replicas", n)
	}
}
