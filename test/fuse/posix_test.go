package fuse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/client"
)

// wantErrno fails the test unless err carries errno want (0: no error).
func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if got := errnoOf(err); got != want {
		t.Errorf("%s: got errno %d (%v), want %d (%v); err = %v", what, int(got), got, int(want), want, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	must(t, os.WriteFile(p, []byte(s), 0o644))
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return string(b)
}

func lstat(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	must(t, syscall.Lstat(p, &st))
	return &st
}

// TestPOSIX checks results and errnos of the POSIX operations on a real
// mount, one subtest per area, each in its own directory.
func TestPOSIX(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "")
	m := startMount(t, s.addr)
	c := s.client()
	tests := []struct {
		name string
		fn   func(t *testing.T, dir string)
	}{
		{"OpenFlags", testOpenFlags},
		{"Directories", testDirectories},
		{"Names", testNames},
		{"Symlinks", testSymlinks},
		{"HardLinks", testHardLinks},
		{"Rename", testRename},
		{"SparseAndLarge", testSparseAndLarge},
		{"Truncate", testTruncate},
		{"Fsync", func(t *testing.T, dir string) { testFsync(t, dir, c, m) }},
		{"Utimens", testUtimens},
		{"Xattrs", testXattrs},
		{"Statfs", testStatfs},
		{"Locks", testLocks},
		{"SharedMmap", testSharedMmap},
		{"UnlinkOpen", func(t *testing.T, dir string) { testUnlinkOpen(t, dir, c) }},
		{"Permissions", testPermissions},
		{"SetID", testSetID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := m.path(tc.name)
			must(t, os.Mkdir(dir, 0o755))
			tc.fn(t, dir)
		})
	}
	m.stop()
}

func testOpenFlags(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	must(t, err)
	f.WriteString("hello world")
	must(t, f.Close())
	if st := lstat(t, p); st.Mode != syscall.S_IFREG|0o640 || st.Size != 11 || st.Nlink != 1 {
		t.Errorf("stat after create: mode %o size %d nlink %d", st.Mode, st.Size, st.Nlink)
	}
	_, err = os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	wantErrno(t, "O_CREAT|O_EXCL on an existing file", err, syscall.EEXIST)

	f, err = os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	f.WriteString("!!")
	f.Close()
	if got := readFile(t, p); got != "hello world!!" {
		t.Errorf("after O_APPEND: %q", got)
	}
	f, err = os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	must(t, err)
	f.WriteString("new")
	f.Close()
	if got := readFile(t, p); got != "new" {
		t.Errorf("after O_TRUNC: %q", got)
	}
	_, err = os.Open(filepath.Join(dir, "missing"))
	wantErrno(t, "open missing", err, syscall.ENOENT)
	_, err = os.OpenFile(dir, os.O_WRONLY, 0)
	wantErrno(t, "open directory for writing", err, syscall.EISDIR)
	_, err = os.Open(filepath.Join(p, "x"))
	wantErrno(t, "open through a file", err, syscall.ENOTDIR)
	_, err = os.OpenFile(filepath.Join(dir, "nodir", "x"), os.O_CREATE|os.O_WRONLY, 0o644)
	wantErrno(t, "create in a missing directory", err, syscall.ENOENT)
	// Reads through an O_WRONLY descriptor fail in the kernel.
	f, err = os.OpenFile(p, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.Read(make([]byte, 1))
	wantErrno(t, "read on O_WRONLY", err, syscall.EBADF)
	f.Close()
	// Two descriptors see each other's writes at once.
	a, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	b, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	a.WriteAt([]byte("XYZ"), 0)
	buf := make([]byte, 3)
	b.ReadAt(buf, 0)
	if string(buf) != "XYZ" {
		t.Errorf("second descriptor read %q after write through the first", buf)
	}
	a.Close()
	b.Close()
	// mknod of a FIFO.
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	if st := lstat(t, filepath.Join(dir, "fifo")); st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		t.Errorf("fifo mode %o", st.Mode)
	}
}

