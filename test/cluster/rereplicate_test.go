package cluster

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/wire"
)

// restored reports whether every chain has all its replicas serving and
// none on node.
func restored(info *wire.ClusterInfo, node string) bool {
	on := map[placement.TargetID]bool{}
	for _, tg := range info.Targets {
		on[tg.ID] = tg.Node == node
	}
	for _, ch := range info.Chains {
		for _, r := range ch.Replicas {
			if on[r.Target] || r.State != placement.Serving {
				return false
			}
		}
	}
	return len(info.Chains) > 0
}

// damaged runs `sluice damaged /` against the cluster.
func damaged(t *testing.T, cl *proctest.Cluster) string {
	t.Helper()
	out, err := exec.Command(binary, "damaged", "/", "--server", cl.MetaAddrs()).CombinedOutput()
	if err != nil {
		t.Fatalf("sluice damaged: %v: %s", err, out)
	}
	return string(out)
}

// restoredOrDown reports whether no chain has a syncing replica (before
// the first replacement, or after the last copy).
func restoredOrDown(info *wire.ClusterInfo) bool {
	for _, ch := range info.Chains {
		for _, r := range ch.Replicas {
			if r.State == placement.Syncing {
				return false
			}
		}
	}
	return true
}

// TestReplaceDeadNode kills a storage node (kill -9) of three and keeps it
// down past --replace-after: its replicas are rebuilt on the other nodes,
// every chain is back to 2 serving replicas, the replicas hold identical
// chunks (OpChunkList digests) and the files read back with the SHA-256
// they were written with; then the node returns and the cluster is healthy
// with the data unchanged.
func TestReplaceDeadNode(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{ReplaceAfter: 3 * time.Second})
	ctx := context.Background()
	c := proctest.Client(t, cl.MetaAddrs())
	if err := c.Mkdir(ctx, "/r2", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/r2", client.Layout{StripeSize: 1 << 20, StripeCount: 4, Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	sums := make(map[string][32]byte)
	rng := rand.New(rand.NewPCG(3, 3))
	var total int64
	writeStart := time.Now()
	for i := range 12 {
		data := make([]byte, 1<<20+rng.IntN(3<<20))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		p := fmt.Sprintf("/r2/f%d", i)
		if err := proctest.WriteFile(ctx, c, p, data); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
		sums[p] = sha256.Sum256(data)
		total += int64(len(data))
	}
	wrote := time.Since(writeStart)
	// Sparse files: 256 KiB at 0 and at 30 MiB, the second in slot 2's
	// chunk after a hole of 7 MiB. A rebuilt replica must keep the hole
	// (the copy skips blocks of zeros).
	var sparseInos []uint64
	var holeChains []placement.ChainID
	for i := range 4 {
		p := fmt.Sprintf("/r2/sparse%d", i)
		data := make([]byte, 30<<20+256<<10)
		for _, at := range []int{0, 30 << 20} {
			for j := at; j < at+256<<10; j++ {
				data[j] = byte(rng.Uint32() | 1)
			}
		}
		f, err := c.OpenFile(ctx, p, client.O_RDWR|client.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range []int{0, 30 << 20} {
			if _, err := f.WriteAt(data[at:at+256<<10], int64(at)); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		sums[p] = sha256.Sum256(data)
		sparseInos = append(sparseInos, f.Ino())
		l, err := c.GetLayout(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		holeChains = append(holeChains, placement.ChainID(l.Chains[2]))
	}
	// Files of one replica: those on node2's targets are lost while it is
	// away, and `sluice damaged` must list exactly them.
	if err := c.Mkdir(ctx, "/r1", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/r1", client.Layout{StripeSize: 1 << 20, StripeCount: 1, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	info, err := cl.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	onNode2 := map[uint32]bool{}
	for _, tg := range info.Targets {
		onNode2[uint32(tg.ID)] = tg.Node == "node2"
	}
	var lostFiles []string
	for i := range 8 {
		p := fmt.Sprintf("/r1/g%d", i)
		data := make([]byte, 1<<20+i)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		if err := proctest.WriteFile(ctx, c, p, data); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
		l, err := c.GetLayout(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if onNode2[l.Chains[0]] {
			lostFiles = append(lostFiles, p)
		}
	}
	if len(lostFiles) == 0 {
		t.Fatal("no file of one replica landed on node2: the check below would be vacuous")
	}
	check := func(when string) {
		t.Helper()
		for p, want := range sums {
			got, err := readFile(ctx, c, p)
			if err != nil || sha256.Sum256(got) != want {
				t.Fatalf("%s: read %s: %v (or SHA-256 differs)", when, p, err)
			}
		}
	}
	before := verifyReplicas(t, cl)
	holeOnNode2 := false
	for _, ch := range info.Chains {
		for _, id := range holeChains {
			for _, r := range ch.Replicas {
				if ch.ID == id && onNode2[uint32(r.Target)] {
					holeOnNode2 = true
				}
			}
		}
	}
	if !holeOnNode2 {
		t.Fatal("no sparse file's hole chunk has a replica on node2: the hole check below would be vacuous")
	}
	others := []string{cl.Nodes[0].DataDir, cl.Nodes[2].DataDir}
	sparseBefore := proctest.ChunkSpace(t, others, sparseInos...)

	node := cl.Nodes[1]
	node.Proc.Kill()
	killed := time.Now()
	var replacing time.Time // when a replacement was first seen
	cl.WaitFor(t, 90*time.Second, "chains rebuilt without node2", func(info *wire.ClusterInfo) bool {
		if replacing.IsZero() && !offlineOn(info, "node2") && !restoredOrDown(info) {
			replacing = time.Now()
		}
		return restored(info, "node2")
	})
	took := time.Since(killed)
	if replacing.IsZero() {
		replacing = time.Now()
	}
	// Figures, not assertions: the copy phase beside writing the same
	// files with 2 replicas in the first place.
	t.Logf("replica count restored %v after the kill (replace-after 3s); copy phase about %v for %.1f MiB of files, which took %v to write (ratio %.2f)",
		took.Round(time.Millisecond), time.Since(replacing).Round(time.Millisecond), float64(total)/(1<<20), wrote.Round(time.Millisecond),
		time.Since(replacing).Seconds()/wrote.Seconds())
	if n := verifyReplicas(t, cl); n != before {
		t.Errorf("after re-replication the chains hold %d chunks, before %d", n, before)
	}
	check("node2 down, chains rebuilt")
	// The rebuilt replicas hold the sparse files' data, not their holes:
	// a copy that wrote the holes as zeros would add 7 MiB per hole chunk.
	if added := proctest.ChunkSpace(t, others, sparseInos...) - sparseBefore; added > 4<<20 {
		t.Errorf("rebuilding the sparse files' replicas added %d bytes of chunk data on the other nodes: the holes were copied", added)
	} else {
		t.Logf("rebuilding the sparse files' replicas added %d bytes of chunk data (their data, not their holes)", added)
	}
	if out := status(t, cl); strings.Contains(out, "offline") || strings.Contains(out, "syncing") || !strings.Contains(out, "DOWN") || !strings.Contains(out, "UNAVAILABLE") {
		t.Errorf("sluice status with node2 down and its replicas rebuilt:\n%s", out)
	}
	out := damaged(t, cl)
	for _, p := range lostFiles {
		if !strings.Contains(out, p+"\t") {
			t.Errorf("sluice damaged does not list %s (one replica, on node2):\n%s", p, out)
		}
	}
	if strings.Contains(out, "/r2/") || !strings.Contains(out, fmt.Sprintf("%d damaged files", len(lostFiles))) {
		t.Errorf("sluice damaged lists other files than the %d on node2's targets:\n%s", len(lostFiles), out)
	}

	cl.Restart(node)
	cl.WaitHealthy(t, 60*time.Second)
	info, err = cl.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !restored(info, "node2") {
		t.Errorf("node2's return changed the rebuilt chains: %+v", info.Chains)
	}
	check("node2 back")
	if out := damaged(t, cl); !strings.Contains(out, "no damaged files") {
		t.Errorf("sluice damaged after node2 returned:\n%s", out)
	}
	if out := status(t, cl); strings.Contains(out, "DOWN") || strings.Contains(out, "offline") {
		t.Errorf("sluice status after node2 returned:\n%s", out)
	}
	// Its copies of the chains it was replaced in are stale: discarded.
	deadline := time.Now().Add(20 * time.Second)
	for {
		stale, err := filepath.Glob(filepath.Join(node.DataDir, "targets", "*", "chains", "*"))
		if err != nil {
			t.Fatal(err)
		}
		if len(stale) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node2 kept its stores of chains it left: %v", stale)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
