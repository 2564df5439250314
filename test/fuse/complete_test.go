package fuse

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestCompleteDirs: in a directory the mount made itself, a lookup of a
// name the mount does not hold is answered without the metadata service
// (the lookup the kernel sends before every create of a new name), while
// the change feed is live; names that another client adds or removes
// there are still seen within the feed's bound (the report drops the
// directory's tracking), and so are this mount's own creates, renames,
// links and removals at once.
func TestCompleteDirs(t *testing.T) {
	requireFUSE(t)
	addr, admin := startServerAdmin(t)
	polls := opCount(t, admin, "watch")
	m := startMount(t, addr)
	defer m.stop()
	waitFeedLive(t, admin, polls)
	d := m.path("made")
	must(t, os.Mkdir(d, 0o755))
	must(t, os.Mkdir(d+"/sub", 0o755))
	const n = 200
	before := opCount(t, admin, "lookup")
	for i := range n {
		writeFile(t, fmt.Sprintf("%s/f%d", d, i), "x")
	}
	must(t, os.Rename(d+"/f0", d+"/sub/g0"))
	must(t, os.Link(d+"/f1", d+"/l1"))
	must(t, os.Symlink("f2", d+"/s2"))
	must(t, os.Remove(d+"/f3"))
	for _, p := range []string{"nope", "sub/nope", "f0", "f3"} {
		if _, err := os.Lstat(d + "/" + p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("lstat %s: %v, want no such file", p, err)
		}
	}
	for _, p := range []string{"sub/g0", "l1", "s2", "f4"} {
		if _, err := os.Lstat(d + "/" + p); err != nil {
			t.Errorf("lstat %s: %v", p, err)
		}
	}
	if got := opCount(t, admin, "lookup") - before; got > 10 {
		t.Errorf("%d metadata lookups for %d creates and 4 absent names in directories this mount made; want them answered by the mount", got, n)
	}
	// The rename out of "made" dropped its tracking (a rename onto
	// another link of the same inode keeps the source name): its lookups
	// ask again; "sub", the rename's target, is still known.
	before = opCount(t, admin, "lookup")
	if _, err := os.Lstat(d + "/sub/nope3"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lstat sub/nope3: %v", err)
	}
	if got := opCount(t, admin, "lookup") - before; got != 0 {
		t.Errorf("a lookup in the rename's target directory asked the metadata service (%d)", got)
	}
	if _, err := os.Lstat(d + "/nope3"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lstat nope3: %v", err)
	}
	if opCount(t, admin, "lookup") == before {
		t.Errorf("a lookup in the directory a name was renamed out of was answered by the mount")
	}

	// Another client adds and removes names there: seen within the bound.
	c := proctest.Client(t, addr)
	ctx := context.Background()
	must(t, proctest.WriteFile(ctx, c, "/made/theirs", []byte("y")))
	must(t, proctest.WriteFile(ctx, c, "/made/sub/theirs", []byte("z")))
	must(t, c.Remove(ctx, "/made/f5"))
	check := func() error {
		if b, err := os.ReadFile(d + "/theirs"); err != nil || string(b) != "y" {
			return fmt.Errorf("another client's new file: %q, %v", b, err)
		}
		if b, err := os.ReadFile(d + "/sub/theirs"); err != nil || string(b) != "z" {
			return fmt.Errorf("another client's new file in a subdirectory: %q, %v", b, err)
		}
		if _, err := os.Lstat(d + "/f5"); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("another client's removal: %v", err)
		}
		return nil
	}
	deadline := time.Now().Add(feedBound)
	for err := check(); err != nil; err = check() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", feedBound, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The mount asks the metadata service again in those directories.
	before = opCount(t, admin, "lookup")
	if _, err := os.Lstat(d + "/nope2"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lstat nope2: %v", err)
	}
	if opCount(t, admin, "lookup") == before {
		t.Errorf("a lookup in a directory another client changed was answered by the mount")
	}
}