func testDirectories(t *testing.T, dir string) {
	d := filepath.Join(dir, "d")
	must(t, os.Mkdir(d, 0o750))
	wantErrno(t, "mkdir existing", os.Mkdir(d, 0o750), syscall.EEXIST)
	writeFile(t, filepath.Join(d, "f"), "x")
	wantErrno(t, "rmdir non-empty", syscall.Rmdir(d), syscall.ENOTEMPTY)
	wantErrno(t, "rmdir a file", syscall.Rmdir(filepath.Join(d, "f")), syscall.ENOTDIR)
	wantErrno(t, "unlink a directory", syscall.Unlink(d), syscall.EISDIR)
	wantErrno(t, "mkdir over a file", os.Mkdir(filepath.Join(d, "f"), 0o755), syscall.EEXIST)
	wantErrno(t, "rmdir missing", syscall.Rmdir(filepath.Join(dir, "missing")), syscall.ENOENT)
	if st := lstat(t, d); st.Mode != syscall.S_IFDIR|0o750 || st.Nlink != 2 {
		t.Errorf("dir mode %o nlink %d", st.Mode, st.Nlink)
	}
	must(t, os.Mkdir(filepath.Join(d, "sub"), 0o755))
	if st := lstat(t, d); st.Nlink != 3 {
		t.Errorf("dir with one subdirectory has nlink %d, want 3", st.Nlink)
	}
	// A listing bigger than one page of the metadata service and of FUSE.
	for i := range 1500 {
		must(t, os.WriteFile(filepath.Join(d, "sub", "entry-"+pad(i)), nil, 0o644))
	}
	ents, err := os.ReadDir(filepath.Join(d, "sub"))
	must(t, err)
	if len(ents) != 1500 || ents[0].Name() != "entry-0000" || ents[1499].Name() != "entry-1499" {
		t.Errorf("listing of 1500 entries: %d entries", len(ents))
	}
	must(t, os.RemoveAll(filepath.Join(d, "sub")))
	must(t, os.Remove(filepath.Join(d, "f")))
	must(t, syscall.Rmdir(d))
	// The root does not show the mount's hidden orphan directory.
	root := filepath.Dir(dir)
	ents, err = os.ReadDir(root)
	must(t, err)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".sluice") {
			t.Errorf("root lists %q", e.Name())
		}
	}
	_, err = os.Stat(filepath.Join(root, ".sluice-orphans"))
	wantErrno(t, "stat the hidden orphan directory", err, syscall.ENOENT)
}

