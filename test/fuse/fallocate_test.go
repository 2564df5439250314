package fuse

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestFallocate runs util-linux's fallocate(1) with each mode a FUSE
// file system receives on the same files in a local directory and through
// a mount, and compares the files byte for byte and their sizes: grow,
// keep-size (nothing changes), punch a hole, zero a range inside and past
// the end. A second mount sees the grown size. Collapse (which the kernel
// passes on) is refused with EOPNOTSUPP, and the file is left as it was.
// Punching 6 MiB of an 8 MiB file frees at least 5 MiB of its chunks.
func TestFallocate(t *testing.T) {
	requireFUSE(t)
	srv := startServer(t, "", "")
	m1 := startMount(t, srv.addr)
	m2 := startMount(t, srv.addr)
	local := t.TempDir()
	dirs := []string{local, m1.path()}

	pattern := make([]byte, 1<<20+100)
	for i := range pattern {
		pattern[i] = byte(i*7 + i>>12 + 1)
	}
	steps := [][]string{
		{"-l", "64M", "big"},                               // a new file of 64 MiB of zeros
		{"-n", "-l", "128M", "big"},                        // keep size: nothing visible
		{"-l", "1M", "big"},                                // shorter than the file: nothing
		{"-p", "-o", "4000", "-l", "70000", "pat"},         // a hole inside
		{"-p", "-o", "1048000", "-l", "900000", "pat"},     // a hole across the end
		{"-z", "-o", "100", "-l", "50", "pat"},             // zeros inside
		{"-z", "-n", "-o", "1048500", "-l", "5000", "pat"}, // zeros across the end, size kept
		{"-z", "-o", "1048000", "-l", "100000", "pat"},     // zeros across the end: grows
		{"-o", "2000000", "-l", "1", "pat"},                // grows by a sparse tail
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "pat"), pattern, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			run(t, d, "fallocate", s...)
		}
	}
	for _, name := range []string{"big", "pat"} {
		want, err := os.ReadFile(filepath.Join(local, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(m1.path(name))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d bytes through the mount, %d in the local directory", name, len(got), len(want))
		}
		if i := firstDiff(got, want); i < len(got) {
			t.Fatalf("%s: byte %d is %#x through the mount, %#x in the local directory", name, i, got[i], want[i])
		}
	}

	// Another mount sees the size (once the change reaches it).
	deadline := time.Now().Add(30 * time.Second)
	for {
		fi, err := os.Stat(m2.path("big"))
		if err == nil && fi.Size() == 64<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("second mount: stat big: %v, %v; want 64 MiB", fi, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Collapse is refused and changes nothing.
	before, err := os.ReadFile(m1.path("pat"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := runErr(m1.path(), nil, "fallocate", "-c", "-o", "0", "-l", "4096", "pat")
	if err == nil || !strings.Contains(out, "not supported") {
		t.Fatalf("fallocate -c through the mount: %v, %q; want Operation not supported", err, out)
	}
	f, err := os.OpenFile(m1.path("pat"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_INSERT_RANGE, 0, 4096); err != unix.EOPNOTSUPP {
		t.Fatalf("insert range: %v, want EOPNOTSUPP", err)
	}
	after, err := os.ReadFile(m1.path("pat"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("a refused fallocate changed the file")
	}

	// A punched range gives its whole blocks' space back on the targets
	// (since 2026-12-05; before, it was written as zeros).
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = byte(i*13 + i>>16 + 1)
	}
	if err := os.WriteFile(m1.path("punch"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, m1.path(), "sync", "punch")
	fi, err := os.Stat(m1.path("punch"))
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	held := proctest.ChunkSpace(t, []string{srv.dataDir}, ino)
	run(t, m1.path(), "fallocate", "-p", "-o", "1M", "-l", "6M", "punch")
	if freed := held - proctest.ChunkSpace(t, []string{srv.dataDir}, ino); freed < 5<<20 {
		t.Fatalf("punching 6 MiB of an 8 MiB file freed %d bytes of its chunks' %d", freed, held)
	}
	got, err := os.ReadFile(m1.path("punch"))
	if err != nil {
		t.Fatal(err)
	}
	clear(big[1<<20 : 7<<20])
	if i := firstDiff(got, big); i < len(got) || len(got) != len(big) {
		t.Fatalf("after the punch: %d bytes, first difference at %d", len(got), i)
	}
}
