package checkpoint

import (
	"bytes"
	"context"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestStagedSizeAfterReopen: a File opened on a file whose staged writes
// have not drained reports the staged size (found by TestFsxAbsorb, seed
// 32: File.Stat after a reopen gave the service's older size), and the
// data drains whole. Staging on a disk: no data file is reused there.
func TestStagedSizeAfterReopen(t *testing.T) {
	cl, addr, other := absorbCluster(t)
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Server: addr, StagingDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	node := cl.Nodes[0].Proc
	want := make([]byte, 0, 2800793)
	f, err := c.OpenFile(ctx, "/ckpt/f0", client.O_RDWR|client.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	write := func(off, n int) {
		t.Helper()
		b := bytes.Repeat([]byte{byte(off)}, n)
		if _, err := f.WriteAt(b, int64(off)); err != nil {
			t.Fatal(err)
		}
		if end := off + n; end > len(want) {
			want = append(want, make([]byte, end-len(want))...)
		}
		copy(want[off:], b)
	}
	write(0, 131072)
	write(952742, 131073)
	if err := f.Truncate(ctx, 720898); err != nil {
		t.Fatal(err)
	}
	want = want[:720898]
	write(720907, 12288)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	node.Pause(t) // the rest stays staged until the end
	defer node.Resume()
	write(2799617, 1176)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := c.OpenFile(ctx, "/ckpt/f0", client.O_RDWR|client.O_CREATE, 0o644) // as fsx reopens
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := g.Stat(); err != nil || fi.Size() != int64(len(want)) {
		t.Fatalf("File.Stat after the reopen: %v; want size %d", sizeOf(fi, err), len(want))
	}
	if fi, err := c.Stat(ctx, "/ckpt/f0"); err != nil || fi.Size() != int64(len(want)) {
		t.Fatalf("Client.Stat after the reopen: %v; want size %d", sizeOf(fi, err), len(want))
	}
	node.Resume()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := readFile(ctx, other, "/ckpt/f0"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the drain: %d bytes, %v; want %d (first difference at %d)", len(got), err, len(want), firstDiff(got, want))
	}
	if st := c.StagingStats(); st.InMemory || st.Recycled != 0 {
		t.Fatalf("staging on a disk: %+v; want no data file reused", st)
	}
}

func sizeOf(fi *client.FileInfo, err error) any {
	if err != nil {
		return err
	}
	return fi.Size()
}

// TestRecreateStagedFile: creating again (O_TRUNC) a file whose data this
// client staged and has not drained cuts it: the file then holds only the
// new bytes. Before 2026-12-04 the create's answer carried the service's
// size (without the staged data), the truncate was skipped, and the file
// kept the old length with the old bytes after the new ones (found by
// TestRandomRenames).
func TestRecreateStagedFile(t *testing.T) {
	addr, other := absorbServer(t)
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Server: addr, StagingDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, sizes := range [][2]int{{3384, 2165}, {40000, 3000}, {300000, 2000}, {300000, 40000}, {5000, 300000}} {
		a, b := bytes.Repeat([]byte{1}, sizes[0]), bytes.Repeat([]byte{2}, sizes[1])
		if err := proctest.WriteFile(ctx, c, "/ckpt/e", a); err != nil {
			t.Fatal(err)
		}
		if err := proctest.WriteFile(ctx, c, "/ckpt/e", b); err != nil {
			t.Fatal(err)
		}
		if got, err := proctest.ReadFile(ctx, c, "/ckpt/e"); err != nil || !bytes.Equal(got, b) {
			t.Errorf("sizes %v: the writer read %d bytes back, %v; want the %d new ones", sizes, len(got), err, len(b))
		}
		if err := c.WaitStaged(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := proctest.ReadFile(ctx, other, "/ckpt/e"); err != nil || !bytes.Equal(got, b) {
			t.Errorf("sizes %v: another client read %d bytes after the drain, %v; want the %d new ones", sizes, len(got), err, len(b))
		}
	}
}
