package cluster

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestPoolReplicated makes a pool of one target on each of two storage
// nodes (of three, on etcd with two metadata services) and a directory
// with 2 replicas in it: every file's chains must have both replicas
// inside the pool (chains formed from the pool's targets), and read back
// intact. A pool of one node's targets cannot hold 2 replicas: the create
// fails, naming the pool.
func TestPoolReplicated(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{})
	ctx := context.Background()
	c := proctest.Client(t, cl.MetaAddrs())
	ci, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byNode := make(map[string][]uint32)
	for _, tg := range ci.Targets {
		byNode[tg.Node] = append(byNode[tg.Node], tg.ID)
	}
	pair := []uint32{byNode["node1"][0], byNode["node2"][0]}
	solo := byNode["node3"]
	if len(byNode) != 3 || len(solo) != 2 {
		t.Fatalf("targets by node: %v", byNode)
	}
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(binary, append(args, "--server", cl.MetaAddrs())...).CombinedOutput()
		if err != nil {
			t.Fatalf("sluice %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	cli("pool", "create", "pair", fmt.Sprint(pair[0]), fmt.Sprint(pair[1]))
	cli("pool", "create", "solo", fmt.Sprint(solo[0]), fmt.Sprint(solo[1]))
	cli("mkdir", "/r2", "/one")
	cli("layout", "set", "/r2", "--pool", "pair", "--replicas", "2")
	cli("layout", "set", "/one", "--pool", "solo", "--replicas", "2")

	// The other metadata service places files in the pool at once (it
	// reloads a pool it does not know), and lists it after its refresh.
	c2 := proctest.Client(t, cl.Metas[1].Addr)

	sums := make(map[string][32]byte)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 8 {
		data := make([]byte, 1<<20+rng.IntN(3<<20))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		p := fmt.Sprintf("/r2/f%d", i)
		cl := c
		if i%2 == 1 {
			cl = c2
		}
		if err := proctest.WriteFile(ctx, cl, p, data); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
		sums[p] = sha256.Sum256(data)
	}
	ci, err = c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range sums {
		l, err := c.GetLayout(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if l.Replicas != 2 || len(l.Chains) == 0 {
			t.Fatalf("%s: layout %+v", p, l)
		}
		for _, id := range l.Chains {
			k := slices.IndexFunc(ci.Chains, func(ch client.ChainInfo) bool { return ch.ID == id })
			if k < 0 {
				t.Fatalf("%s: chain %d not in the chain table", p, id)
			}
			if len(ci.Chains[k].Replicas) != 2 {
				t.Errorf("%s: chain %d has replicas %v", p, id, ci.Chains[k].Replicas)
			}
			for _, r := range ci.Chains[k].Replicas {
				if !slices.Contains(pair, r.Target) {
					t.Errorf("%s: chain %d has a replica on target %d, outside pool %v", p, id, r.Target, pair)
				}
			}
		}
		got, err := readFile(ctx, c, p)
		if err != nil || sha256.Sum256(got) != want {
			t.Fatalf("read %s: %v (or SHA-256 differs)", p, err)
		}
	}
	if ps, err := c2.Pools(ctx); err != nil || len(ps) != 2 || !slices.Equal(ps[0].Targets, pair) {
		t.Fatalf("pools from the second metadata service: %+v, %v", ps, err)
	}
	if err := proctest.WriteFile(ctx, c, "/one/f", []byte("x")); err == nil || !strings.Contains(err.Error(), `pool "solo"`) {
		t.Errorf("2 replicas in a pool on one node: %v, want an error naming the pool", err)
	}
}
