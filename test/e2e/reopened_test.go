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