func pad(i int) string {
	s := "0000" + itoa(i)
	return s[len(s)-4:]
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func testNames(t *testing.T, dir string) {
	long := strings.Repeat("n", 256)
	_, err := os.Create(filepath.Join(dir, long))
	wantErrno(t, "create a 256-byte name", err, syscall.ENAMETOOLONG)
	wantErrno(t, "mkdir a 256-byte name", os.Mkdir(filepath.Join(dir, long), 0o755), syscall.ENAMETOOLONG)
	ok := strings.Repeat("n", 255)
	writeFile(t, filepath.Join(dir, ok), "x")
	if got := readFile(t, filepath.Join(dir, ok)); got != "x" {
		t.Errorf("255-byte name: %q", got)
	}
	odd := "sp ace\ttab\u00e9\u4e2d\u6587"
	writeFile(t, filepath.Join(dir, odd), "y")
	ents, err := os.ReadDir(dir)
	must(t, err)
	found := false
	for _, e := range ents {
		found = found || e.Name() == odd
	}
	if !found {
		t.Errorf("name %q not listed", odd)
	}
}

func testSymlinks(t *testing.T, dir string) {
	writeFile(t, filepath.Join(dir, "target"), "data")
	l := filepath.Join(dir, "link")
	must(t, os.Symlink("target", l))
	got, err := os.Readlink(l)
	must(t, err)
	if got != "target" {
		t.Errorf("readlink: %q", got)
	}
	if st := lstat(t, l); st.Mode&syscall.S_IFMT != syscall.S_IFLNK || st.Size != 6 {
		t.Errorf("lstat link: mode %o size %d", st.Mode, st.Size)
	}
	if readFile(t, l) != "data" {
		t.Error("reading through a symlink")
	}
	wantErrno(t, "symlink over existing", os.Symlink("x", l), syscall.EEXIST)
	must(t, os.Symlink("nowhere", filepath.Join(dir, "dangling")))
	_, err = os.Stat(filepath.Join(dir, "dangling"))
	wantErrno(t, "stat a dangling link", err, syscall.ENOENT)
	must(t, os.Symlink("b", filepath.Join(dir, "a")))
	must(t, os.Symlink("a", filepath.Join(dir, "b")))
	_, err = os.Open(filepath.Join(dir, "a"))
	wantErrno(t, "open a symlink loop", err, syscall.ELOOP)
	_, err = os.Readlink(filepath.Join(dir, "target"))
	wantErrno(t, "readlink a file", err, syscall.EINVAL)
	long := strings.Repeat("t/", 1000)
	must(t, os.Symlink(long, filepath.Join(dir, "longlink")))
	if got, _ := os.Readlink(filepath.Join(dir, "longlink")); got != long {
		t.Errorf("2000-byte symlink target came back as %d bytes", len(got))
	}
}

func testHardLinks(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, a, "shared")
	must(t, os.Link(a, b))
	sa, sb := lstat(t, a), lstat(t, b)
	if sa.Ino != sb.Ino || sa.Nlink != 2 || sb.Nlink != 2 {
		t.Errorf("after link: ino %d/%d nlink %d/%d", sa.Ino, sb.Ino, sa.Nlink, sb.Nlink)
	}
	writeFile(t, b, "changed")
	if readFile(t, a) != "changed" {
		t.Error("write through one link not seen through the other")
	}
	wantErrno(t, "link over existing", os.Link(a, b), syscall.EEXIST)
	wantErrno(t, "link a directory", os.Link(dir, filepath.Join(dir, "d")), syscall.EPERM)
	wantErrno(t, "link missing", os.Link(filepath.Join(dir, "missing"), filepath.Join(dir, "c")), syscall.ENOENT)
	must(t, os.Remove(a))
	if st := lstat(t, b); st.Nlink != 1 {
		t.Errorf("nlink after unlinking one of two links: %d", st.Nlink)
	}
	if readFile(t, b) != "changed" {
		t.Error("data lost after unlinking the other link")
	}
	wantErrno(t, "link across file systems", os.Link(b, filepath.Join(os.TempDir(), "sluice-xdev")), syscall.EXDEV)
}

func testRename(t *testing.T, dir string) {
	// syscall.Rename: os.Rename refuses to replace a directory.
	p := func(n string) string { return filepath.Join(dir, n) }
	writeFile(t, p("a"), "A")
	writeFile(t, p("b"), "B")
	must(t, syscall.Rename(p("a"), p("b")))
	if readFile(t, p("b")) != "A" {
		t.Error("rename over a file: wrong content")
	}
	_, err := os.Stat(p("a"))
	wantErrno(t, "old name after rename", err, syscall.ENOENT)
	must(t, os.Mkdir(p("d1"), 0o755))
	must(t, os.Mkdir(p("d2"), 0o755))
	writeFile(t, p("d1/f"), "in d1")
	must(t, syscall.Rename(p("d1"), p("d2"))) // over an empty directory
	if readFile(t, p("d2/f")) != "in d1" {
		t.Error("rename over an empty directory")
	}
	must(t, os.Mkdir(p("d3"), 0o755))
	wantErrno(t, "dir over non-empty dir", syscall.Rename(p("d3"), p("d2")), syscall.ENOTEMPTY)
	wantErrno(t, "file over dir", syscall.Rename(p("b"), p("d3")), syscall.EISDIR)
	wantErrno(t, "dir over file", syscall.Rename(p("d3"), p("b")), syscall.ENOTDIR)
	must(t, os.Mkdir(p("d2/sub"), 0o755))
	wantErrno(t, "dir into its own subtree", syscall.Rename(p("d2"), p("d2/sub/x")), syscall.EINVAL)
	wantErrno(t, "missing source", syscall.Rename(p("missing"), p("x")), syscall.ENOENT)
	wantErrno(t, "across file systems", syscall.Rename(p("b"), filepath.Join(os.TempDir(), "sluice-xdev")), syscall.EXDEV)
	writeFile(t, p("c"), "C")
	wantErrno(t, "RENAME_NOREPLACE onto existing",
		unix.Renameat2(unix.AT_FDCWD, p("c"), unix.AT_FDCWD, p("b"), unix.RENAME_NOREPLACE), syscall.EEXIST)
	must(t, unix.Renameat2(unix.AT_FDCWD, p("c"), unix.AT_FDCWD, p("b"), unix.RENAME_EXCHANGE))
	if readFile(t, p("b")) != "C" || readFile(t, p("c")) != "A" {
		t.Error("RENAME_EXCHANGE did not swap")
	}
	must(t, unix.Renameat2(unix.AT_FDCWD, p("c"), unix.AT_FDCWD, p("new"), unix.RENAME_NOREPLACE))
	wantErrno(t, "RENAME_WHITEOUT",
		unix.Renameat2(unix.AT_FDCWD, p("new"), unix.AT_FDCWD, p("w"), unix.RENAME_WHITEOUT), syscall.EINVAL)
	// A directory moved to another parent: nlinks follow.
	must(t, syscall.Rename(p("d3"), p("d2/d3")))
	if st := lstat(t, p("d2")); st.Nlink != 4 {
		t.Errorf("nlink of a directory with 2 subdirectories: %d", st.Nlink)
	}
}

