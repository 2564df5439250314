package fuse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// startServeMount runs `sluice serve --mount MP [args]` and returns the
// process, the mountpoint, the data dir and the served address.
func startServeMount(t *testing.T, args ...string) (*proctest.Proc, string, string, string) {
	t.Helper()
	return startServeMountOf(t, binary, args...)
}

// startServeMountOf is startServeMount with another sluice binary (to
// compare builds in one run).
func startServeMountOf(t *testing.T, bin string, args ...string) (*proctest.Proc, string, string, string) {
	t.Helper()
	mp := newMountpoint(t)
	dataDir := t.TempDir()
	args = append([]string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--http", "", "--mount", mp}, args...)
	p, _ := proctest.Start(t, bin, nil, regexp.MustCompile(`mounted on (\S+)`), args...)
	t.Cleanup(func() {
		p.Cmd.Process.Signal(syscall.SIGCONT) // in case the test stopped it and failed
		p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Exited():
		case <-time.After(30 * time.Second):
			t.Errorf("sluice serve did not exit within 30 s of SIGTERM")
		}
		for i := 0; isMounted(mp) && i < 50; i++ {
			syscall.Unmount(mp, syscall.MNT_DETACH)
			time.Sleep(20 * time.Millisecond)
		}
	})
	m := readyLine.FindStringSubmatch(p.Logs())
	if m == nil {
		t.Fatalf("no serving line: %s", p.Logs())
	}
	return p, mp, dataDir, m[1]
}

// readWhileStopped reads f whole while the server process is stopped
// (SIGSTOP). Only a passthrough file can be read then: any request to the
// server would wait until it is continued, which happens after 10 s.
func readWhileStopped(t *testing.T, p *proctest.Proc, f *os.File, size int) ([]byte, bool) {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b := make([]byte, size+1)
		n, err := f.ReadAt(b, 0)
		if n == size && err != nil {
			err = nil // io.EOF at the end
		}
		done <- result{b[:n], err}
	}()
	var r result
	stopped := true
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		stopped = false
	}
	if err := p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if !stopped {
		r = <-done
	}
	if r.err != nil {
		t.Fatalf("read %s: %v", f.Name(), r.err)
	}
	return r.b, stopped
}

// checkPassthrough reads the file at path whole and compares it with
// want; with passthrough it reads while srv (the process serving the
// chunks) is stopped, and the read must not have needed it.
func checkPassthrough(t *testing.T, srv *proctest.Proc, path string, want []byte, passthrough bool) {
	t.Helper()
	h, err := os.Open(path)
	must(t, err)
	defer h.Close()
	var got []byte
	if passthrough {
		var direct bool
		got, direct = readWhileStopped(t, srv, h, len(want))
		if !direct {
			t.Errorf("%s: reading it needed the server: not passed through", path)
		}
	} else {
		got = make([]byte, len(want)+1)
		n, _ := h.ReadAt(got, 0)
		got = got[:n]
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: read %d bytes, want %d, equal %v", path, len(got), len(want), bytes.Equal(got, want))
	}
}

