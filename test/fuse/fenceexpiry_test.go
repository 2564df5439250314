package fuse

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestMountFenceExpiry keeps a file open through the mount while another
// client migrates it, and waits until the targets removed the old chunks
// and then their fences (`--chunk-fence-grace 1s`). The mount's File,
// whose layout lease (`--layout-lease 200ms`) ran out meanwhile, must then
// send a write through the open descriptor to the new chunks: another
// client reads it, and no chunk is made under the old data ID (ADR 0023,
// addendum).
func TestMountFenceExpiry(t *testing.T) {
	requireFUSE(t)
	_, mp, dataDir, addr := startServeMount(t, "--chunk-fence-grace", "1s", "--layout-lease", "200ms")
	c := proctest.Client(t, addr)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(2612032, 1))
	orig := make([]byte, 3<<20)
	for i := range orig {
		orig[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(filepath.Join(mp, "f"), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := c.Stat(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	old := fi.Attr().Ino // the first data ID is the inode number
	f, err := os.OpenFile(filepath.Join(mp, "f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, 1<<20); err != nil || !bytes.Equal(buf, orig[1<<20:1<<20+4096]) {
		t.Fatalf("first read through the mount: %v", err)
	}

	if _, err := c.Migrate(ctx, "/f", client.MigrateSpec{StripeCount: 2, StripeSize: 1 << 20}, client.MigrateOptions{}); err != nil {
		t.Fatal(err)
	}
	glob := func(pat string) []string {
		m, err := filepath.Glob(filepath.Join(dataDir, "targets", "*", pat))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	oldChunks := fmt.Sprintf("chunks/%02x/%016x.*.sum", old&0xff, old)
	oldFences := fmt.Sprintf("fences/%016x.*", old)
	for deadline := time.Now().Add(60 * time.Second); len(glob(oldChunks))+len(glob(oldFences)) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the old layout's chunks %v and fences %v still there", glob(oldChunks), glob(oldFences))
		}
	}

	patch := bytes.Repeat([]byte("written after the fences went "), 2000)
	want := bytes.Clone(orig)
	copy(want[1<<20:], patch)
	if _, err := f.WriteAt(patch, 1<<20); err != nil {
		t.Fatalf("write through the mount: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync through the mount: %v", err)
	}
	if m := glob(oldChunks); len(m) > 0 {
		t.Fatalf("the mount's write made chunks under the old data ID %d: %v", old, m)
	}
	rf, err := proctest.Client(t, addr).Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	got := make([]byte, len(want))
	if n, err := rf.ReadAt(got, 0); n != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("another client reads %d bytes (%v), equal to the mount's write: %v", n, err, bytes.Equal(got, want))
	}
}