func testSparseAndLarge(t *testing.T, dir string) {
	p := filepath.Join(dir, "sparse")
	f, err := os.Create(p)
	must(t, err)
	defer f.Close()
	const off = 10 << 20
	_, err = f.WriteAt([]byte("end"), off)
	must(t, err)
	must(t, f.Sync())
	if st := lstat(t, p); st.Size != off+3 {
		t.Errorf("sparse size %d", st.Size)
	}
	hole := make([]byte, 1<<20)
	_, err = f.ReadAt(hole, 3<<20)
	must(t, err)
	if !bytes.Equal(hole, make([]byte, len(hole))) {
		t.Error("hole does not read as zeros")
	}
	// Past 4 GiB.
	const big = 5<<30 + 12345
	_, err = f.WriteAt([]byte("far"), big)
	must(t, err)
	must(t, f.Close())
	if st := lstat(t, p); st.Size != big+3 {
		t.Errorf("size past 4 GiB: %d", st.Size)
	}
	g, err := os.Open(p)
	must(t, err)
	defer g.Close()
	buf := make([]byte, 10)
	n, err := g.ReadAt(buf, big-7)
	if n != 10 || string(buf) != "\x00\x00\x00\x00\x00\x00\x00far" {
		t.Errorf("read around 5 GiB: %q, %v", buf[:n], err)
	}
	n, err = g.ReadAt(buf, big+3)
	if n != 0 || err == nil {
		t.Errorf("read at the end: n=%d err=%v", n, err)
	}
}

func testTruncate(t *testing.T, dir string) {
	p := filepath.Join(dir, "t")
	writeFile(t, p, "0123456789")
	must(t, os.Truncate(p, 4))
	if got := readFile(t, p); got != "0123" {
		t.Errorf("truncate down: %q", got)
	}
	must(t, os.Truncate(p, 8))
	if got := readFile(t, p); got != "0123\x00\x00\x00\x00" {
		t.Errorf("truncate up after down (old bytes must not reappear): %q", got)
	}
	// ftruncate of a file with buffered writes.
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	f.WriteAt(bytes.Repeat([]byte("z"), 100000), 0)
	must(t, f.Truncate(50))
	st, err := f.Stat()
	must(t, err)
	if st.Size() != 50 {
		t.Errorf("size after ftruncate: %d", st.Size())
	}
	must(t, f.Close())
	if got := readFile(t, p); got != strings.Repeat("z", 50) {
		t.Errorf("ftruncate with buffered data: %d bytes", len(got))
	}
	wantErrno(t, "truncate a directory", os.Truncate(dir, 0), syscall.EISDIR)
	wantErrno(t, "truncate to a negative size", os.Truncate(p, -1), syscall.EINVAL)
}

