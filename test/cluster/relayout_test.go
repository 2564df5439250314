package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestMigrateReplicated migrates files between one and two replicas on a
// real cluster (3 storage nodes, 2 metadata services on etcd) with
// `sluice migrate`, one of them while a writer on the other metadata
// service rewrites it: every file reads back with the expected SHA-256,
// has the new replica count, and the replicas of every chain hold the same
// chunks (the old copies gone from both replicas).
func TestMigrateReplicated(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{})
	ctx := context.Background()
	c := proctest.Client(t, cl.MetaAddrs())
	c2 := proctest.Client(t, cl.Metas[1].Addr)
	cli := func(args ...string) string { t.Helper(); return mustCLI(t, cl, args...) }
	cli("mkdir", "/one", "/two")
	cli("layout", "set", "/one", "--stripe-count", "2")
	cli("layout", "set", "/two", "--replicas", "2", "--stripe-count", "2")
	files := writeRandomFiles(t, c, 17, pathsIn(3, "/one", "/two"), 1<<20, 3<<20)

	// A writer rewrites /two/f0 through the other metadata service while
	// it moves to one replica; its model is what the file must hold.
	model := bytes.Clone(files["/two/f0"])
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	writes := 0
	wg.Go(func() {
		f, err := c2.OpenFile(ctx, "/two/f0", client.O_RDWR, 0)
		if err != nil {
			werr = err
			return
		}
		wr := rand.New(rand.NewPCG(18, 18))
		for {
			select {
			case <-stop:
				werr = f.Close()
				return
			default:
			}
			off, n := wr.IntN(len(model)-(64<<10)), 1+wr.IntN(64<<10)
			b := make([]byte, n)
			for j := range b {
				b[j] = byte(wr.Uint32())
			}
			if _, err := f.WriteAt(b, int64(off)); err != nil {
				werr = err
				f.Close()
				return
			}
			copy(model[off:], b)
			writes++
			if writes%4 == 0 {
				if err := f.Sync(); err != nil {
					werr = err
					f.Close()
					return
				}
			}
		}
	})
	cli("migrate", "--replicas", "1", "--stripe-count", "3", "--rate", "8M", "/two/f0")
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	if writes == 0 {
		t.Fatal("the writer wrote nothing during the migration")
	}
	files["/two/f0"] = model
	cli("migrate", "--replicas", "2", "-r", "/one")
	cli("migrate", "--replicas", "1", "/two/f1", "/two/f2")

	for p, want := range files {
		l, err := c.GetLayout(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		wantR := 1
		if strings.HasPrefix(p, "/one") {
			wantR = 2
		}
		if l.Replicas != wantR || l.Data == 0 {
			t.Errorf("%s: layout %+v, want %d replicas under a new data ID", p, l, wantR)
		}
		for _, cc := range []*client.Client{c, c2} {
			got, err := readFile(ctx, cc, p)
			if err != nil || sha256.Sum256(got) != sha256.Sum256(want) {
				t.Fatalf("read %s after the migration: %v (or SHA-256 differs)", p, err)
			}
		}
	}
	t.Logf("%d writes during the migration of /two/f0", writes)
	if n := settledReplicas(t, cl); n == 0 {
		t.Fatal("no chunks on the replicated chains")
	}
}

