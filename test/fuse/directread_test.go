package fuse

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chunkFDs counts the descriptors process pid holds on chunk files.
func chunkFDs(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.Contains(l, "/chunks/") {
			n++
		}
	}
	return n
}

// TestDirectReadMountReleases: `sluice mount --direct-read` reads chunks
// from their files on this machine (ADR 0025), holding their descriptors
// while a file is open, and gives them back when the kernel releases the
// file. (It kept them: after about 10,000 files read, with 20,000
// descriptors allowed, every open failed with EMFILE.)
func TestDirectReadMountReleases(t *testing.T) {
	requireFUSE(t)
	srv := startServer(t, "", "")
	c := srv.client()
	ctx := context.Background()
	const files = 100
	content := func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8), 7}, 64<<10/3) }
	if err := c.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range files {
		f, err := c.Create(ctx, fmt.Sprintf("/d/f%03d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(content(i)); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	m := startMount(t, srv.addr, "--direct-read")
	pid := m.cmd.Process.Pid
	base := chunkFDs(t, pid)

	// One file held open after a read: the mount holds its chunk's files.
	held, err := os.Open(m.path("d", "f000"))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 64<<10)
	if n, err := held.Read(b); err != nil || !bytes.Equal(b[:n], content(0)) {
		t.Fatalf("read f000: %d bytes, %v, or wrong bytes", n, err)
	}
	if got := chunkFDs(t, pid); got < base+1 {
		held.Close()
		t.Fatalf("the mount holds %d chunk descriptors with a file open after a read (%d before): it did not read directly", got, base)
	}
	held.Close()

	for i := 1; i < files; i++ {
		got, err := os.ReadFile(m.path("d", fmt.Sprintf("f%03d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, content(i)) {
			t.Fatalf("f%03d: wrong bytes through the mount", i)
		}
	}
	// RELEASE follows close(2) asynchronously: wait for the mount to have
	// given every descriptor back.
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := chunkFDs(t, pid)
		if got <= base {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mount still holds %d chunk descriptors (%d before) after %d files were read and closed", got, base, files)
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.stop()
}