func testFsync(t *testing.T, dir string, c *client.Client, m *mount) {
	p := filepath.Join(dir, "synced")
	f, err := os.Create(p)
	must(t, err)
	data := bytes.Repeat([]byte("durable "), 1<<17) // 1 MiB
	_, err = f.Write(data)
	must(t, err)
	must(t, f.Sync())
	must(t, unix.Fdatasync(int(f.Fd())))
	// Another client sees the data after fsync, before close.
	rel := strings.TrimPrefix(p, m.dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.Open(ctx, rel)
	must(t, err)
	got := make([]byte, len(data))
	n, _ := r.ReadAt(got, 0)
	r.Close()
	if n != len(data) || !bytes.Equal(got, data) {
		t.Errorf("after fsync another client read %d bytes (equal %v)", n, bytes.Equal(got[:n], data[:n]))
	}
	must(t, f.Close())
	d, err := os.Open(dir)
	must(t, err)
	must(t, d.Sync())
	d.Close()
}

func testUtimens(t *testing.T, dir string) {
	p := filepath.Join(dir, "u")
	writeFile(t, p, "x")
	at, mt := time.Unix(1000000000, 123456789), time.Unix(1200000000, 987654321)
	must(t, os.Chtimes(p, at, mt))
	st := lstat(t, p)
	if st.Atim.Nano() != at.UnixNano() || st.Mtim.Nano() != mt.UnixNano() {
		t.Errorf("utimens: atime %d mtime %d", st.Atim.Nano(), st.Mtim.Nano())
	}
	before := time.Now().Add(-time.Second)
	must(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}, 0))
	if st := lstat(t, p); time.Unix(0, st.Mtim.Nano()).Before(before) {
		t.Errorf("UTIME_NOW: mtime %v", time.Unix(0, st.Mtim.Nano()))
	}
	// futimens after buffered writes (as cp -p and tar do): the write-back
	// at close must not overwrite the mtime set.
	f, err := os.Create(filepath.Join(dir, "v"))
	must(t, err)
	f.Write([]byte("buffered"))
	must(t, unix.Futimes(int(f.Fd()), []unix.Timeval{{Sec: 5}, {Sec: 7}}))
	must(t, f.Close())
	if st := lstat(t, filepath.Join(dir, "v")); st.Mtim.Sec != 7 || st.Size != 8 {
		t.Errorf("futimens before close: mtime %d size %d", st.Mtim.Sec, st.Size)
	}
	// chmod and chown.
	must(t, os.Chmod(p, 0o4751))
	must(t, os.Chown(p, 1234, 5678))
	if st := lstat(t, p); st.Mode&0o7777 != 0o751 && st.Mode&0o7777 != 0o4751 || st.Uid != 1234 || st.Gid != 5678 {
		t.Errorf("chmod/chown: mode %o uid %d gid %d", st.Mode, st.Uid, st.Gid)
	}
}

func testXattrs(t *testing.T, dir string) {
	p := filepath.Join(dir, "x")
	writeFile(t, p, "x")
	must(t, unix.Setxattr(p, "user.a", []byte("1"), 0))
	must(t, unix.Setxattr(p, "user.b", []byte("two"), 0))
	buf := make([]byte, 64)
	n, err := unix.Getxattr(p, "user.b", buf)
	must(t, err)
	if string(buf[:n]) != "two" {
		t.Errorf("getxattr: %q", buf[:n])
	}
	n, err = unix.Getxattr(p, "user.b", nil)
	if err != nil || n != 3 {
		t.Errorf("getxattr size query: %d, %v", n, err)
	}
	_, err = unix.Getxattr(p, "user.b", make([]byte, 1))
	wantErrno(t, "getxattr with a small buffer", err, syscall.ERANGE)
	_, err = unix.Getxattr(p, "user.none", buf)
	wantErrno(t, "getxattr missing", err, syscall.ENODATA)
	wantErrno(t, "XATTR_CREATE existing", unix.Setxattr(p, "user.a", []byte("x"), unix.XATTR_CREATE), syscall.EEXIST)
	wantErrno(t, "XATTR_REPLACE missing", unix.Setxattr(p, "user.c", []byte("x"), unix.XATTR_REPLACE), syscall.ENODATA)
	n, err = unix.Listxattr(p, buf)
	must(t, err)
	if got := string(buf[:n]); got != "user.a\x00user.b\x00" {
		t.Errorf("listxattr: %q", got)
	}
	must(t, unix.Removexattr(p, "user.a"))
	wantErrno(t, "removexattr missing", unix.Removexattr(p, "user.a"), syscall.ENODATA)
	must(t, unix.Setxattr(dir, "user.ondir", []byte("d"), 0))
	n, err = unix.Getxattr(dir, "user.ondir", buf)
	if err != nil || string(buf[:n]) != "d" {
		t.Errorf("xattr on a directory: %q, %v", buf[:n], err)
	}
}

