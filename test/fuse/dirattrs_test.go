package fuse

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestDirAttrsFromReplies: the metadata service sends a directory's new
// attributes with the reply to a create, mkdir, unlink or rmdir in it, and
// the mount answers the kernel's next getattr of that directory from them
// (internal/fusefs/dirattrs.go, ADR 0014). Counted at the metadata service
// (its metrics): creating and removing files in a directory through the
// mount asks it for the directory's attributes far fewer times than there
// are files (the kernel asks the mount once per file). The attributes the
// mount gives are the service's: after each kind of change, stat of the
// directory on the mount equals what the client library reads, including
// after changes the replies do not describe (chmod, rename, symlink).
func TestDirAttrsFromReplies(t *testing.T) {
	requireFUSE(t)
	addr, admin := startServerAdmin(t)
	m := startMount(t, addr)
	defer m.stop()
	c := proctest.Client(t, addr)
	ctx := context.Background()

	getattrs := func() int { return opCount(t, admin, "getattr") }
	// same checks that stat of /d on the mount shows what the service has.
	same := func(what string) {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(m.path("d"), &st); err != nil {
			t.Fatalf("%s: stat: %v", what, err)
		}
		fi, err := c.Stat(ctx, "/d")
		if err != nil {
			t.Fatalf("%s: library stat: %v", what, err)
		}
		a, err := c.GetAttrIno(ctx, fi.Attr().Ino)
		if err != nil {
			t.Fatalf("%s: library getattr: %v", what, err)
		}
		mtime := st.Mtim.Sec*1e9 + st.Mtim.Nsec
		ctime := st.Ctim.Sec*1e9 + st.Ctim.Nsec
		if mtime != a.Mtime || ctime != a.Ctime || st.Mode != a.Mode || uint64(st.Nlink) != uint64(a.Nlink) {
			t.Fatalf("%s: mount says mtime %d ctime %d mode %#o nlink %d; service says mtime %d ctime %d mode %#o nlink %d",
				what, mtime, ctime, st.Mode, st.Nlink, a.Mtime, a.Ctime, a.Mode, a.Nlink)
		}
	}

	if err := os.Mkdir(m.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 200
	before := getattrs()
	for i := range n {
		f, err := os.OpenFile(m.path("d", fmt.Sprint("f", i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	created := getattrs() - before
	same("after creates")
	before = getattrs()
	for i := range n {
		if err := os.Remove(m.path("d", fmt.Sprint("f", i))); err != nil {
			t.Fatal(err)
		}
	}
	removed := getattrs() - before
	same("after unlinks")
	t.Logf("metadata getattr requests: %d for %d creates, %d for %d unlinks", created, n, removed, n)
	if created > n/4 || removed > n/4 {
		t.Errorf("the metadata service was asked for attributes %d times during %d creates and %d times during %d unlinks: the mount does not answer the directory's getattr from the replies", created, n, removed, n)
	}

	if err := os.Mkdir(m.path("d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	same("after mkdir")
	if err := os.WriteFile(m.path("d", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(m.path("d"), 0o700); err != nil {
		t.Fatal(err)
	}
	same("after chmod")
	if err := os.WriteFile(m.path("d", "y"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.path("d", "y"), m.path("d", "z")); err != nil {
		t.Fatal(err)
	}
	same("after rename")
	if err := os.Symlink("z", m.path("d", "l")); err != nil {
		t.Fatal(err)
	}
	same("after symlink")
	if err := os.Remove(m.path("d", "sub")); err != nil {
		t.Fatal(err)
	}
	same("after rmdir")
}
