package cluster

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/wire"
)

// writeReplicated writes data to /r/f in a directory of 2-replica chains
// (stripe count 1) and returns the file's inode number (its first data
// ID) and its layout.
func writeReplicated(t *testing.T, c *client.Client, data []byte) (uint64, client.Layout) {
	t.Helper()
	ctx := context.Background()
	if err := c.MkdirAll(ctx, "/r", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/r", client.Layout{StripeCount: 1, Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	if err := proctest.WriteFile(ctx, c, "/r/f", data); err != nil {
		t.Fatal(err)
	}
	fi, err := c.Stat(ctx, "/r/f")
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.GetLayout(ctx, "/r/f")
	if err != nil || len(l.Chains) != 1 {
		t.Fatalf("layout of /r/f: %+v, %v", l, err)
	}
	return fi.Attr().Ino, l
}

// chainFiles returns the files matching kind (a pattern relative to a
// replicated chain's store) in the chain stores of the nodes.
func chainFiles(t *testing.T, nodes []*proctest.Member, kind string) []string {
	t.Helper()
	var all []string
	for _, n := range nodes {
		m, err := filepath.Glob(filepath.Join(n.DataDir, "targets", "*", "chains", "*", kind))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, m...)
	}
	return all
}

// dataFiles returns the chainFiles patterns of data ID data's chunk
// (its checksum files) and of its fences.
func dataFiles(data uint64) (chunks, fences string) {
	return fmt.Sprintf("chunks/%02x/%016x.*.sum", data&0xff, data), fmt.Sprintf("fences/%016x.*", data)
}

// readBack fails t unless a new client of the cluster reads want from
// /r/f, whole.
func readBack(t *testing.T, cl *proctest.Cluster, want []byte) {
	t.Helper()
	f, err := proctest.Client(t, cl.MetaAddrs()).Open(context.Background(), "/r/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, len(want))
	if n, err := f.ReadAt(got, 0); n != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("another client reads %d bytes of /r/f (%v), equal to what it should hold: %v", n, err, bytes.Equal(got, want))
	}
}

// TestReplicatedFenceExpiry migrates a file of 2-replica chains while
// another client holds it open, on storage nodes that drop a removed
// chunk's fence a second after the removal (`sluice target
// --chunk-fence-grace 1s`): the replicated chains' stores, not only the
// targets' own, must drop them, and the holder, whose layout lease ran out
// meanwhile, must write to the new chunks on both replicas (ADR 0023,
// addendum).
func TestReplicatedFenceExpiry(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{
		NodeArgs: func(int) []string { return []string{"--chunk-fence-grace", "1s"} },
	})
	ctx := context.Background()
	c := proctest.Client(t, cl.MetaAddrs())
	orig := bytes.Repeat([]byte("replicated and fenced "), 150_000)
	old, _ := writeReplicated(t, c, orig) // the first data ID is the inode number

	holder, err := client.New(ctx, client.Options{Server: cl.MetaAddrs(), LayoutLease: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	f, err := holder.OpenFile(ctx, "/r/f", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, 1<<20); err != nil || !bytes.Equal(buf, orig[1<<20:1<<20+4096]) {
		t.Fatalf("holder's first read: %v", err)
	}

	glob := func(kind string) []string { return chainFiles(t, cl.Nodes, kind) }
	oldChunks, oldFences := dataFiles(old)
	if n := len(glob(oldChunks)); n != 2 {
		t.Fatalf("%d replicas of the file's chunk before the migration, want 2", n)
	}
	if _, err := c.Migrate(ctx, "/r/f", client.MigrateSpec{StripeCount: 2, StripeSize: 1 << 20}, client.MigrateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); len(glob(oldChunks))+len(glob(oldFences)) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the old layout's chunks %v and fences %v still there", glob(oldChunks), glob(oldFences))
		}
	}

	patch := bytes.Repeat([]byte("after the replicas' fences went "), 2000)
	want := bytes.Clone(orig)
	copy(want[1<<20:], patch)
	if _, err := f.WriteAt(patch, 1<<20); err != nil {
		t.Fatalf("holder's write: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("holder's sync: %v", err)
	}
	if m := glob(oldChunks); len(m) > 0 {
		t.Fatalf("the holder's write made chunks under the old data ID %d: %v", old, m)
	}
	readBack(t, cl, want)
	if n := verifyReplicas(t, cl); n == 0 {
		t.Fatal("no replicated chunk was compared")
	}
}

// TestFencesResynced migrates a file of 2-replica chains while a storage
// node holding one replica of its chunk is down: the live replica freezes
// the old chunk and removes it, the fence stays. When the node returns,
// the resync must remove its stale copy of the chunk and give it the
// tail's fence, so that it refuses a client with the old layout as the
// other replica does (before, a replica that joined a chain never got the
// fences frozen without it).
func TestFencesResynced(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{})
	ctx := context.Background()
	c := proctest.Client(t, cl.MetaAddrs())
	orig := bytes.Repeat([]byte("fenced while away "), 100_000)
	old, l := writeReplicated(t, c, orig)
	info, err := cl.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodeOf := map[uint32]string{}
	for _, tg := range info.Targets {
		nodeOf[uint32(tg.ID)] = tg.Node
	}
	var away *proctest.Member
	for _, ch := range info.Chains {
		if uint32(ch.ID) == l.Chains[0] {
			tail := ch.Replicas[len(ch.Replicas)-1]
			for _, n := range cl.Nodes {
				if n.Name == nodeOf[uint32(tail.Target)] {
					away = n
				}
			}
		}
	}
	if away == nil {
		t.Fatalf("no node found for chain %d in %+v", l.Chains[0], info)
	}
	on := func(n *proctest.Member, kind string) []string { return chainFiles(t, []*proctest.Member{n}, kind) }
	var rest []*proctest.Member
	for _, n := range cl.Nodes {
		if n != away {
			rest = append(rest, n)
		}
	}
	others := func(kind string) []string { return chainFiles(t, rest, kind) }
	oldChunks, oldFences := dataFiles(old)

	away.Proc.Kill()
	cl.WaitFor(t, 30*time.Second, away.Name+" taken out of its chains", func(info *wire.ClusterInfo) bool { return offlineOn(info, away.Name) })
	if _, err := c.Migrate(ctx, "/r/f", client.MigrateSpec{StripeCount: 2, StripeSize: 1 << 20}, client.MigrateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); len(others(oldChunks)) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the old chunk still on the live replica: %v", others(oldChunks))
		}
	}
	if len(others(oldFences)) != 1 || len(on(away, oldChunks)) != 1 || len(on(away, oldFences)) != 0 {
		t.Fatalf("before the return: live replica's fences %v; the away node's chunks %v and fences %v", others(oldFences), on(away, oldChunks), on(away, oldFences))
	}

	cl.Restart(away)
	cl.WaitHealthy(t, 60*time.Second)
	for deadline := time.Now().Add(60 * time.Second); len(on(away, oldChunks)) > 0 || len(on(away, oldFences)) == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the resync the returned node holds the old chunk %v and fences %v; want no chunk and the fence", on(away, oldChunks), on(away, oldFences))
		}
	}
	if n := verifyReplicas(t, cl); n == 0 {
		t.Fatal("no replicated chunk was compared")
	}
	readBack(t, cl, orig)
}