// TestDrainReplicated drains a target of a real cluster with `sluice target
// drain`: its replicas in chains move to other targets (the chains' other
// replicas copy them the data), files of one replica on it migrate, every
// file reads back intact, the replicas of every chain hold the same
// chunks, and `sluice target rm` then removes the target.
func TestDrainReplicated(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{})
	ctx := context.Background()
	c := proctest.Client(t, cl.MetaAddrs())
	must := func(args ...string) string { t.Helper(); return mustCLI(t, cl, args...) }
	must("mkdir", "/one", "/two")
	must("layout", "set", "/two", "--replicas", "2")
	files := writeRandomFiles(t, c, 19, pathsIn(4, "/one", "/two"), 1<<20, 2<<20)
	ci, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const drained = 1
	on := func(l client.Layout) bool {
		for _, ch := range l.Chains {
			if ch == drained {
				return true
			}
			for _, info := range ci.Chains {
				if info.ID == ch && slices.ContainsFunc(info.Replicas, func(r client.ReplicaInfo) bool { return r.Target == drained }) {
					return true
				}
			}
		}
		return false
	}
	before := 0
	for p := range files {
		if l, err := c.GetLayout(ctx, p); err == nil && on(l) {
			before++
		}
	}
	if before == 0 {
		t.Fatalf("no file has data on target %d", drained)
	}
	// While the drain runs, no chain may have fewer serving replicas than
	// it had (make before break), and some chain is seen with its new
	// replica syncing beside the draining one.
	serving := map[uint32]int{}
	for _, ch := range ci.Chains {
		serving[ch.ID] = len(ch.Replicas)
	}
	stopWatch := make(chan struct{})
	var watch sync.WaitGroup
	var dips []string
	grown := false
	watch.Go(func() {
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(10 * time.Millisecond):
			}
			now, err := c.Cluster(ctx)
			if err != nil {
				continue
			}
			for _, ch := range now.Chains {
				n := 0
				for _, r := range ch.Replicas {
					if r.State == "serving" {
						n++
					}
				}
				if want, ok := serving[ch.ID]; ok && n < want {
					dips = append(dips, fmt.Sprintf("%+v", ch))
				}
				if len(ch.Replicas) > 2 {
					grown = true
				}
			}
		}
	})
	out := must("target", "drain", fmt.Sprint(drained))
	close(stopWatch)
	watch.Wait()
	t.Logf("%d files on target %d; sluice target drain:\n%s", before, drained, out)
	if len(dips) > 0 {
		t.Errorf("during the drain, chains had fewer serving replicas than before: %v", dips)
	}
	if !grown {
		t.Logf("the watcher never saw a chain with its new replica beside the draining one (the moves were quicker than its polls)")
	}
	if ci, err = c.Cluster(ctx); err != nil {
		t.Fatal(err)
	}
	for p := range files {
		l, err := c.GetLayout(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if on(l) {
			t.Errorf("%s still has data on target %d: %+v", p, drained, l)
		}
	}
	checkFiles(t, c, files, "after the drain")
	settledReplicas(t, cl)
	// Its chain replicas moved too: nothing names it, and it goes.
	for _, ch := range ci.Chains {
		if slices.ContainsFunc(ch.Replicas, func(r client.ReplicaInfo) bool { return r.Target == drained }) {
			t.Errorf("chain %d still has a replica on target %d: %+v", ch.ID, drained, ch)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := clusterCLI(cl, "target", "rm", fmt.Sprint(drained))
		if err == nil {
			break
		}
		// Its node reports the chunk count with its next heartbeat.
		if !strings.Contains(out, "chunks") || time.Now().After(deadline) {
			t.Fatalf("target rm %d: %v: %s", drained, err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if ts, err := c.Targets(ctx); err != nil || slices.ContainsFunc(ts, func(ti client.TargetInfo) bool { return ti.ID == drained }) {
		t.Fatalf("target %d still listed after rm: %v %v", drained, ts, err)
	}
	checkFiles(t, c, files, "after the target's removal")
}

// settledReplicas is checkReplicas once the chunks the migrations left
// behind are collected (a removal reaches a chain's replicas one after the
// other, so a listing in between differs): it retries for 30 s.
func settledReplicas(t *testing.T, cl *proctest.Cluster) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := checkReplicas(cl)
		if err == nil {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// clusterCLI runs `sluice ARGS... --server` against the cluster.
func clusterCLI(cl *proctest.Cluster, args ...string) (string, error) {
	out, err := exec.Command(binary, append(args, "--server", cl.MetaAddrs())...).CombinedOutput()
	return string(out), err
}

// mustCLI is clusterCLI, failing the test on an error.
func mustCLI(t *testing.T, cl *proctest.Cluster, args ...string) string {
	t.Helper()
	out, err := clusterCLI(cl, args...)
	if err != nil {
		t.Fatalf("sluice %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestRebalanceNewNode adds a storage node to a running cluster and runs
// `sluice rebalance`: the node's targets get 2-replica chains of their
// own (headed by each, and following in another), and files written
// before the node came move some of their chunks to its targets: files of
// one replica, files of two replicas (to the new chains) and files of a
// pool (only to the new target added to the pool, never outside it). Every
// file reads back intact and the replicas of every chain hold the same
// chunks.
func TestRebalanceNewNode(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{})
	ctx := context.Background()
	c := proctest.Client(t, cl.MetaAddrs())
	ts, err := c.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A pool of one target of each node.
	var half []string
	seen := map[string]bool{}
	for _, tg := range ts {
		if !seen[tg.Node] {
			seen[tg.Node] = true
			half = append(half, fmt.Sprint(tg.ID))
		}
	}
	mustCLI(t, cl, append([]string{"pool", "create", "half"}, half...)...)
	mustCLI(t, cl, "mkdir", "/d", "/r", "/p")
	mustCLI(t, cl, "layout", "set", "/d", "--stripe-count", "1")
	mustCLI(t, cl, "layout", "set", "/r", "--stripe-count", "1", "--replicas", "2")
	mustCLI(t, cl, "layout", "set", "/p", "--stripe-count", "1", "--pool", "half")
	files := writeRandomFiles(t, c, 21, pathsIn(12, "/d", "/r", "/p"), 1<<20, 1<<20)
	// A fourth node with two new targets.
	proctest.Start(t, binary, nil, regexp.MustCompile(`sluice: serving on (\S+)`), "target", "--listen", "127.0.0.1:0",
		"--meta", cl.MetaAddrs(), "--data-dir", t.TempDir(), "--node", "node4", "--targets", "2", "--fence", "1500ms")
	var added []uint32
	deadline := time.Now().Add(30 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the new node's targets are not healthy in two chains each: %v", added)
		}
		time.Sleep(200 * time.Millisecond)
		ci, err := c.Cluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		added = added[:0]
		for _, tg := range ci.Targets {
			if tg.Node == "node4" && tg.Healthy {
				added = append(added, tg.ID)
			}
		}
		in := map[uint32]int{}
		for _, ch := range ci.Chains {
			for _, r := range ch.Replicas {
				in[r.Target]++
			}
		}
		if len(added) == 2 && in[added[0]] >= 2 && in[added[1]] >= 2 {
			break
		}
	}
	mustCLI(t, cl, "pool", "add", "half", fmt.Sprint(added[0]))
	members := map[uint32]bool{added[0]: true}
	for _, id := range half {
		var n uint32
		fmt.Sscan(id, &n)
		members[n] = true
	}
	onNew := func(dir string) int {
		ci, err := c.Cluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for p := range files {
			if !strings.HasPrefix(p, dir+"/") {
				continue
			}
			l, err := c.GetLayout(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			var targets []uint32
			for _, ch := range l.Chains {
				if ch < 1<<31 {
					targets = append(targets, ch)
				}
				for _, info := range ci.Chains {
					if info.ID == ch {
						for _, r := range info.Replicas {
							targets = append(targets, r.Target)
						}
					}
				}
			}
			if dir == "/p" && slices.ContainsFunc(targets, func(tg uint32) bool { return !members[tg] }) {
				t.Errorf("%s of pool half has chunks on %v, outside the pool", p, targets)
			}
			if slices.ContainsFunc(targets, func(tg uint32) bool { return slices.Contains(added, tg) }) {
				n++
			}
		}
		return n
	}
	for _, dir := range []string{"/d", "/r", "/p"} {
		if n := onNew(dir); n != 0 {
			t.Fatalf("%d files of %s on the new targets before the rebalance", n, dir)
		}
	}
	out := mustCLI(t, cl, "rebalance", "--band", "0.000001", "--rate", "0")
	t.Logf("sluice rebalance:\n%s", out)
	for _, dir := range []string{"/d", "/r", "/p"} {
		if n := onNew(dir); n < 2 {
			t.Errorf("after the rebalance %d files of %s have data on the new targets %v, want at least 2", n, dir, added)
		}
	}
	checkFiles(t, c, files, "after the rebalance")
	settledReplicas(t, cl)
}

// TestMetaRebalance runs the rebalancer inside a cluster's first metadata
// service (sluice meta --rebalance-every): files made on one target of a
// 3-node cluster spread over the others by themselves and read back
// intact.
func TestMetaRebalance(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{
		FirstMetaArgs: []string{"--rebalance-every", "300ms", "--rebalance-band", "0.000001", "--rebalance-rate", "0"}})
	ctx := context.Background()
	c := proctest.Client(t, cl.MetaAddrs())
	mustCLI(t, cl, "pool", "create", "one", "1")
	mustCLI(t, cl, "mkdir", "/hot")
	mustCLI(t, cl, "layout", "set", "/hot", "--pool", "one", "--stripe-count", "1")
	files := writeRandomFiles(t, c, 23, pathsIn(8, "/hot"), 1<<20, 0)
	mustCLI(t, cl, "layout", "set", "/hot", "--pool", "")
	deadline := time.Now().Add(60 * time.Second)
	for {
		on1 := 0
		for p := range files {
			if l, err := c.GetLayout(ctx, p); err == nil && slices.Equal(l.Chains, []uint32{1}) {
				on1++
			}
		}
		if on1 <= 3 { // 8 files of 1 MiB over 6 targets: the mean is 1.3 MiB
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 8 files still on target 1 after 60 s of sluice meta --rebalance-every", on1)
		}
		time.Sleep(300 * time.Millisecond)
	}
	checkFiles(t, c, files, "after the rebalancer")
}

// pathsIn returns n files in each directory, interleaved: dirs[0]/f0,
// dirs[1]/f0, dirs[0]/f1 and so on.
func pathsIn(n int, dirs ...string) []string {
	var out []string
	for i := range n {
		for _, d := range dirs {
			out = append(out, fmt.Sprintf("%s/f%d", d, i))
		}
	}
	return out
}

// writeRandomFiles writes each path, in order, with random bytes (seeded)
// of size bytes plus up to spread more, and returns them by path.
func writeRandomFiles(t *testing.T, c *client.Client, seed uint64, paths []string, size, spread int) map[string][]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	files := make(map[string][]byte, len(paths))
	for _, p := range paths {
		n := size
		if spread > 0 {
			n += rng.IntN(spread)
		}
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		if err := proctest.WriteFile(context.Background(), c, p, data); err != nil {
			t.Fatal(err)
		}
		files[p] = data
	}
	return files
}

// checkFiles reads every file back through c and compares its SHA-256.
func checkFiles(t *testing.T, c *client.Client, files map[string][]byte, when string) {
	t.Helper()
	for p, want := range files {
		got, err := readFile(context.Background(), c, p)
		if err != nil || sha256.Sum256(got) != sha256.Sum256(want) {
			t.Fatalf("read %s %s: %v (or SHA-256 differs)", p, when, err)
		}
	}
}