// TestPassthrough checks `sluice serve --mount --passthrough`: files held
// whole by one local target are read by the kernel straight from the chunk
// file (they read correctly while the server process is stopped), striped
// files are not, writers are refused while a file is open for passthrough,
// changes are seen by the next open, and a corrupt chunk is never handed
// to the kernel.
func TestPassthrough(t *testing.T) {
	requireFUSE(t)
	p, mp, dataDir, addr := startServeMount(t, "--passthrough")
	c := proctest.Client(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must(t, os.Mkdir(filepath.Join(mp, "one"), 0o755))
	must(t, c.SetLayout(ctx, "/one", client.Layout{StripeCount: 1}))
	// A progressive layout (ADR 0021): 128 KiB on one target, the rest on two.
	must(t, os.Mkdir(filepath.Join(mp, "pfl"), 0o755))
	must(t, c.SetLayout(ctx, "/pfl", client.Layout{Components: []client.LayoutComponent{
		{End: 128 << 10, StripeSize: 1 << 20, StripeCount: 1}, {StripeSize: 64 << 10, StripeCount: 2}}}))

	r := rand.New(rand.NewPCG(1, 2))
	content := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	files := []struct {
		path        string
		data        []byte
		passthrough bool
	}{
		{"one/big", content(5<<20 + 123), true}, // stripe count 1: one chunk
		{"small", content(200 << 10), true},     // within the first stripe
		{"striped", content(3<<20 + 7), false},  // over 4 chunks
		{"one/sparse", nil, false},              // a hole at the end
		{"empty", []byte{}, false},              // nothing to pass through
		{"pfl/small", content(100 << 10), true}, // within the first component
		{"pfl/past", content(300 << 10), false}, // past it: other chunks
	}
	for _, f := range files {
		if f.data != nil {
			must(t, os.WriteFile(filepath.Join(mp, f.path), f.data, 0o644))
		}
	}
	must(t, os.WriteFile(filepath.Join(mp, "one/sparse"), []byte("head"), 0o644))
	must(t, os.Truncate(filepath.Join(mp, "one/sparse"), 1<<20))
	files[3].data = append([]byte("head"), make([]byte, 1<<20-4)...)

	for _, f := range files {
		checkPassthrough(t, p, filepath.Join(mp, f.path), f.data, f.passthrough)
	}

	// A writer is refused while the file is open for passthrough reading;
	// after the last close it may write, and the next open sees the change.
	path := filepath.Join(mp, "small")
	reader, err := os.Open(path)
	must(t, err)
	if _, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0); !errors.Is(err, syscall.ETXTBSY) {
		t.Errorf("write open of a file open for passthrough: %v, want ETXTBSY", err)
	}
	got := make([]byte, 200<<10)
	if n, _ := reader.ReadAt(got, 0); n != len(got) || !bytes.Equal(got, files[1].data) {
		t.Errorf("the refused O_TRUNC open changed the file: read %d bytes", n)
	}
	reader.Close()
	changed := content(100 << 10)
	must(t, os.WriteFile(path, changed, 0o644))
	// The kernel sends the writer's release after its close returned
	// (RELEASE is asynchronous): an open that reaches the mount first
	// finds the writer's handle still open and is served without
	// passthrough, correctly. Then open again once it is gone.
	var direct bool
	for try := 0; try < 3 && !direct; try++ {
		if try > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		h, err := os.Open(path)
		must(t, err)
		got, direct = readWhileStopped(t, p, h, len(changed))
		h.Close()
		if !bytes.Equal(got, changed) {
			t.Fatalf("after a rewrite: read %d bytes, want %d, equal %v", len(got), len(changed), bytes.Equal(got, changed))
		}
	}
	if !direct {
		t.Error("after a rewrite: not passed through")
	}

	// A flipped bit in the chunk file: the open checks the checksums, so
	// the kernel never reads the bad bytes directly; the read fails.
	var st syscall.Stat_t
	must(t, syscall.Stat(path, &st))
	dat := findChunk(t, dataDir, st.Ino)
	raw, err := os.ReadFile(dat)
	must(t, err)
	raw[1000] ^= 0x40
	must(t, os.WriteFile(dat, raw, 0o644))
	dropCaches() // the mount's page cache may hold the good bytes
	bad, err := os.ReadFile(path)
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("read of a corrupt file: %d bytes, %v; want EIO", len(bad), err)
	}
}

// findChunk returns the data file of slot 0 of inode ino under dataDir.
func findChunk(t *testing.T, dataDir string, ino uint64) string {
	t.Helper()
	name := fmt.Sprintf("%016x.%08x.dat", ino, 0)
	var found string
	filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == name {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no chunk file %s under %s", name, dataDir)
	}
	return found
}

