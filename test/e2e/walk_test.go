package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// TestWalk checks client.Walk, which lists each directory with its
// entries' attributes a page at a time: every path exactly once,
// directories before their entries, entries in name order, across pages
// (a directory of 2,500 entries, more than one page of 1,024), each with
// the attributes a stat gives; fs.SkipDir skips a directory's entries; a
// file is walked alone; a missing path reaches fn as its error.
func TestWalk(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := s.client()
	ctx := context.Background()
	want := []string{"/w"}
	mkdir := func(p string) {
		t.Helper()
		if err := c.Mkdir(ctx, p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mkdir("/w")
	mkdir("/w/a")
	want = append(want, "/w/a")
	for i := range 2500 {
		p := fmt.Sprintf("/w/a/%04d", i)
		writeFile(t, c, p, []byte(p[:i%7]))
		want = append(want, p)
	}
	mkdir("/w/b")
	mkdir("/w/b/skip")
	writeFile(t, c, "/w/b/skip/hidden", []byte("x"))
	writeFile(t, c, "/w/b/z", []byte("zz"))
	if err := c.Symlink(ctx, "/w/a/0001", "/w/link"); err != nil {
		t.Fatal(err)
	}
	want = append(want, "/w/b", "/w/b/skip", "/w/b/z", "/w/link")
	var got []string
	err := c.Walk(ctx, "/w", func(p string, fi *client.FileInfo, err error) error {
		if err != nil {
			return err
		}
		got = append(got, p)
		st, err := c.Lstat(ctx, p)
		if err != nil {
			return err
		}
		if fi.Size() != st.Size() || fi.Mode() != st.Mode() || fi.Attr().Ino != st.Attr().Ino || !fi.ModTime().Equal(st.ModTime()) {
			t.Errorf("%s: walked %v %v ino %d, stat %v %v ino %d", p, fi.Mode(), fi.Size(), fi.Attr().Ino, st.Mode(), st.Size(), st.Attr().Ino)
		}
		if p == "/w/b/skip" {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("walked %d paths, want %d; first difference at %d", len(got), len(want), firstPathDiff(got, want))
	}
	got = nil
	if err := c.Walk(ctx, "/w/b/z", func(p string, _ *client.FileInfo, err error) error { got = append(got, p); return err }); err != nil || !slices.Equal(got, []string{"/w/b/z"}) {
		t.Errorf("walk of a file: %v, %v", got, err)
	}
	var seen error
	err = c.Walk(ctx, "/nowhere", func(_ string, fi *client.FileInfo, err error) error { seen = err; return nil })
	if err != nil || errs.CodeOf(seen) != errs.NotFound {
		t.Errorf("walk of a missing path: %v, fn saw %v; want NotFound given to fn", err, seen)
	}
	stop := errors.New("stop")
	n := 0
	if err := c.Walk(ctx, "/w", func(string, *client.FileInfo, error) error {
		if n++; n == 100 {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) || n != 100 {
		t.Errorf("walk stopped by fn: %v after %d paths", err, n)
	}
}

func firstPathDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
