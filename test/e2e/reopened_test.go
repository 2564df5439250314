package e2e

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/sluice-fs/sluice/client"
)

// TestReopened: a File shared by several opens (as the FUSE mount keeps
// one per inode) takes a smaller size another client cut the file to when
// an open reports it, but not one that its own writes since the open's
// attributes were read may postdate: those bytes stay readable through
// it.
func TestReopened(t *testing.T) {
	s := startServer(t, "")
	ctx := context.Background()
	c, other := s.client(), s.client()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB, in chunks
	f0, err := c.Create(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f0.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f0.Close(); err != nil {
		t.Fatal(err)
	}
	a, err := c.LookupIno(ctx, c.RootIno(), "f")
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.OpenInode(ctx, a, client.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	readAll := func() []byte {
		t.Helper()
		buf := make([]byte, 2<<20)
		n, err := f.ReadAtParallel(ctx, buf, 0)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		return buf[:n]
	}
	if got := readAll(); !bytes.Equal(got, data) {
		t.Fatalf("first read: %d bytes", len(got))
	}

	// Another client cuts the file; an open reports it: f reads the new end.
	tok := f.SizeToken()
	if err := other.Truncate(ctx, "/f", 1000); err != nil {
		t.Fatal(err)
	}
	cut, err := c.GetAttrIno(ctx, a.Ino)
	if err != nil {
		t.Fatal(err)
	}
	f.Reopened(cut, tok)
	if got := readAll(); !bytes.Equal(got, data[:1000]) {
		t.Fatalf("after another client cut the file to 1000 and an open said so: read %d bytes", len(got))
	}

	// An open's attributes read before f's own write and commit: f keeps
	// the size its write made.
	tok = f.SizeToken()
	stale, err := c.GetAttrIno(ctx, a.Ino)
	if err != nil {
		t.Fatal(err)
	}
	more := bytes.Repeat([]byte("X"), 5000)
	if _, err := f.WriteAt(more, 1000); err != nil {
		t.Fatal(err)
	}
	if err := f.FlushContext(ctx); err != nil {
		t.Fatal(err)
	}
	f.Reopened(stale, tok)
	want := append(bytes.Clone(data[:1000]), more...)
	if got := readAll(); !bytes.Equal(got, want) {
		t.Fatalf("an open's attributes from before f's own write cut f's view: read %d bytes, want %d", len(got), len(want))
	}
}

// TestPendingSince: a File's data counts as pending since a token for as
// long as it was buffered or being committed at any moment after the token
// was taken, also once it is committed (attributes read after the token
// may predate the commit); not for a token taken after the commit.
func TestPendingSince(t *testing.T) {
	s := startServer(t, "")
	ctx := context.Background()
	c := s.client()
	f, err := c.Create(ctx, "/p")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := c.PendingToken()
	if f.PendingSince(before) {
		t.Fatal("a new file with no writes is pending")
	}
	// Large enough for chunks (a background flush and a size commit).
	if _, err := f.WriteAt(bytes.Repeat([]byte("x"), 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	during := c.PendingToken()
	if !f.Pending() || !f.PendingSince(before) || !f.PendingSince(during) {
		t.Fatal("buffered data is not pending")
	}
	if err := f.FlushContext(ctx); err != nil {
		t.Fatal(err)
	}
	if f.Pending() {
		t.Fatal("pending after its flush returned")
	}
	if !f.PendingSince(before) || !f.PendingSince(during) {
		t.Error("data committed after the token was taken does not count as pending since it")
	}
	after := c.PendingToken()
	if f.PendingSince(after) {
		t.Error("pending since a token taken after the commit")
	}
	// Another File's commit does not make this one pending.
	g, err := c.Create(ctx, "/q")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt([]byte("small"), 0); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if f.PendingSince(after) {
		t.Error("another file's commit made this one pending")
	}
	if !g.PendingSince(after) {
		t.Error("a small file's write committed with its close does not count as pending since the token")
	}
}

// TestReopenedAfterCommit: attributes read after a File's size token was
// taken but before its own writes' commit ended (a read sends buffered
// writes and returns before their size commit) do not lower its size,
// though it holds nothing uncommitted when they are passed on.
func TestReopenedAfterCommit(t *testing.T) {
	s := startServer(t, "")
	ctx := context.Background()
	c := s.client()
	writeFile(t, c, "/r", bytes.Repeat([]byte("a"), 1000))
	old, err := c.LookupIno(ctx, c.RootIno(), "r")
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.OpenInode(ctx, old, client.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := bytes.Repeat([]byte("b"), 2<<20)
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	tok := f.SizeToken()
	if err := f.FlushContext(ctx); err != nil {
		t.Fatal(err)
	}
	// old stands for a reply the service sent before the commit.
	f.Reopened(old, tok)
	if got := f.KnownSize(); got != int64(len(data)) {
		t.Fatalf("size %d after attributes from before its own commit, want %d", got, len(data))
	}
}
