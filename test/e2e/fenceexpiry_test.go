package e2e

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// fenceFiles returns the fence files of data ID id on every target of the
// server.
func fenceFiles(t *testing.T, dataDir string, id uint64) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dataDir, "targets", "*", "fences", fmt.Sprintf("%016x.*", id)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFenceExpiry moves a file to a new layout while another client holds
// it open under the old one, and waits until the targets have removed the
// old chunks and then, a grace later (--chunk-fence-grace), their fences
// (ADR 0023, addendum). The holder, whose layout lease ran out meanwhile,
// must then write and read the file's new chunks: without the lease its
// write would make a chunk under the old data ID, which nothing reads
// (the write lost), and its read would read that chunk or a hole.
func TestFenceExpiry(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--chunk-fence-grace", "1s", "--http", "127.0.0.1:0")
	c := s.client()
	ctx := context.Background()
	s.mustCLI("mkdir", "/m")
	s.mustCLI("layout", "set", "/m", "--stripe-count", "1")
	orig := randBytes(77, 3<<20)
	writeFile(t, c, "/m/f", orig)
	fi, err := c.Stat(ctx, "/m/f")
	if err != nil {
		t.Fatal(err)
	}
	old := fi.Attr().Ino // the first data ID is the inode number

	holder, err := client.New(ctx, client.Options{Server: s.addr, LayoutLease: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	f, err := holder.OpenFile(ctx, "/m/f", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	if _, err := f.ReadAt(buf, 1<<20); err != nil || !bytes.Equal(buf, orig[1<<20:1<<20+len(buf)]) {
		t.Fatalf("holder's first read: %v, equal %v", err, bytes.Equal(buf, orig[1<<20:1<<20+len(buf)]))
	}

	s.mustCLI("migrate", "--stripe-count", "2", "--stripe-size", "1M", "/m/f")
	waitNoChunks(t, dir, old, "the chunks of the old layout")
	for deadline := time.Now().Add(60 * time.Second); len(fenceFiles(t, dir, old)) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("fences of the old layout still there: %v", fenceFiles(t, dir, old))
		}
	}

	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n := proctest.MetricSum(proctest.Metrics(t, admin), "sluice_target_fences_expired_total"); n == 0 {
		t.Error("the expired fences are not counted (sluice_target_fences_expired_total is 0)")
	}

	patch := bytes.Repeat([]byte("after the fences went "), 3000)
	want := bytes.Clone(orig)
	copy(want[1<<20:], patch)
	if _, err := f.WriteAt(patch, 1<<20); err != nil {
		t.Fatalf("holder's write: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("holder's sync: %v", err)
	}
	if m := dataChunks(t, dir, old); len(m) > 0 {
		t.Fatalf("the holder's write made chunks under the old data ID %d: %v", old, m)
	}
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("holder reads its own write back: %v, equal %v", err, bytes.Equal(got, want))
	}
	fresh := s.client()
	got, err = readFile(fresh, "/m/f")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("another client reads the holder's write: %v, equal %v (%d bytes)", err, bytes.Equal(got, want), len(got))
	}
	l, err := fresh.GetLayout(ctx, "/m/f")
	if err != nil || l.Data == old || l.StripeCount != 2 {
		t.Fatalf("layout after the migration: %+v, %v", l, err)
	}
}

// TestRemovedWhileOpen: a client holds a file open while another removes
// it; once the holder's layout lease ran out, its reads and writes of the
// file fail with "not found" whether or not the garbage collector removed
// the chunks yet (ADR 0023, addendum; before the lease, a read that finds
// a chunk short, or a write's commit, finds the file gone too).
func TestRemovedWhileOpen(t *testing.T) {
	s := startServer(t, "")
	c := s.client()
	ctx := context.Background()
	data := randBytes(78, 1<<20)
	writeFile(t, c, "/g", data)
	holder, err := client.New(ctx, client.Options{Server: s.addr, LayoutLease: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	f, err := holder.OpenFile(ctx, "/g", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, data[:4096]) {
		t.Fatalf("first read: %v", err)
	}
	if err := c.Remove(ctx, "/g"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the holder's lease runs out
	if _, err := f.ReadAt(buf, 8192); errs.CodeOf(err) != errs.NotFound {
		t.Errorf("read of the removed file: %v, want not found", err)
	}
	_, err = f.WriteAt([]byte("lost?"), 8192)
	if err == nil {
		err = f.Sync()
	}
	if errs.CodeOf(err) != errs.NotFound {
		t.Errorf("write of the removed file: %v, want not found", err)
	}
}
