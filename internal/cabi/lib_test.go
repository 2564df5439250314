package cabi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
)

var sluiceBin string

func TestMain(m *testing.M) { os.Exit(proctest.Main(m, &sluiceBin)) }

var readyLine = regexp.MustCompile(`serving on (\S+)`)

// serve starts `sluice serve` and returns its process and address.
func serve(t *testing.T) (*proctest.Proc, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a server")
	}
	return proctest.Start(t, sluiceBin, nil, readyLine, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "")
}

func connect(t *testing.T, l *Lib, addr string, timeout time.Duration) int64 {
	t.Helper()
	h, err := l.Connect(Options{Server: addr, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Disconnect(h) })
	return h
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// writeFiles writes files through the client library.
func writeFiles(t *testing.T, addr string, files map[string][]byte) {
	t.Helper()
	c := proctest.Client(t, addr)
	ctx := context.Background()
	for p, data := range files {
		if err := c.MkdirAll(ctx, dirOf(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := proctest.WriteFile(ctx, c, p, data); err != nil {
			t.Fatal(err)
		}
	}
}

func dirOf(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if got := Errno(err); got != want {
		t.Errorf("%s: %v (errno %v), want %v", what, err, got, want)
	}
}

func TestFileOps(t *testing.T) {
	_, addr := serve(t)
	l := New()
	h := connect(t, l, addr, 0)
	r := rand.New(rand.NewPCG(3, 4))
	data := randBytes(r, 300_000)

	if err := l.Mkdir(h, "/a/b/c", 0o755, true); err != nil {
		t.Fatal(err)
	}
	if err := l.Mkdir(h, "/a/b/c", 0o755, true); err != nil {
		t.Errorf("mkdir -p of an existing directory: %v", err)
	}
	wantErrno(t, "mkdir of an existing directory", l.Mkdir(h, "/a/b", 0o755, false), syscall.EEXIST)

	fh, err := l.Open(h, "/a/f", syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := l.Pwrite(fh, data, 0); err != nil || n != len(data) {
		t.Fatalf("pwrite = %d, %v", n, err)
	}
	if err := l.Fsync(fh); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data)+100)
	if n, err := l.Pread(fh, got, 0); err != nil || n != len(data) || !bytes.Equal(got[:n], data) {
		t.Fatalf("pread of the whole file = %d, %v (equal %v)", n, err, bytes.Equal(got[:n], data))
	}
	if n, err := l.Pread(fh, got[:10], int64(len(data))); err != nil || n != 0 {
		t.Errorf("pread at the end = %d, %v, want 0, nil", n, err)
	}
	if err := l.Ftruncate(fh, 1000); err != nil {
		t.Fatal(err)
	}
	st, err := l.Fstat(fh)
	if err != nil || st.Size != 1000 || st.Mode != syscall.S_IFREG|0o640 {
		t.Errorf("fstat = %+v, %v; want size 1000, mode %o", st, err, syscall.S_IFREG|0o640)
	}
	if err := l.Close(fh); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "pread of a closed handle", func() error { _, err := l.Pread(fh, got, 0); return err }(), syscall.EBADF)
	wantErrno(t, "open O_EXCL of an existing file", func() error {
		_, err := l.Open(h, "/a/f", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, 0o644)
		return err
	}(), syscall.EEXIST)
	wantErrno(t, "open of a directory", func() error { _, err := l.Open(h, "/a", syscall.O_RDONLY, 0); return err }(), syscall.EISDIR)
	wantErrno(t, "open with O_DIRECT", func() error { _, err := l.Open(h, "/a/f", syscall.O_RDONLY|syscall.O_DIRECT, 0); return err }(), syscall.EINVAL)

	st, err = l.Stat(h, "/a/f", true)
	if err != nil || st.Size != 1000 || st.Ino == 0 || st.Mtime == 0 {
		t.Errorf("stat = %+v, %v", st, err)
	}
	_, err = l.Stat(h, "/nope", true)
	wantErrno(t, "stat of a missing path", err, syscall.ENOENT)

	wantErrno(t, "unlink of a directory", l.Unlink(h, "/a/b"), syscall.EISDIR)
	wantErrno(t, "rmdir of a file", l.Rmdir(h, "/a/f"), syscall.ENOTDIR)
	wantErrno(t, "rmdir of a non-empty directory", l.Rmdir(h, "/a/b"), syscall.ENOTEMPTY)
	if err := l.Truncate(h, "/a/f", 10); err != nil {
		t.Fatal(err)
	}
	fh2, _ := l.Open(h, "/a/g", syscall.O_WRONLY|syscall.O_CREAT, 0o644)
	l.Close(fh2)
	wantErrno(t, "rename without replace over a file", l.Rename(h, "/a/f", "/a/g", true), syscall.EEXIST)
	if err := l.Rename(h, "/a/f", "/a/g", false); err != nil {
		t.Fatal(err)
	}
	es, err := l.ListDir(h, "/a", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Name != "b" || es[1].Name != "g" || es[1].Size != 10 || !isDir(es[0].Mode) {
		t.Errorf("listdir /a = %+v, want b (dir) and g (10 bytes)", es)
	}
	if err := l.Unlink(h, "/a/g"); err != nil {
		t.Fatal(err)
	}
	if err := l.RemoveAll(h, "/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Stat(h, "/a", false); Errno(err) != syscall.ENOENT {
		t.Errorf("after remove all: %v", err)
	}
}

func TestReadBatch(t *testing.T) {
	_, addr := serve(t)
	r := rand.New(rand.NewPCG(5, 6))
	files := map[string][]byte{}
	var paths []string
	for i := range 40 {
		p := fmt.Sprintf("/d/%02d", i)
		files[p] = randBytes(r, 1+r.IntN(200_000))
		paths = append(paths, p)
	}
	writeFiles(t, addr, files)
	l := New()
	h := connect(t, l, addr, 0)

	var reqs []ReadReq
	for _, p := range paths {
		reqs = append(reqs, ReadReq{Path: p, Buf: make([]byte, len(files[p]))})
	}
	// Ranges of one file (one open, shared), a range past the end, a missing file.
	big := paths[0]
	reqs = append(reqs,
		ReadReq{Path: big, Off: 1, Buf: make([]byte, 10)},
		ReadReq{Path: big, Off: int64(len(files[big]) - 5), Buf: make([]byte, 100)},
		ReadReq{Path: "/d/missing", Buf: make([]byte, 10)})
	failed, err := l.ReadBatch(h, reqs, 8)
	if failed != 1 || Errno(err) != syscall.ENOENT {
		t.Fatalf("ReadBatch = %d failed, %v; want 1 (ENOENT)", failed, err)
	}
	for i, p := range paths {
		if reqs[i].Err != nil || reqs[i].N != len(files[p]) || !bytes.Equal(reqs[i].Buf, files[p]) {
			t.Errorf("%s: n=%d err=%v equal=%v", p, reqs[i].N, reqs[i].Err, bytes.Equal(reqs[i].Buf, files[p]))
		}
	}
	n := len(paths)
	if rr := reqs[n]; rr.N != 10 || !bytes.Equal(rr.Buf, files[big][1:11]) {
		t.Errorf("range at 1: n=%d err=%v", rr.N, rr.Err)
	}
	if rr := reqs[n+1]; rr.N != 5 || !bytes.Equal(rr.Buf[:5], files[big][len(files[big])-5:]) {
		t.Errorf("range over the end: n=%d err=%v, want 5", rr.N, rr.Err)
	}
	if Errno(reqs[n+2].Err) != syscall.ENOENT {
		t.Errorf("missing file: %v", reqs[n+2].Err)
	}

	// Write batch: whole files, durable, then read back.
	var wreqs []WriteReq
	for i := range 20 {
		wreqs = append(wreqs, WriteReq{Path: fmt.Sprintf("/w/%d", i), Data: randBytes(r, r.IntN(100_000))})
	}
	if err := l.Mkdir(h, "/w", 0o755, false); err != nil {
		t.Fatal(err)
	}
	if failed, err := l.WriteBatch(h, wreqs, 4, true); failed != 0 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", failed, err)
	}
	c := proctest.Client(t, addr)
	for _, w := range wreqs {
		f, err := c.Open(context.Background(), w.Path)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(w.Data)+1)
		n, _ := f.ReadAt(got, 0)
		f.Close()
		if !bytes.Equal(got[:n], w.Data) {
			t.Errorf("%s: read back %d bytes, want %d equal", w.Path, n, len(w.Data))
		}
	}
	if l.Handles() != 1 {
		t.Errorf("%d handles live, want 1 (the client)", l.Handles())
	}
}

