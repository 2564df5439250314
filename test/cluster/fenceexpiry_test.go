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
)

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
	if err := c.MkdirAll(ctx, "/r", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/r", client.Layout{StripeCount: 1, Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	orig := bytes.Repeat([]byte("replicated and fenced "), 150_000)
	if err := proctest.WriteFile(ctx, c, "/r/f", orig); err != nil {
		t.Fatal(err)
	}
	l, err := c.GetLayout(ctx, "/r/f")
	if err != nil {
		t.Fatal(err)
	}
	old := l.Data
	if old == 0 {
		fi, err := c.Stat(ctx, "/r/f")
		if err != nil {
			t.Fatal(err)
		}
		old = fi.Attr().Ino
	}

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

	glob := func(kind string) []string {
		var all []string
		for _, n := range cl.Nodes {
			pat := filepath.Join(n.DataDir, "targets", "*", "chains", "*", kind)
			m, err := filepath.Glob(pat)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, m...)
		}
		return all
	}
	oldChunks := fmt.Sprintf("chunks/%02x/%016x.*.sum", old&0xff, old)
	oldFences := fmt.Sprintf("fences/%016x.*", old)
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
	rf, err := proctest.Client(t, cl.MetaAddrs()).Open(ctx, "/r/f")
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	got := make([]byte, len(want))
	if n, err := rf.ReadAt(got, 0); n != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("another client reads %d bytes (%v), equal to the holder's write: %v", n, err, bytes.Equal(got, want))
	}
	if n := verifyReplicas(t, cl); n == 0 {
		t.Fatal("no replicated chunk was compared")
	}
}