func testStatfs(t *testing.T, dir string) {
	var st unix.Statfs_t
	must(t, unix.Statfs(dir, &st))
	if st.Namelen != 255 || st.Blocks == 0 || st.Bsize == 0 || st.Bavail > st.Blocks {
		t.Errorf("statfs: %+v", st)
	}
}

func testLocks(t *testing.T, dir string) {
	p := filepath.Join(dir, "lock")
	writeFile(t, p, "x")
	a, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	defer a.Close()
	b, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	defer b.Close()
	must(t, unix.Flock(int(a.Fd()), unix.LOCK_EX|unix.LOCK_NB))
	wantErrno(t, "second exclusive flock", unix.Flock(int(b.Fd()), unix.LOCK_EX|unix.LOCK_NB), syscall.EWOULDBLOCK)
	must(t, unix.Flock(int(a.Fd()), unix.LOCK_UN))
	must(t, unix.Flock(int(b.Fd()), unix.LOCK_EX|unix.LOCK_NB))
	// Byte-range locks on open file descriptions conflict within a process.
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 100}
	must(t, unix.FcntlFlock(a.Fd(), unix.F_OFD_SETLK, &lk))
	lk2 := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 50, Len: 10}
	wantErrno(t, "overlapping fcntl lock", unix.FcntlFlock(b.Fd(), unix.F_OFD_SETLK, &lk2), syscall.EAGAIN)
	lk3 := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 200, Len: 10}
	must(t, unix.FcntlFlock(b.Fd(), unix.F_OFD_SETLK, &lk3))
	probe := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 10}
	must(t, unix.FcntlFlock(b.Fd(), unix.F_OFD_GETLK, &probe))
	if probe.Type != unix.F_WRLCK {
		t.Errorf("F_OFD_GETLK did not report the conflicting lock: %+v", probe)
	}
}