func TestFileset(t *testing.T) {
	_, addr := serve(t)
	r := rand.New(rand.NewPCG(7, 8))
	files := map[string][]byte{}
	var paths []string
	for i := range 50 { // over listThreshold: listed, not looked up one by one
		p := fmt.Sprintf("/ds/big/%03d.bin", i)
		files[p] = randBytes(r, r.IntN(70_000))
		paths = append(paths, p)
	}
	for i := range 3 {
		p := fmt.Sprintf("/ds/small/%d", i)
		files[p] = randBytes(r, 1000)
		paths = append(paths, p)
	}
	writeFiles(t, addr, files)
	c := proctest.Client(t, addr)
	if err := c.Symlink(context.Background(), "/ds/big/000.bin", "/ds/big/zlink"); err != nil {
		t.Fatal(err)
	}
	l := New()
	h := connect(t, l, addr, 0)

	// From paths: a symlink (opened by path, followed) and a missing one.
	all := append(append([]string{}, paths...), "/ds/big/zlink", "/ds/big/missing")
	fs, errs, err := l.FilesetFromPaths(h, all, 16)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs[:len(paths)+1] {
		if e != nil {
			t.Errorf("%s: %v", all[i], e)
		}
	}
	if Errno(errs[len(all)-1]) != syscall.ENOENT {
		t.Errorf("missing path: %v, want ENOENT", errs[len(all)-1])
	}
	es, err := l.FilesetEntries(fs)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]IndexReadReq, len(all)-1)
	for i := range reqs {
		if es[i].Name != all[i] || es[i].Ino == 0 {
			t.Errorf("entry %d = %+v, want %s", i, es[i], all[i])
		}
		reqs[i] = IndexReadReq{Index: i, Buf: make([]byte, es[i].Size)}
	}
	if es[len(all)-1].Size != -1 {
		t.Errorf("missing path's entry: %+v, want size -1", es[len(all)-1])
	}
	if failed, err := l.FilesetRead(fs, reqs, 8); failed != 0 {
		t.Fatalf("FilesetRead: %d failed: %v", failed, err)
	}
	for i, rr := range reqs {
		want := files[all[i]]
		if all[i] == "/ds/big/zlink" {
			want = files["/ds/big/000.bin"]
		}
		if !bytes.Equal(rr.Buf[:rr.N], want) {
			t.Errorf("%s: %d bytes read, not the %d written", all[i], rr.N, len(want))
		}
	}
	bad := []IndexReadReq{{Index: len(all) - 1, Buf: make([]byte, 1)}, {Index: 999, Buf: make([]byte, 1)}}
	if failed, _ := l.FilesetRead(fs, bad, 0); failed != 2 || Errno(bad[0].Err) != syscall.ENOENT || Errno(bad[1].Err) != syscall.EINVAL {
		t.Errorf("reads of a failed entry and an index out of range: %v, %v", bad[0].Err, bad[1].Err)
	}
	if err := l.Free(fs); err != nil {
		t.Fatal(err)
	}

	// From a directory, recursively: regular files only, in path order.
	fs, err = l.FilesetFromDir(h, "/ds", true)
	if err != nil {
		t.Fatal(err)
	}
	es, _ = l.FilesetEntries(fs)
	if len(es) != len(paths) {
		t.Fatalf("%d entries from the directory, want %d", len(es), len(paths))
	}
	for i, e := range es {
		if e.Name != paths[i] || e.Size != int64(len(files[paths[i]])) {
			t.Errorf("entry %d = %s (%d bytes), want %s (%d)", i, e.Name, e.Size, paths[i], len(files[paths[i]]))
		}
	}
	l.Free(fs)
	if _, err := l.FilesetFromDir(h, "/ds/big/000.bin", true); Errno(err) != syscall.ENOTDIR {
		t.Errorf("file set of a file: %v, want ENOTDIR", err)
	}
}

