package fuse

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/client"
)

// TestSeekDataHoleMount: lseek(2)'s SEEK_DATA and SEEK_HOLE through the
// mount find a striped file's data and holes (FUSE_LSEEK, answered from
// the chunks' map), ENXIO past the end, also while the file is open for
// writing with a dirty page of a shared mapping in a hole (the mount has
// the kernel write it back before it answers).
func TestSeekDataHoleMount(t *testing.T) {
	requireFUSE(t)
	srv := startServer(t, "", "")
	c := srv.client()
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/s", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/s", client.Layout{StripeCount: 4, StripeSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	m := startMount(t, srv.addr)
	const kib = 1 << 10
	w, err := os.OpenFile(m.path("s", "f"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		off int64
		n   int
	}{{1 << 20, 64 * kib}, {200 * kib, 100 * kib}, {0, 10}} {
		if _, err := w.WriteAt(bytes.Repeat([]byte{'d'}, p.n), p.off); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Truncate(2 << 20); err != nil {
		t.Fatal(err)
	}
	seek := func(f *os.File, off int64, whence int) int64 {
		t.Helper()
		got, err := unix.Seek(int(f.Fd()), off, whence)
		if errors.Is(err, unix.ENXIO) {
			return -1
		}
		if err != nil {
			t.Fatalf("lseek(%d, %d): %v", off, whence, err)
		}
		return got
	}
	// With the writer open, and a page of a shared mapping dirtied in a
	// hole and not synced: the mount makes the kernel write it back
	// before it answers (the page at 500 KiB lands in the 64 KiB block
	// at 448 KiB, which then holds data up to the page's end).
	if h := seek(w, 0, unix.SEEK_HOLE); h != 10 {
		t.Errorf("with the writer open: SEEK_HOLE from 0 = %d, want 10", h)
	}
	mm, err := unix.Mmap(int(w.Fd()), 0, 2<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	mm[500*kib] = 'm'
	if d := seek(w, 300*kib, unix.SEEK_DATA); d != 448*kib {
		t.Errorf("after a write through a mapping at 500 KiB: SEEK_DATA from 300 KiB = %d, want %d", d, 448*kib)
	}
	if err := unix.Munmap(mm); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(m.path("s", "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, k := range []struct {
		off    int64
		whence int
		want   int64
	}{
		{0, unix.SEEK_DATA, 0}, {0, unix.SEEK_HOLE, 10},
		{10, unix.SEEK_DATA, 192 * kib}, {192 * kib, unix.SEEK_HOLE, 300 * kib},
		{300 * kib, unix.SEEK_DATA, 448 * kib}, {448 * kib, unix.SEEK_HOLE, 504 * kib},
		{504 * kib, unix.SEEK_DATA, 1 << 20}, {1 << 20, unix.SEEK_HOLE, 1<<20 + 64*kib},
		{1<<20 + 64*kib, unix.SEEK_DATA, -1}, {1<<20 + 64*kib, unix.SEEK_HOLE, 1<<20 + 64*kib},
		{2 << 20, unix.SEEK_HOLE, -1}, {3 << 20, unix.SEEK_DATA, -1},
	} {
		if got := seek(r, k.off, k.whence); got != k.want {
			t.Errorf("lseek(%d, %s) = %d, want %d", k.off, map[int]string{unix.SEEK_DATA: "SEEK_DATA", unix.SEEK_HOLE: "SEEK_HOLE"}[k.whence], got, k.want)
		}
	}
	// The descriptor's offset moved to the answer: a read goes on from it.
	if got := seek(r, 10, unix.SEEK_DATA); got != 192*kib {
		t.Fatalf("SEEK_DATA from 10 = %d", got)
	}
	b := make([]byte, 8*kib)
	if n, err := r.Read(b); err != nil || n != len(b) || !bytes.Equal(b[:8*kib], make([]byte, 8*kib)) {
		t.Fatalf("read after SEEK_DATA: %d, %v (want the zeros before the write at 200 KiB)", n, err)
	}
}
