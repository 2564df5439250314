package meta

import (
	"bytes"
	"context"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestPutFile: one request creates a whole small file with its xattrs in
// a directory found by path, replaces a file of that name as a rename
// would (the old inode, its inline bytes and xattrs go), and refuses what
// it must without changing anything.
func TestPutFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	d := mustMkdir(t, s, RootIno, "b")
	mustMkdir(t, s, d.Ino, "sub")
	put := func(dir, name, data string, flags uint32, x ...wire.XattrPair) (wire.EntryResp, error) {
		return s.PutFile(ctx, &wire.PutFileReq{Dir: dir, Name: name, Mode: 0o640, Flags: flags, Mtime: 12345,
			Cred: wire.Cred{Uid: 7, Gid: 8}, Data: []byte(data), Xattrs: x})
	}
	r, err := put("/b", "k", "first", wire.PutSync, wire.XattrPair{Name: "user.s3.meta", Value: []byte("m1")})
	if err != nil {
		t.Fatal(err)
	}
	a := r.Attr
	if a.Size != 5 || a.InlineLen != 5 || a.Mode&0o7777 != 0o640 || a.Uid != 7 || a.Gid != 8 || a.Mtime != 12345 || a.Nlink != 1 {
		t.Fatalf("new file: %+v", a)
	}
	if r.Dir == nil || r.Dir.Ino != d.Ino {
		t.Fatalf("reply's directory: %+v, want inode %d", r.Dir, d.Ino)
	}
	if got, err := s.Lookup(ctx, d.Ino, "k"); err != nil || got.Ino != a.Ino {
		t.Fatalf("lookup: %+v %v", got, err)
	}
	if got := readInline(t, s, a.Ino, 0, 100); string(got.Data) != "first" {
		t.Fatalf("data %q", got.Data)
	}
	if v, err := s.GetXattr(ctx, a.Ino, "user.s3.meta"); err != nil || string(v) != "m1" {
		t.Fatalf("xattr: %q %v", v, err)
	}

	// Replace: a new inode; the old one, its bytes and xattrs are gone.
	r2, err := put("/b", "k", "second!", 0, wire.XattrPair{Name: "user.s3.meta", Value: []byte("m2")})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Attr.Ino == a.Ino {
		t.Fatal("replace kept the inode")
	}
	if _, err := s.GetAttr(ctx, a.Ino); errs.CodeOf(err) != errs.NotFound {
		t.Errorf("old inode after the replace: %v, want NotFound", err)
	}
	if n := countKeys(t, s.db, inlineKey(a.Ino)); n != 0 {
		t.Errorf("old inode's inline bytes: %d keys left", n)
	}
	if n := countKeys(t, s.db, xattrKey(a.Ino, "user.s3.meta")); n != 0 {
		t.Errorf("old inode's xattr: %d keys left", n)
	}
	if got := readInline(t, s, r2.Attr.Ino, 0, 100); string(got.Data) != "second!" {
		t.Fatalf("data after replace %q", got.Data)
	}

	// A hard link to the old file keeps it, as with rename.
	if _, err := s.Link(ctx, r2.Attr.Ino, d.Ino, "k2"); err != nil {
		t.Fatal(err)
	}
	r3, err := put("/b", "k", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetAttr(ctx, r2.Attr.Ino); err != nil || got.Nlink != 1 || got.Size != 7 {
		t.Errorf("linked old file after the replace: %+v %v", got, err)
	}
	if r3.Attr.Size != 0 || r3.Attr.InlineLen != 0 {
		t.Errorf("empty file: %+v", r3.Attr)
	}

	// Refusals change nothing.
	before := countKeys(t, s.db, nil)
	for _, tc := range []struct {
		name       string
		dir, entry string
		data       []byte
		flags      uint32
		want       errs.Code
	}{
		{"no replace", "/b", "k", nil, wire.PutNoReplace, errs.Exists},
		{"directory there", "/b", "sub", nil, 0, errs.IsDir},
		{"missing directory", "/b/none", "k", nil, 0, errs.NotFound},
		{"file as directory", "/b/k", "x", nil, 0, errs.NotDir},
		{"too big", "/b", "big", bytes.Repeat([]byte("x"), DefaultInlineMax+1), 0, errs.TooBig},
		{"bad name", "/b", "a/b", nil, 0, errs.Invalid},
		{"bad flags", "/b", "z", nil, 1 << 7, errs.Invalid},
	} {
		_, err := s.PutFile(ctx, &wire.PutFileReq{Dir: tc.dir, Name: tc.entry, Mode: 0o644, Flags: tc.flags, Data: tc.data})
		if errs.CodeOf(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if after := countKeys(t, s.db, nil); after != before {
		t.Errorf("refused puts changed the store: %d keys, were %d", after, before)
	}
}