// TestFilesetListing: a file set from paths that share a directory lists
// it only while the names wanted are dense there (listUpTo), and looks up
// the rest: a sparse random batch, every name, and names that are
// prefixes of each other (the listing starts just before the first name)
// all open with their own bytes.
func TestFilesetListing(t *testing.T) {
	_, addr := serve(t)
	r := rand.New(rand.NewPCG(11, 12))
	files := map[string][]byte{}
	var names []string
	for i := range 600 {
		names = append(names, fmt.Sprintf("/dir/%04d", i))
	}
	names = append(names, "/dir/p", "/dir/pq", "/dir/pqr", "/dir/0")
	for _, p := range names {
		files[p] = randBytes(r, 1+r.IntN(3000))
	}
	writeFiles(t, addr, files)
	l := New()
	h := connect(t, l, addr, 0)
	check := func(what string, paths []string) {
		t.Helper()
		fs, errs, err := l.FilesetFromPaths(h, paths, 16)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Free(fs)
		reqs := make([]IndexReadReq, len(paths))
		for i, p := range paths {
			if errs[i] != nil {
				t.Fatalf("%s: %s: %v", what, p, errs[i])
			}
			reqs[i] = IndexReadReq{Index: i, Buf: make([]byte, 4000)}
		}
		if failed, err := l.FilesetRead(fs, reqs, 8); failed != 0 {
			t.Fatalf("%s: %d reads failed: %v", what, failed, err)
		}
		for i, rr := range reqs {
			if !bytes.Equal(rr.Buf[:rr.N], files[paths[i]]) {
				t.Fatalf("%s: %s read %d bytes, not its %d", what, paths[i], rr.N, len(files[paths[i]]))
			}
		}
	}
	var sparse []string
	for _, i := range r.Perm(600)[:40] {
		sparse = append(sparse, names[i])
	}
	check("a sparse random batch", sparse)
	check("every name", names)
	check("prefixes", append([]string{"/dir/pqr", "/dir/p", "/dir/pq", "/dir/0"}, names[100:120]...))
	check("a dense run", names[300:400])
}

