package qos

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestClusterJobLimit: a job limited in the whole cluster
// (`sluice qos set --cluster-rate`) is held to about that rate over all
// storage nodes together, where a job with the same limit per target gets
// it on each node: reading the same file, striped over two nodes, side by
// side, the cluster-limited job reads well under the other's bytes. `qos
// ls` and the audit trail show the limit; `qos rm` lifts it.
func TestClusterJobLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{Metas: 1, Embedded: true, Nodes: 2, TargetsPerNode: 2})
	addr := cl.MetaAddrs()
	cli := func(args ...string) string {
		t.Helper()
		return runCLI(t, addr, args...)
	}
	ctx := context.Background()
	setup := newClient(t, addr, "", "", 0)
	if err := setup.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := setup.SetLayout(ctx, "/d", client.Layout{StripeSize: 1 << 20, StripeCount: 4, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	const size = 16 << 20
	writeFile(t, setup, "/d/data", size)

	cli("qos", "set", "--job", "whole", "--cluster-rate", "2M", "--cluster-burst", "1M")
	cli("qos", "set", "--job", "each", "--rate", "2M", "--burst", "1M")
	ls := cli("qos", "ls")
	if !regexp.MustCompile(`(?m)^whole\s+2097152\s+1048576$`).MatchString(ls) || !regexp.MustCompile(`(?m)^each\s+2097152\s+1048576\s+-\s+-$`).MatchString(ls) {
		t.Fatalf("qos ls does not show both limits:\n%s", ls)
	}
	if audit := cli("audit", "ls"); !strings.Contains(audit, "cluster-limit") {
		t.Errorf("audit ls shows no cluster-limit change:\n%s", audit)
	}
	// The nodes apply settings with their heartbeats (every second): let
	// three go by, so that both limits are in force before the reads.
	time.Sleep(3 * time.Second)

	whole := newClient(t, addr, "whole", "training", -1)
	each := newClient(t, addr, "each", "training", -1)
	var wholeB, eachB atomic.Int64
	read := func(ctx context.Context, c *client.Client, n *atomic.Int64) {
		f, err := c.Open(context.Background(), "/d/data")
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		buf := make([]byte, 1<<20)
		for off := int64(0); ctx.Err() == nil; off = (off + 1<<20) % size {
			k, err := f.ReadAtContext(ctx, buf, off)
			if err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
			n.Add(int64(k))
		}
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { read(rctx, whole, &wholeB) })
		wg.Go(func() { read(rctx, each, &eachB) })
	}
	// Until the per-target job has read 40 MiB: a count, not a time.
	deadline := time.Now().Add(2 * time.Minute)
	for eachB.Load() < 40<<20 && !t.Failed() {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	wg.Wait()
	w, e := wholeB.Load(), eachB.Load()
	t.Logf("read: cluster-limited job %d MiB, per-target-limited job %d MiB", w>>20, e>>20)
	if e < 40<<20 {
		t.Fatalf("the per-target-limited job read only %d MiB in 2 minutes", e>>20)
	}
	// Two nodes: the per-target limit lets about twice the cluster one
	// (0.5; the bursts and the first heartbeats' floors add a little).
	if w == 0 || float64(w) > 0.7*float64(e) {
		t.Errorf("the cluster-limited job read %d bytes beside the per-target-limited job's %d: want above 0 and under 0.7 of it", w, e)
	}

	cli("qos", "rm", "--job", "whole")
	if ls := cli("qos", "ls"); strings.Contains(ls, "whole") {
		t.Errorf("qos ls still shows the removed cluster limit:\n%s", ls)
	}
}