func testSharedMmap(t *testing.T, dir string) {
	p := filepath.Join(dir, "mm")
	must(t, os.WriteFile(p, make([]byte, 1<<16), 0o644))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	mem, err := unix.Mmap(int(f.Fd()), 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	must(t, err)
	copy(mem[100:], "mapped write")
	copy(mem[60000:], "far page")
	must(t, unix.Msync(mem, unix.MS_SYNC))
	must(t, unix.Munmap(mem))
	must(t, f.Close())
	b, err := os.ReadFile(p)
	must(t, err)
	if string(b[100:112]) != "mapped write" || string(b[60000:60008]) != "far page" || len(b) != 1<<16 {
		t.Errorf("shared mmap writes not in the file: %q %q", b[100:112], b[60000:60008])
	}
	// A read-only mapping sees what write(2) wrote.
	g, err := os.Open(p)
	must(t, err)
	defer g.Close()
	ro, err := unix.Mmap(int(g.Fd()), 0, 1<<16, unix.PROT_READ, unix.MAP_SHARED)
	must(t, err)
	if string(ro[100:112]) != "mapped write" {
		t.Errorf("mapping reads %q", ro[100:112])
	}
	unix.Munmap(ro)
}

// testUnlinkOpen: an unlinked file stays readable and writable through an
// open descriptor, and is freed at the last close.
func testUnlinkOpen(t *testing.T, dir string, c *client.Client) {
	p := filepath.Join(dir, "gone")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	f.WriteString("before ")
	var st syscall.Stat_t
	must(t, syscall.Fstat(int(f.Fd()), &st))
	ino := st.Ino
	must(t, os.Remove(p))
	_, err = os.Stat(p)
	wantErrno(t, "stat after unlink", err, syscall.ENOENT)
	must(t, syscall.Fstat(int(f.Fd()), &st))
	if st.Nlink != 0 {
		t.Errorf("nlink of an unlinked open file: %d", st.Nlink)
	}
	f.WriteString("after")
	got := make([]byte, 12)
	n, _ := f.ReadAt(got, 0)
	if string(got[:n]) != "before after" {
		t.Errorf("read through the open descriptor: %q", got[:n])
	}
	// Renaming over an open file keeps it alive too.
	q := filepath.Join(dir, "replaced")
	writeFile(t, q, "old content")
	g, err := os.Open(q)
	must(t, err)
	writeFile(t, filepath.Join(dir, "new"), "new content")
	must(t, os.Rename(filepath.Join(dir, "new"), q))
	b := make([]byte, 20)
	n, _ = g.ReadAt(b, 0)
	if string(b[:n]) != "old content" {
		t.Errorf("renamed-over file through its descriptor: %q", b[:n])
	}
	if readFile(t, q) != "new content" {
		t.Error("rename over an open file: wrong new content")
	}
	must(t, g.Close())
	must(t, f.Close())
	// After the last close the inode is freed (the release runs just
	// after close returns; the deadline only catches a release that never
	// comes).
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.GetAttrIno(ctx, ino)
		if errors.Is(err, client.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inode %d of the unlinked file still exists after close: %v", ino, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := orphanCount(t, c); n != 0 {
		t.Errorf("%d orphans left after the last close", n)
	}
}

// orphanCount counts the entries in all mounts' orphan directories.
func orphanCount(t *testing.T, c *client.Client) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dirs, err := c.ReadDirAll(ctx, "/.sluice-orphans")
	if errors.Is(err, client.ErrNotExist) {
		return 0
	}
	must(t, err)
	n := 0
	for _, d := range dirs {
		ents, err := c.ReadDirAll(ctx, "/.sluice-orphans/"+d.Name)
		must(t, err)
		n += len(ents)
	}
	return n
}