// TestTimeout: a server that stops answering (SIGSTOP) makes calls fail
// with ETIMEDOUT after the client's timeout instead of hanging.
func TestTimeout(t *testing.T) {
	p, addr := serve(t)
	writeFiles(t, addr, map[string][]byte{"/f": []byte("data")})
	l := New()
	h := connect(t, l, addr, 2*time.Second)
	p.Pause(t)
	t.Cleanup(p.Resume)
	reqs := []ReadReq{{Path: "/f", Buf: make([]byte, 4)}}
	failed, err := l.ReadBatch(h, reqs, 0)
	var te *TimeoutError
	if failed != 1 || !errors.As(err, &te) || Errno(err) != syscall.ETIMEDOUT {
		t.Errorf("read from a stopped server: %d failed, %v; want a TimeoutError", failed, err)
	}
	_, err = l.Stat(h, "/f", true)
	wantErrno(t, "stat from a stopped server", err, syscall.ETIMEDOUT)
}

// TestForkedHandle: handles made by another process are refused, never used.
func TestForkedHandle(t *testing.T) {
	_, addr := serve(t)
	l := New()
	h := connect(t, l, addr, 0)
	fh, err := l.Open(h, "/f", syscall.O_WRONLY|syscall.O_CREAT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	real := l.t.getpid
	l.t.getpid = func() int { return real() + 1 }
	_, err = l.Pwrite(fh, []byte("x"), 0)
	if !errors.Is(err, ErrForked) {
		t.Errorf("pwrite from another process: %v, want ErrForked", err)
	}
	if _, err := l.Open(h, "/g", syscall.O_RDONLY, 0); !errors.Is(err, ErrForked) {
		t.Errorf("open from another process: %v, want ErrForked", err)
	}
	l.t.getpid = real
	if err := l.Close(fh); err != nil {
		t.Error(err)
	}
}

// TestWriteBatchSmall: a batch writes new small files in one request each
// (client.PutFile) and existing ones in place: an existing file keeps its
// inode and mode, a new one gets its bytes, a directory in the way fails
// that request only.
func TestWriteBatchSmall(t *testing.T) {
	_, addr := serve(t)
	c := proctest.Client(t, addr)
	ctx := context.Background()
	writeFiles(t, addr, map[string][]byte{"/w/old": []byte("old contents, longer than the new")})
	if err := c.Chmod(ctx, "/w/old", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Mkdir(ctx, "/w/dir", 0o755); err != nil {
		t.Fatal(err)
	}
	before, err := c.Stat(ctx, "/w/old")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	l := New()
	h := connect(t, l, addr, 0)
	want := map[string][]byte{"/w/old": []byte("new"), "/w/n1": randBytes(r, 100), "/w/n2": randBytes(r, int(c.InlineMax())),
		"/w/big": randBytes(r, int(c.InlineMax())+1), "/w/empty": nil}
	var reqs []WriteReq
	for p, d := range want {
		reqs = append(reqs, WriteReq{Path: p, Data: d})
	}
	reqs = append(reqs, WriteReq{Path: "/w/dir", Data: []byte("x")})
	failed, err := l.WriteBatch(h, reqs, 4, true)
	if failed != 1 || Errno(err) != syscall.EISDIR {
		t.Fatalf("WriteBatch = %d failed, %v; want 1 (EISDIR)", failed, err)
	}
	for p, d := range want {
		var got []byte
		f, err := c.Open(ctx, p)
		if err == nil {
			got, err = io.ReadAll(f)
			f.Close()
		}
		if err != nil || !bytes.Equal(got, d) {
			t.Errorf("%s: %d bytes, %v; want %d", p, len(got), err, len(d))
		}
	}
	after, err := c.Stat(ctx, "/w/old")
	if err != nil {
		t.Fatal(err)
	}
	if after.Attr().Ino != before.Attr().Ino || after.Mode().Perm() != 0o600 {
		t.Errorf("the existing file: inode %d -> %d, mode %v; want the same inode, mode 0600", before.Attr().Ino, after.Attr().Ino, after.Mode())
	}
}
