package fuse

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestDeferredAttrs: the attribute changes that restore a created file's
// recorded state (futimens, then the same owner, then wider permission
// bits, as tar does) are seen at once on the mount that made them and by
// other clients at the close, in one metadata request; a narrower mode
// is seen by other clients at once; a write after a held modification
// time wins over it, as it would have; fsync sends what is held.
func TestDeferredAttrs(t *testing.T) {
	requireFUSE(t)
	addr, admin := startServerAdmin(t)
	m := startMount(t, addr)
	defer m.stop()
	c := proctest.Client(t, addr)
	ctx := context.Background()
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	remote := func(name string) (os.FileMode, time.Time) {
		t.Helper()
		fi, err := c.Lstat(ctx, "/"+name)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm(), fi.ModTime()
	}
	local := func(name string) (os.FileMode, time.Time) {
		t.Helper()
		fi, err := os.Lstat(m.path(name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm(), fi.ModTime()
	}
	create := func(name string, mode uint32) *os.File {
		t.Helper()
		f, err := os.OpenFile(m.path(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, os.FileMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("data of " + name)); err != nil {
			t.Fatal(err)
		}
		return f
	}
	restore := func(f *os.File) {
		t.Helper()
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime.UnixNano())}
		must(t, unix.UtimesNanoAt(int(f.Fd()), "", ts, unix.AT_EMPTY_PATH))
		must(t, f.Chown(0, 0))
		must(t, f.Chmod(0o644))
	}

	// The tar pattern: held until the close, then one request with the
	// data (write_inline_attr), or two where the data goes elsewhere.
	ops := func() (setattr, inline, both int) {
		return opCount(t, admin, "setattr"), opCount(t, admin, "write_inline"), opCount(t, admin, "write_inline_attr")
	}
	setattr0, inline0, both0 := ops()
	f := create("a", 0o600)
	restore(f)
	if mode, mt := local("a"); mode != 0o644 || !mt.Equal(mtime) {
		t.Errorf("on the mount before the close: %v %v, want 0644 %v", mode, mt, mtime)
	}
	if mode, _ := remote("a"); mode != 0o600 {
		t.Errorf("another client before the close: mode %v, want the create's 0600 (held until the close)", mode)
	}
	must(t, f.Close())
	if mode, mt := remote("a"); mode != 0o644 || !mt.Equal(mtime) {
		t.Errorf("another client after the close: %v %v, want 0644 %v", mode, mt, mtime)
	}
	if setattr, inline, both := ops(); setattr != setattr0 || inline != inline0 || both != both0+1 {
		t.Errorf("the close of a small created file after futimens, fchown and fchmod sent %d setattr, %d inline write and %d inline write with attributes requests: want 0, 0 and 1",
			setattr-setattr0, inline-inline0, both-both0)
	}
	if b, err := os.ReadFile(m.path("a")); err != nil || string(b) != "data of a" {
		t.Errorf("read back %q, %v", b, err)
	}

	// A file too big to keep inline: its data goes to the targets, and
	// the held changes go with its size commit (commit_write_attr).
	commits := func() (commit, withAttr int) {
		return opCount(t, admin, "commit_write"), opCount(t, admin, "commit_write_attr")
	}
	setattr0, _, both0 = ops()
	commit0, withAttr0 := commits()
	big, err := os.OpenFile(m.path("big"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 64<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if _, err := big.Write(data); err != nil {
		t.Fatal(err)
	}
	restore(big)
	must(t, big.Close())
	if mode, mt := remote("big"); mode != 0o644 || !mt.Equal(mtime) {
		t.Errorf("another client after the close of a 64 KiB file: %v %v, want 0644 %v", mode, mt, mtime)
	}
	setattr, _, both := ops()
	commit, withAttr := commits()
	if setattr != setattr0 || both != both0 || commit != commit0 || withAttr != withAttr0+1 {
		t.Errorf("the close of a created 64 KiB file after futimens, fchown and fchmod sent %d setattr, %d inline write with attributes, %d size commit and %d size commit with attributes requests: want 0, 0, 0 and 1",
			setattr-setattr0, both-both0, commit-commit0, withAttr-withAttr0)
	}
	if st, err := os.Stat(m.path("big")); err != nil || st.Size() != int64(len(data)) || st.Mode().Perm() != 0o644 || !st.ModTime().Equal(mtime) {
		t.Errorf("on the mount after the close of the 64 KiB file: %v, %v; want 64 KiB, 0644, %v", st, err, mtime)
	}
	if rf, err := c.Open(ctx, "/big"); err != nil {
		t.Fatal(err)
	} else {
		b, err := io.ReadAll(rf)
		rf.Close()
		if err != nil || !bytes.Equal(b, data) {
			t.Errorf("another client read back %d bytes (%v), want the 64 KiB written", len(b), err)
		}
	}

	// A narrower mode is never held.
	f = create("b", 0o644)
	restore(f)
	must(t, f.Chmod(0o600))
	if mode, _ := remote("b"); mode != 0o600 {
		t.Errorf("another client after a narrowing chmod, before the close: %v, want 0600 at once", mode)
	}
	must(t, f.Close())

	// A write after the held modification time: the write's time wins.
	f = create("c", 0o600)
	restore(f)
	if _, err := f.Write([]byte(" and more")); err != nil {
		t.Fatal(err)
	}
	must(t, f.Close())
	if mode, mt := remote("c"); mode != 0o644 || !mt.After(mtime.Add(time.Hour)) {
		t.Errorf("after a write that followed futimens: %v %v, want 0644 and the write's time", mode, mt)
	}

	// fsync sends what is held.
	f = create("d", 0o600)
	restore(f)
	must(t, f.Sync())
	if mode, mt := remote("d"); mode != 0o644 || !mt.Equal(mtime) {
		t.Errorf("another client after fsync: %v %v, want 0644 %v", mode, mt, mtime)
	}
	must(t, f.Close())

	// A file this mount did not create: nothing is held.
	must(t, proctest.WriteFile(ctx, c, "/e", []byte("theirs")))
	f, err = os.OpenFile(m.path("e"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	restore(f)
	if mode, mt := remote("e"); mode != 0o644 || !mt.Equal(mtime) {
		t.Errorf("another client, file this mount did not create: %v %v, want 0644 %v at once", mode, mt, mtime)
	}
	must(t, f.Close())
	var st syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(m.dir, "a"), &st))
	if st.Uid != 0 || st.Gid != 0 {
		t.Errorf("owner %d:%d, want 0:0", st.Uid, st.Gid)
	}
}