// testPermissions runs operations as an unprivileged user (uid 65534) in a
// subprocess: the kernel enforces mode, ownership and the sticky bit.
func testPermissions(t *testing.T, dir string) {
	const nobody = 65534
	p := func(n string) string { return filepath.Join(dir, n) }
	writeFile(t, p("secret"), "root only")
	must(t, os.Chmod(p("secret"), 0o600))
	writeFile(t, p("readable"), "everyone")
	must(t, os.Chmod(p("readable"), 0o644))
	must(t, os.Mkdir(p("closed"), 0o755))
	must(t, os.Mkdir(p("sticky"), 0o777|os.ModeSticky))
	must(t, os.Chmod(p("sticky"), 0o777|os.ModeSticky))
	writeFile(t, p("sticky/roots"), "x")
	must(t, os.Chmod(p("sticky/roots"), 0o666))
	must(t, os.Mkdir(p("open"), 0o777))
	must(t, os.Chmod(p("open"), 0o777))

	ops := []struct {
		op   helperOp
		want syscall.Errno
	}{
		{helperOp{Op: "read", Path: p("secret")}, syscall.EACCES},
		{helperOp{Op: "read", Path: p("readable")}, 0},
		{helperOp{Op: "write", Path: p("readable")}, syscall.EACCES},
		{helperOp{Op: "truncate", Path: p("readable")}, syscall.EACCES},
		{helperOp{Op: "chmod", Path: p("readable"), Mode: 0o777}, syscall.EPERM},
		{helperOp{Op: "chown", Path: p("readable"), Size: nobody}, syscall.EPERM},
		{helperOp{Op: "utimes", Path: p("readable")}, syscall.EPERM},
		{helperOp{Op: "open", Path: p("closed/new"), Flags: os.O_CREATE | os.O_WRONLY, Mode: 0o644}, syscall.EACCES},
		{helperOp{Op: "mkdir", Path: p("closed/sub"), Mode: 0o755}, syscall.EACCES},
		{helperOp{Op: "unlink", Path: p("readable")}, syscall.EACCES},
		{helperOp{Op: "unlink", Path: p("sticky/roots")}, syscall.EPERM},
		{helperOp{Op: "rename", Path: p("sticky/roots"), Path2: p("sticky/moved")}, syscall.EPERM},
		{helperOp{Op: "write", Path: p("sticky/roots")}, 0},
		{helperOp{Op: "open", Path: p("sticky/mine"), Flags: os.O_CREATE | os.O_WRONLY, Mode: 0o644}, 0},
		{helperOp{Op: "rename", Path: p("sticky/mine"), Path2: p("sticky/mine2")}, 0},
		{helperOp{Op: "unlink", Path: p("sticky/mine2")}, 0},
		{helperOp{Op: "mkdir", Path: p("open/nobodys"), Mode: 0o700}, 0},
		{helperOp{Op: "chmod", Path: p("open/nobodys"), Mode: 0o755}, 0},
	}
	var list []helperOp
	for _, o := range ops {
		list = append(list, o.op)
	}
	got := asUser(t, nobody, nobody, list...)
	for i, o := range ops {
		if got[i] != o.want {
			t.Errorf("as uid %d: %s %s: got errno %d (%v), want %d (%v)", nobody, o.op.Op,
				strings.TrimPrefix(o.op.Path, dir), int(got[i]), got[i], int(o.want), o.want)
		}
	}
	if st := lstat(t, p("open/nobodys")); st.Uid != nobody || st.Gid != nobody || st.Mode != syscall.S_IFDIR|0o755 {
		t.Errorf("directory made by uid %d: uid %d gid %d mode %o", nobody, st.Uid, st.Gid, st.Mode)
	}
}

// testSetID checks that set-user-ID and set-group-ID bits are cleared as
// on a local file system: by a write, a truncate and an O_TRUNC open of a
// process without CAP_FSETID (here uid 65534), and by any chown; the
// set-group-ID bit only of a group-executable file; a write by root
// (CAP_FSETID) keeps them. The mount does this itself
// (FUSE_HANDLE_KILLPRIV_V2).
func testSetID(t *testing.T, dir string) {
	const nobody = 65534
	cases := []struct {
		name       string
		mode, want uint32
		op         *helperOp // as nobody; nil: do as root
		root       func(path string) error
	}{
		{"write", 0o6777, 0o777, &helperOp{Op: "write"}, nil},
		{"write, set-group-ID without group execute", 0o2767, 0o2767, &helperOp{Op: "write"}, nil},
		{"truncate", 0o6777, 0o777, &helperOp{Op: "truncate", Size: 1}, nil},
		{"O_TRUNC open", 0o6777, 0o777, &helperOp{Op: "open", Flags: os.O_WRONLY | os.O_TRUNC}, nil},
		{"chown by root", 0o6755, 0o755, nil, func(p string) error { return os.Chown(p, nobody, -1) }},
		{"write by root", 0o6755, 0o6755, nil, func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err == nil {
				_, err = f.Write([]byte("x"))
				f.Close()
			}
			return err
		}},
	}
	for i, c := range cases {
		p := filepath.Join(dir, fmt.Sprintf("f%d", i))
		writeFile(t, p, "content")
		must(t, syscall.Chmod(p, c.mode))
		if st := lstat(t, p); st.Mode&0o7777 != c.mode {
			t.Fatalf("%s: chmod %o gave mode %o", c.name, c.mode, st.Mode&0o7777)
		}
		if c.op != nil {
			op := *c.op
			op.Path = p
			if got := asUser(t, nobody, nobody, op); got[0] != 0 {
				t.Errorf("%s as uid %d: %v", c.name, nobody, got[0])
				continue
			}
		} else {
			must(t, c.root(p))
		}
		if st := lstat(t, p); st.Mode&0o7777 != c.want {
			t.Errorf("%s: mode %o after, want %o", c.name, st.Mode&0o7777, c.want)
		}
	}
}