// TestPassthroughReadThenWrite: a file read through passthrough and
// closed can be opened for writing at once, though the kernel sends the
// reader's RELEASE after close(2) returned (the mount waits for it rather
// than answering ETXTBSY); every rewrite reads back whole.
func TestPassthroughReadThenWrite(t *testing.T) {
	requireFUSE(t)
	_, mp, _, addr := startServeMount(t, "--passthrough")
	c := proctest.Client(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must(t, os.Mkdir(filepath.Join(mp, "one"), 0o755))
	must(t, c.SetLayout(ctx, "/one", client.Layout{StripeCount: 1}))
	path := filepath.Join(mp, "one", "f")
	want := bytes.Repeat([]byte{0}, 100<<10)
	must(t, os.WriteFile(path, want, 0o644))
	for i := range 300 {
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("round %d: read %d bytes, %v; want %d", i, len(got), err, len(want))
		}
		want = bytes.Repeat([]byte{byte(i + 1)}, 100<<10+i)
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatalf("round %d: rewrite right after a passthrough read: %v", i, err)
		}
	}
}

// TestPassthroughSeparateMount checks `sluice mount --passthrough`, a mount
// in its own process beside `sluice serve` on the same machine: files held
// whole by one chunk of a local target are read by the kernel straight from
// the chunk file, which the server hands over its direct-read socket (they
// read while the server process is stopped), striped files are not; and a
// file held open for passthrough keeps reading its own bytes after the
// server is killed with SIGKILL and restarted, the file removed and new
// files written, whose chunks could have recycled its chunk file had the
// server not marked it (chunk.Store.OpenShared).
func TestPassthroughSeparateMount(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "")
	m := startMount(t, s.addr, "--passthrough")
	c := s.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	must(t, c.MkdirAll(ctx, "/one", 0o755))
	must(t, c.SetLayout(ctx, "/one", client.Layout{StripeCount: 1}))
	r := rand.New(rand.NewPCG(3, 4))
	content := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	files := []struct {
		path        string
		data        []byte
		passthrough bool
	}{
		{"one/big", content(5<<20 + 123), true},
		{"small", content(200 << 10), true},
		{"striped", content(3<<20 + 7), false},
	}
	for _, f := range files {
		must(t, proctest.WriteFile(ctx, c, "/"+f.path, f.data))
	}
	dropCaches()
	for _, f := range files {
		checkPassthrough(t, s.proc, m.path(f.path), f.data, f.passthrough)
	}

	// A file held open across a restart of the server, then removed.
	x := content(1 << 20)
	must(t, proctest.WriteFile(ctx, c, "/one/x", x))
	h, err := os.Open(m.path("one", "x"))
	must(t, err)
	defer h.Close()
	if got, direct := readWhileStopped(t, s.proc, h, len(x)); !direct || !bytes.Equal(got, x) {
		t.Fatalf("one/x: passed through %v, read right %v", direct, bytes.Equal(got, x))
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(m.path("one", "x"), &st))
	dat := findChunk(t, s.dataDir, st.Ino)
	if fi, err := os.Stat(dat); err != nil || fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("chunk file %s handed to the mount: %v, %v; want the sticky bit (never recycled)", dat, fi, err)
	}
	s.kill()
	s = startServer(t, s.dataDir, s.addr)
	c = s.client()
	must(t, c.Remove(ctx, "/one/x"))
	for i := 0; ; i++ {
		if _, err := os.Stat(dat); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if i == 600 {
			t.Fatalf("chunk file %s still there 60 s after its file was removed", dat)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// New chunks take recycled files of removed ones (ADR 0024): none
	// may be x's, which the kernel still reads.
	for i := range 8 {
		must(t, proctest.WriteFile(ctx, c, fmt.Sprintf("/one/y%d", i), content(1<<20)))
	}
	got := make([]byte, len(x)+1)
	n, err := h.ReadAt(got, 0)
	if n != len(x) || !bytes.Equal(got[:n], x) {
		t.Fatalf("an open file removed after a restart of the server: read %d bytes (%v), equal to its own %v", n, err, bytes.Equal(got[:n], x))
	}
}
