package meta

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// tickClock is a clock that advances 1ms per reading.
type tickClock struct{ ns atomic.Int64 }

func newTickClock() *tickClock {
	c := &tickClock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *tickClock) Now() time.Time { return time.Unix(0, c.ns.Add(int64(time.Millisecond))) }

func newClockService(t *testing.T) (*Service, *tickClock) {
	t.Helper()
	db := openTestDB(t)
	c := newTickClock()
	s, err := New(context.Background(), Options{DB: db, Targets: newFakeTargets(4), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, c
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	db := kv.NewMemory()
	defer db.Close()
	ft := newFakeTargets(1)
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"ok", Options{DB: db, Targets: ft}, true},
		{"no db", Options{Targets: ft}, false},
		{"no targets", Options{DB: db}, false},
		{"bad stripe", Options{DB: db, Targets: ft, DefaultLayout: placement.Layout{StripeSize: 1000}}, false},
		{"named targets", Options{DB: db, Targets: ft, DefaultLayout: placement.Layout{StripeSize: 1 << 20, StripeCount: 1, Chains: []placement.ChainID{10}}}, false},
	} {
		if err := tc.o.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v", tc.name, err)
		}
	}
}

func TestFormatAndReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := kv.NewMemory()
	defer db.Close()
	s1 := newTestService(t, db, nil)
	root, err := s1.GetAttr(ctx, RootIno)
	if err != nil {
		t.Fatal(err)
	}
	if root.Mode != modeDir|0o755 || root.Nlink != 2 {
		t.Fatalf("root attr %+v", root)
	}
	if len(s1.FSID()) != 32 {
		t.Fatalf("FSID %q", s1.FSID())
	}
	a := mustCreate(t, s1, RootIno, "f")
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := newTestService(t, db, nil)
	if s2.FSID() != s1.FSID() {
		t.Fatalf("FSID changed on reopen: %q then %q", s1.FSID(), s2.FSID())
	}
	if _, err := s2.Lookup(ctx, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	b := mustCreate(t, s2, RootIno, "g")
	if b.Ino <= a.Ino {
		t.Fatalf("inode number %d reused or went back after reopen (had %d)", b.Ino, a.Ino)
	}
	st, err := s2.Statfs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Inodes != 3 || st.Targets != 4 || st.Capacity != 4<<40 || st.Free != 4*(1<<40-1<<30) {
		t.Fatalf("statfs %+v", st)
	}
	ci, err := s2.Cluster(ctx)
	if err != nil || ci.FSID != s1.FSID() || ci.RootIno != RootIno || len(ci.Targets) != 4 {
		t.Fatalf("cluster %+v, %v", ci, err)
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	f := mustCreate(t, s, RootIno, "file")
	long := strings.Repeat("n", 256)
	ops := map[string]func(name string) error{
		"create": func(n string) error {
			_, err := s.Create(ctx, &wire.CreateReq{Parent: RootIno, Name: n, Mode: 0o644})
			return err
		},
		"mkdir": func(n string) error {
			_, err := s.Mkdir(ctx, &wire.CreateReq{Parent: RootIno, Name: n, Mode: 0o755})
			return err
		},
		"symlink": func(n string) error {
			_, err := s.Symlink(ctx, &wire.SymlinkReq{Parent: RootIno, Name: n, Target: "x"})
			return err
		},
		"lookup": func(n string) error { _, err := s.Lookup(ctx, RootIno, n); return err },
		"unlink": func(n string) error { return s.Unlink(ctx, RootIno, n) },
		"rmdir":  func(n string) error { return s.Rmdir(ctx, RootIno, n) },
		"link":   func(n string) error { _, err := s.Link(ctx, f.Ino, RootIno, n); return err },
		"rename1": func(n string) error {
			return s.Rename(ctx, &wire.RenameReq{OldParent: RootIno, OldName: n, NewParent: RootIno, NewName: "z"})
		},
		"rename2": func(n string) error {
			return s.Rename(ctx, &wire.RenameReq{OldParent: RootIno, OldName: "file", NewParent: RootIno, NewName: n})
		},
	}
	for _, tc := range []struct {
		name string
		code errs.Code
	}{
		{long, errs.NameTooLong},
		{"", errs.Invalid},
		{".", errs.Invalid},
		{"..", errs.Invalid},
		{"a/b", errs.Invalid},
		{"a\x00b", errs.Invalid},
	} {
		for op, fn := range ops {
			err := fn(tc.name)
			wantCode(t, op+" "+strings.ReplaceAll(tc.name[:min(len(tc.name), 8)], "\x00", "\\0"), err, tc.code)
			if !strings.Contains(err.Error(), "meta: ") {
				t.Errorf("%s: error %q does not name the package", op, err)
			}
		}
	}
	// 255 bytes is fine.
	if _, err := s.Create(ctx, &wire.CreateReq{Parent: RootIno, Name: long[:255], Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
}

func TestCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newClockService(t)
	root0, _ := s.GetAttr(ctx, RootIno)
	a, err := s.Create(ctx, &wire.CreateReq{Parent: RootIno, Name: "f", Mode: modeReg | 0o7644, Cred: wire.Cred{Uid: 7, Gid: 8}, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if a.Mode != modeReg|0o7644 || a.Nlink != 1 || a.Uid != 7 || a.Gid != 8 || a.Size != 0 || a.Mtime == 0 || a.Ctime != a.Mtime {
		t.Fatalf("attr %+v", a)
	}
	if a.Layout.StripeSize != placement.DefaultStripeSize || a.Layout.StripeCount != 4 || len(a.Layout.Chains) != 4 {
		t.Fatalf("layout %v", a.Layout)
	}
	if err := a.Layout.Validate(); err != nil {
		t.Fatal(err)
	}
	root1, _ := s.GetAttr(ctx, RootIno)
	if root1.Mtime <= root0.Mtime || root1.Ctime <= root0.Ctime || root1.Nlink != 2 {
		t.Fatalf("root times not updated by create: %+v then %+v", root0, root1)
	}
	// O_CREAT without O_EXCL returns the existing file.
	b, err := s.Create(ctx, &wire.CreateReq{Parent: RootIno, Name: "f", Mode: 0o600})
	if err != nil || b.Ino != a.Ino || b.Mode != a.Mode {
		t.Fatalf("non-exclusive create of existing file: %+v, %v", b, err)
	}
	_, err = s.Create(ctx, &wire.CreateReq{Parent: RootIno, Name: "f", Mode: 0o600, Exclusive: true})
	wantCode(t, "exclusive create of existing", err, errs.Exists)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("errors.Is(%v, fs.ErrExist) is false", err)
	}
	d := mustMkdir(t, s, RootIno, "d")
	_, err = s.Create(ctx, &wire.CreateReq{Parent: RootIno, Name: "d", Mode: 0o600})
	wantCode(t, "create over a directory", err, errs.IsDir)
	_, err = s.Create(ctx, &wire.CreateReq{Parent: a.Ino, Name: "x", Mode: 0o600})
	wantCode(t, "create in a file", err, errs.NotDir)
	_, err = s.Create(ctx, &wire.CreateReq{Parent: 9999, Name: "x", Mode: 0o600})
	wantCode(t, "create in missing dir", err, errs.NotFound)
	_, err = s.Create(ctx, &wire.CreateReq{Parent: d.Ino, Name: "x", Mode: modeDir | 0o600})
	wantCode(t, "create of a directory", err, errs.Invalid)

	for _, tc := range []struct {
		name string
		mode uint32
		rdev uint32
	}{
		{"fifo", modeFifo | 0o600, 0},
		{"chr", modeChar | 0o600, 0x0501},
		{"blk", modeBlock | 0o600, 0x0802},
		{"sock", modeSocket | 0o600, 0},
	} {
		n, err := s.Create(ctx, &wire.CreateReq{Parent: d.Ino, Name: tc.name, Mode: tc.mode, Rdev: tc.rdev, Exclusive: true})
		if err != nil {
			t.Fatalf("mknod %s: %v", tc.name, err)
		}
		if n.Mode != tc.mode || n.Rdev != tc.rdev || len(n.Layout.Chains) != 0 {
			t.Fatalf("mknod %s: %+v", tc.name, n)
		}
		_, err = s.Create(ctx, &wire.CreateReq{Parent: d.Ino, Name: tc.name, Mode: tc.mode})
		wantCode(t, "mknod over existing "+tc.name, err, errs.Exists)
	}
	es := listAll(t, s, d.Ino, 2)
	if len(es) != 4 || es[0].Name != "blk" || es[0].Mode != modeBlock || es[3].Name != "sock" {
		t.Fatalf("entries %+v", es)
	}
}

func TestMkdirRmdir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	a := mustMkdir(t, s, RootIno, "a")
	if a.Mode != modeDir|0o755 || a.Nlink != 2 {
		t.Fatalf("attr %+v", a)
	}
	b := mustMkdir(t, s, a.Ino, "b")
	mustCreate(t, s, a.Ino, "f")
	if r, _ := s.GetAttr(ctx, RootIno); r.Nlink != 3 {
		t.Fatalf("root nlink %d, want 3", r.Nlink)
	}
	if x, _ := s.GetAttr(ctx, a.Ino); x.Nlink != 3 {
		t.Fatalf("a nlink %d, want 3", x.Nlink)
	}
	_, err := s.Mkdir(ctx, &wire.CreateReq{Parent: RootIno, Name: "a", Mode: 0o755})
	wantCode(t, "mkdir existing", err, errs.Exists)
	_, err = s.Mkdir(ctx, &wire.CreateReq{Parent: RootIno, Name: "z", Mode: modeReg | 0o755})
	wantCode(t, "mkdir with file type", err, errs.Invalid)
	wantCode(t, "rmdir non-empty", s.Rmdir(ctx, RootIno, "a"), errs.NotEmpty)
	wantCode(t, "rmdir file", s.Rmdir(ctx, a.Ino, "f"), errs.NotDir)
	wantCode(t, "rmdir missing", s.Rmdir(ctx, a.Ino, "nope"), errs.NotFound)
	wantCode(t, "unlink dir", s.Unlink(ctx, a.Ino, "b"), errs.IsDir)
	if err := s.SetXattr(ctx, &wire.XattrReq{Ino: b.Ino, Name: "user.x", Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Rmdir(ctx, a.Ino, "b"); err != nil {
		t.Fatal(err)
	}
	if x, _ := s.GetAttr(ctx, a.Ino); x.Nlink != 2 {
		t.Fatalf("a nlink %d after rmdir, want 2", x.Nlink)
	}
	_, err = s.GetAttr(ctx, b.Ino)
	wantCode(t, "getattr removed dir", err, errs.NotFound)
	_, err = s.GetXattr(ctx, b.Ino, "user.x")
	wantCode(t, "xattr of removed dir", err, errs.NotFound)
	_, err = s.Lookup(ctx, a.Ino, "b")
	wantCode(t, "lookup removed dir", err, errs.NotFound)
	_, err = s.Lookup(ctx, a.Ino+100, "b")
	wantCode(t, "lookup in missing dir", err, errs.NotFound)
	f, _ := s.Lookup(ctx, a.Ino, "f")
	_, err = s.Lookup(ctx, f.Ino, "b")
	wantCode(t, "lookup in a file", err, errs.NotDir)
	checkTree(t, s)
}

func TestUnlinkAndLink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newClockService(t)
	d := mustMkdir(t, s, RootIno, "d")
	f := mustCreate(t, s, RootIno, "f")
	l, err := s.Link(ctx, f.Ino, d.Ino, "g")
	if err != nil {
		t.Fatal(err)
	}
	if l.Ino != f.Ino || l.Nlink != 2 || l.Ctime <= f.Ctime {
		t.Fatalf("link attr %+v", l)
	}
	_, err = s.Link(ctx, f.Ino, d.Ino, "g")
	wantCode(t, "link over existing", err, errs.Exists)
	_, err = s.Link(ctx, d.Ino, RootIno, "d2")
	wantCode(t, "link to a directory", err, errs.NotPermitted)
	_, err = s.Link(ctx, 12345, RootIno, "x")
	wantCode(t, "link to missing inode", err, errs.NotFound)
	_, err = s.Link(ctx, f.Ino, f.Ino, "x")
	wantCode(t, "link into a file", err, errs.NotDir)

	d0, _ := s.GetAttr(ctx, d.Ino)
	if err := s.Unlink(ctx, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Lookup(ctx, d.Ino, "g")
	if err != nil || g.Nlink != 1 {
		t.Fatalf("other link after unlink: %+v, %v", g, err)
	}
	wantCode(t, "unlink missing", s.Unlink(ctx, RootIno, "f"), errs.NotFound)
	wantCode(t, "unlink in a file", s.Unlink(ctx, f.Ino, "f"), errs.NotDir)
	if err := s.Unlink(ctx, d.Ino, "g"); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetAttr(ctx, f.Ino)
	wantCode(t, "getattr of freed inode", err, errs.NotFound)
	d1, _ := s.GetAttr(ctx, d.Ino)
	if d1.Mtime <= d0.Mtime || d1.Ctime <= d0.Ctime {
		t.Fatalf("dir times not updated by unlink: %+v then %+v", d0, d1)
	}
	if n, _ := s.PendingGarbage(ctx); n != 1 {
		t.Fatalf("%d files queued for chunk removal, want 1", n)
	}
	checkTree(t, s)
}

func TestSymlinkAndResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	a := mustMkdir(t, s, RootIno, "a")
	b := mustMkdir(t, s, a.Ino, "b")
	f := mustCreate(t, s, b.Ino, "f")
	symlink := func(parent uint64, name, target string) wire.Attr {
		t.Helper()
		at, err := s.Symlink(ctx, &wire.SymlinkReq{Parent: parent, Name: name, Target: target, Cred: wire.Cred{Uid: 3}})
		if err != nil {
			t.Fatalf("symlink %s -> %s: %v", name, target, err)
		}
		return at
	}
	rel := symlink(a.Ino, "rel", "b/f")         // /a/rel -> b/f
	abs := symlink(RootIno, "abs", "/a/b")      // /abs -> /a/b
	up := symlink(b.Ino, "up", "../../abs/./f") // /a/b/up -> ../../abs/./f
	symlink(RootIno, "loop1", "loop2")
	symlink(RootIno, "loop2", "/loop1")
	symlink(RootIno, "dangling", "nowhere")
	if rel.Mode != modeLink|0o777 || rel.Size != 3 || rel.Uid != 3 || rel.Nlink != 1 {
		t.Fatalf("symlink attr %+v", rel)
	}
	if got, err := s.Readlink(ctx, up.Ino); err != nil || got != "../../abs/./f" {
		t.Fatalf("readlink = %q, %v", got, err)
	}
	_, err := s.Readlink(ctx, f.Ino)
	wantCode(t, "readlink of a file", err, errs.Invalid)
	_, err = s.Symlink(ctx, &wire.SymlinkReq{Parent: RootIno, Name: "long", Target: strings.Repeat("x", MaxPathLen+1)})
	wantCode(t, "symlink target too long", err, errs.NameTooLong)
	if _, err = s.Symlink(ctx, &wire.SymlinkReq{Parent: RootIno, Name: "long", Target: strings.Repeat("x", MaxPathLen)}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Symlink(ctx, &wire.SymlinkReq{Parent: RootIno, Name: "abs", Target: "x"})
	wantCode(t, "symlink over existing", err, errs.Exists)

	// A chain of exactly 40 links resolves; 41 is a loop.
	prev := "/a/b/f"
	for i := range 41 {
		name := "c" + string(rune('A'+i/26)) + string(rune('a'+i%26))
		symlink(RootIno, name, prev)
		prev = "/" + name
		if i == 39 {
			if at, err := s.Resolve(ctx, prev, true); err != nil || at.Ino != f.Ino {
				t.Fatalf("chain of 40 symlinks: %+v, %v", at, err)
			}
		}
	}
	_, err = s.Resolve(ctx, prev, true)
	wantCode(t, "chain of 41 symlinks", err, errs.Loop)

	for _, tc := range []struct {
		path   string
		follow bool
		ino    uint64
		code   errs.Code
	}{
		{"/", false, RootIno, errs.OK},
		{"", false, RootIno, errs.OK},
		{"/..", false, RootIno, errs.OK},
		{"/a/b/f", false, f.Ino, errs.OK},
		{"a//./b/../b/f", false, f.Ino, errs.OK},
		{"/a/b/..", false, a.Ino, errs.OK},
		{"/a/rel", false, rel.Ino, errs.OK},
		{"/a/rel", true, f.Ino, errs.OK},
		{"/abs/f", false, f.Ino, errs.OK},
		{"/abs", false, abs.Ino, errs.OK},
		{"/abs/", false, b.Ino, errs.OK},
		{"/abs/.", false, b.Ino, errs.OK},
		{"/abs/../b", false, b.Ino, errs.OK}, // ".." of the link's target, not of "/"
		{"/a/b/up", true, f.Ino, errs.OK},
		{"/a/b/up", false, up.Ino, errs.OK},
		{"/loop1", false, 0, errs.OK},
		{"/loop1", true, 0, errs.Loop},
		{"/loop1/x", false, 0, errs.Loop},
		{"/dangling", true, 0, errs.NotFound},
		{"/a/nope/f", false, 0, errs.NotFound},
		{"/a/b/f/x", false, 0, errs.NotDir},
		{"/a/b/f/", false, 0, errs.NotDir},
		{"/a/b/f/..", false, 0, errs.NotDir},
		{"/a/rel/x", false, 0, errs.NotDir},
		{"/" + strings.Repeat("n", 256), false, 0, errs.NameTooLong},
		{"/" + strings.Repeat("a/", 2048), false, 0, errs.NameTooLong},
	} {
		at, err := s.Resolve(ctx, tc.path, tc.follow)
		wantCode(t, "resolve "+tc.path[:min(len(tc.path), 40)], err, tc.code)
		if tc.code == errs.OK && tc.ino != 0 && at.Ino != tc.ino {
			t.Errorf("resolve %q follow=%v: inode %d, want %d", tc.path, tc.follow, at.Ino, tc.ino)
		}
	}
	checkTree(t, s)
}

func TestSetAttr(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clock := newClockService(t)
	f := mustCreate(t, s, RootIno, "f")
	d := mustMkdir(t, s, RootIno, "d")
	a, err := s.SetAttr(ctx, &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetMode | wire.SetUid | wire.SetGid, Mode: modeDir | 0o104755, Uid: 5, Gid: 6})
	if err != nil {
		t.Fatal(err)
	}
	if a.Mode != modeReg|0o4755 || a.Uid != 5 || a.Gid != 6 || a.Ctime <= f.Ctime || a.Mtime != f.Mtime {
		t.Fatalf("after chmod/chown: %+v (was %+v)", a, f)
	}
	a, err = s.SetAttr(ctx, &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetAtime | wire.SetMtime, Atime: 111, Mtime: 222})
	if err != nil || a.Atime != 111 || a.Mtime != 222 {
		t.Fatalf("utimes: %+v, %v", a, err)
	}
	before := clock.ns.Load()
	a, err = s.SetAttr(ctx, &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetAtimeNow | wire.SetMtimeNow})
	if err != nil || a.Atime <= before || a.Mtime != a.Atime || a.Ctime != a.Atime {
		t.Fatalf("utimes now: %+v, %v (clock was %d)", a, err, before)
	}
	a, err = s.SetAttr(ctx, &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetSize | wire.SetCtime, Size: 12345, Ctime: 999})
	if err != nil || a.Size != 12345 || a.Ctime != 999 {
		t.Fatalf("truncate: %+v, %v", a, err)
	}
	if got, _ := s.GetAttr(ctx, f.Ino); !reflect.DeepEqual(got, a) {
		t.Fatalf("getattr %+v differs from setattr's %+v", got, a)
	}
	_, err = s.SetAttr(ctx, &wire.SetAttrReq{Ino: d.Ino, Valid: wire.SetSize})
	wantCode(t, "truncate dir", err, errs.IsDir)
	_, err = s.SetAttr(ctx, &wire.SetAttrReq{Ino: 4242, Valid: wire.SetMode})
	wantCode(t, "setattr missing", err, errs.NotFound)
	a, err = s.SetAttr(ctx, &wire.SetAttrReq{Ino: d.Ino, Valid: wire.SetMtime | wire.SetMode, Mtime: 77, Mode: 0o700})
	if err != nil || a.Mtime != 77 || a.Mode != modeDir|0o700 || a.Ctime <= d.Ctime {
		t.Fatalf("dir setattr: %+v, %v", a, err)
	}
	mustCreate(t, s, d.Ino, "x")
	if g, _ := s.GetAttr(ctx, d.Ino); g.Mtime <= 77 || g.Mode != modeDir|0o700 {
		t.Fatalf("dir after create: %+v", g)
	}
}

func TestCommitWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	f := mustCreate(t, s, RootIno, "f")
	a, err := s.CommitWrite(ctx, f.Ino, 100, 5000)
	if err != nil || a.Size != 100 || a.Mtime != 5000 || a.Ctime != 5000 {
		t.Fatalf("commit: %+v, %v", a, err)
	}
	a, err = s.CommitWrite(ctx, f.Ino, 50, 6000)
	if err != nil || a.Size != 100 || a.Mtime != 6000 {
		t.Fatalf("commit below size: %+v, %v", a, err)
	}
	_, err = s.CommitWrite(ctx, RootIno, 1, 1)
	wantCode(t, "commit to dir", err, errs.IsDir)
	_, err = s.CommitWrite(ctx, 777, 1, 1)
	wantCode(t, "commit to missing", err, errs.NotFound)
}

// TestCommitWriteIf: a commit or an inline write whose If fields name the
// file's mtime and size before it answers with wire.AttrUnchanged; one
// after another client's change, or without If fields, does not.
func TestCommitWriteIf(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	f := mustCreate(t, s, RootIno, "f")
	a, err := s.CommitWriteIf(ctx, &wire.CommitWriteReq{Ino: f.Ino, End: 100, Mtime: 5000, IfMtime: f.Mtime, IfSize: f.Size})
	if err != nil || a.Flags&wire.AttrUnchanged == 0 || a.Size != 100 || a.Mtime != 5000 {
		t.Fatalf("commit from the state at create: %+v, %v; want unchanged", a, err)
	}
	a, err = s.CommitWriteIf(ctx, &wire.CommitWriteReq{Ino: f.Ino, End: 200, Mtime: 6000, IfMtime: 5000, IfSize: 100})
	if err != nil || a.Flags&wire.AttrUnchanged == 0 {
		t.Fatalf("commit from the previous commit's state: %+v, %v; want unchanged", a, err)
	}
	if _, err := s.CommitWrite(ctx, f.Ino, 300, 7000); err != nil { // another client
		t.Fatal(err)
	}
	a, err = s.CommitWriteIf(ctx, &wire.CommitWriteReq{Ino: f.Ino, End: 200, Mtime: 8000, IfMtime: 6000, IfSize: 200})
	if err != nil || a.Flags&wire.AttrUnchanged != 0 || a.Size != 300 || a.Mtime != 8000 {
		t.Fatalf("commit after another client's: %+v, %v; want changed, size 300", a, err)
	}
	a, err = s.CommitWriteIf(ctx, &wire.CommitWriteReq{Ino: f.Ino, End: 1, Mtime: 9000})
	if err != nil || a.Flags&wire.AttrUnchanged != 0 {
		t.Fatalf("commit without If fields: %+v, %v; want no AttrUnchanged", a, err)
	}

	a, err = s.SetAttr(ctx, &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetSize | wire.SetMtime, Size: 10, Mtime: 9500, IfMtime: 9000, IfSize: 300})
	if err != nil || a.Flags&wire.AttrUnchanged == 0 || a.Size != 10 {
		t.Fatalf("truncate from the previous commit's state: %+v, %v; want unchanged", a, err)
	}
	a, err = s.SetAttr(ctx, &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetSize, Size: 5, IfMtime: 9000, IfSize: 300})
	if err != nil || a.Flags&wire.AttrUnchanged != 0 {
		t.Fatalf("truncate naming an older state: %+v, %v; want changed", a, err)
	}

	g := mustCreateInline(t, s, RootIno, "g")
	r, err := s.WriteInline(ctx, &wire.WriteInlineReq{Ino: g.Ino, Data: []byte("abc"), Mtime: 100, IfMtime: g.Mtime, IfSize: g.Size})
	if err != nil || r.Attr.Flags&wire.AttrUnchanged == 0 || r.Attr.Size != 3 {
		t.Fatalf("inline write from the state at create: %+v, %v; want unchanged", r, err)
	}
	r, err = s.WriteInline(ctx, &wire.WriteInlineReq{Ino: g.Ino, Off: 3, Data: []byte("d"), Mtime: 200, IfMtime: 99, IfSize: 3})
	if err != nil || r.Attr.Flags&wire.AttrUnchanged != 0 || r.Attr.Size != 4 {
		t.Fatalf("inline write naming another state: %+v, %v; want changed", r, err)
	}
}

func TestLayouts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, newFakeTargets(3))
	f := mustCreate(t, s, RootIno, "f")
	if f.Layout.StripeCount != 3 || len(f.Layout.Chains) != 3 {
		t.Fatalf("default layout with 3 targets: %v", f.Layout)
	}
	l, err := s.GetLayout(ctx, RootIno)
	if err != nil || l.StripeSize != placement.DefaultStripeSize || l.StripeCount != 0 {
		t.Fatalf("root layout %v, %v", l, err)
	}
	wantCode(t, "dir layout over target count", s.SetLayout(ctx, RootIno, placement.Layout{StripeSize: 1 << 20, StripeCount: 4}), errs.Invalid)
	wantCode(t, "dir layout with bad stripe", s.SetLayout(ctx, RootIno, placement.Layout{StripeSize: 100, StripeCount: 1}), errs.Invalid)
	if err := s.SetLayout(ctx, RootIno, placement.Layout{StripeSize: 4 << 20, StripeCount: 2}); err != nil {
		t.Fatal(err)
	}
	d := mustMkdir(t, s, RootIno, "d")
	if d.Layout.StripeSize != 4<<20 || d.Layout.StripeCount != 2 || len(d.Layout.Chains) != 0 {
		t.Fatalf("mkdir did not inherit the default layout: %v", d.Layout)
	}
	g := mustCreate(t, s, d.Ino, "g")
	if g.Layout.StripeSize != 4<<20 || g.Layout.StripeCount != 2 || len(g.Layout.Chains) != 2 {
		t.Fatalf("file in dir with default layout: %v", g.Layout)
	}
	// Placement rotates by inode number over targets sorted by ID.
	want, _ := placement.Choose([]placement.TargetInfo{{ID: 10, Healthy: true, Free: 1}, {ID: 11, Healthy: true, Free: 1}, {ID: 12, Healthy: true, Free: 1}}, 2, g.Ino)
	if !slices.Equal(g.Layout.Chains, chainsOf(want)) {
		t.Fatalf("targets %v, want %v", g.Layout.Chains, want)
	}
	h, err := s.Create(ctx, &wire.CreateReq{Parent: d.Ino, Name: "h", Mode: 0o644, Layout: placement.Layout{StripeSize: 128 << 10, StripeCount: 1}})
	if err != nil || h.Layout.StripeSize != 128<<10 || len(h.Layout.Chains) != 1 {
		t.Fatalf("create with layout: %v, %v", h.Layout, err)
	}
	_, err = s.Create(ctx, &wire.CreateReq{Parent: d.Ino, Name: "i", Mode: 0o644, Layout: placement.Layout{StripeSize: 128 << 10, StripeCount: 5}})
	wantCode(t, "create asking for 5 of 3 targets", err, errs.Invalid)
	if !strings.Contains(err.Error(), "5 targets but only 3") {
		t.Fatalf("unclear error: %v", err)
	}
	_, err = s.Create(ctx, &wire.CreateReq{Parent: d.Ino, Name: "i", Mode: 0o644, Layout: placement.Layout{StripeSize: 128 << 10, StripeCount: 1, Chains: []placement.ChainID{99}}})
	wantCode(t, "create naming a missing target", err, errs.Invalid)
	j, err := s.Create(ctx, &wire.CreateReq{Parent: d.Ino, Name: "j", Mode: 0o644, Layout: placement.Layout{StripeSize: 128 << 10, Chains: []placement.ChainID{12, 10}}})
	if err != nil || !slices.Equal(j.Layout.Chains, []placement.ChainID{12, 10}) || j.Layout.StripeCount != 2 {
		t.Fatalf("create naming targets: %v, %v", j.Layout, err)
	}

	// A file's layout can change while it has no data.
	nl := placement.Layout{StripeSize: 256 << 10, StripeCount: 3}
	if err := s.SetLayout(ctx, g.Ino, nl); err != nil {
		t.Fatal(err)
	}
	if l, err := s.GetLayout(ctx, g.Ino); err != nil || l.StripeSize != 256<<10 || len(l.Chains) != 3 {
		t.Fatalf("file layout after set: %v, %v", l, err)
	}
	if _, err := s.CommitWrite(ctx, g.Ino, 1, 1); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "setlayout of a file with data", s.SetLayout(ctx, g.Ino, nl), errs.Busy)
	sl, _ := s.Symlink(ctx, &wire.SymlinkReq{Parent: RootIno, Name: "sl", Target: "x"})
	_, err = s.GetLayout(ctx, sl.Ino)
	wantCode(t, "getlayout of symlink", err, errs.Invalid)
	// Clearing a directory's default falls back to Options.DefaultLayout.
	if err := s.SetLayout(ctx, d.Ino, placement.Layout{}); err != nil {
		t.Fatal(err)
	}
	if k := mustCreate(t, s, d.Ino, "k"); k.Layout.StripeSize != placement.DefaultStripeSize || k.Layout.StripeCount != 3 {
		t.Fatalf("after clearing default: %v", k.Layout)
	}

	// No targets at all: regular files cannot be placed, other nodes can.
	s0 := newTestService(t, nil, newFakeTargets(0))
	_, err = s0.Create(ctx, &wire.CreateReq{Parent: RootIno, Name: "f", Mode: 0o644})
	wantCode(t, "create without targets", err, errs.NoSpace)
	if _, err := s0.Create(ctx, &wire.CreateReq{Parent: RootIno, Name: "p", Mode: modeFifo | 0o644}); err != nil {
		t.Fatal(err)
	}
}

func TestXattrs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	f := mustCreate(t, s, RootIno, "f")
	set := func(name string, val []byte, flags uint32) error {
		return s.SetXattr(ctx, &wire.XattrReq{Ino: f.Ino, Name: name, Value: val, Flags: flags})
	}
	if err := set("user.b", []byte("2"), 0); err != nil {
		t.Fatal(err)
	}
	if err := set("user.a", nil, wire.XattrCreate); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "create existing", set("user.a", []byte("x"), wire.XattrCreate), errs.Exists)
	wantCode(t, "replace missing", set("user.c", []byte("x"), wire.XattrReplace), errs.NoData)
	if err := set("user.a", []byte("1"), wire.XattrReplace); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "name too long", set(strings.Repeat("n", 256), nil, 0), errs.TooBig)
	wantCode(t, "value too big", set("user.big", make([]byte, MaxXattrValue+1), 0), errs.TooBig)
	wantCode(t, "empty name", set("", nil, 0), errs.Invalid)
	if err := set(strings.Repeat("n", 255), make([]byte, MaxXattrValue), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetXattr(ctx, f.Ino, "user.a"); err != nil || string(v) != "1" {
		t.Fatalf("get = %q, %v", v, err)
	}
	if v, err := s.GetXattr(ctx, f.Ino, "user.empty"); errs.CodeOf(err) != errs.NoData {
		t.Fatalf("get missing = %q, %v", v, err)
	}
	names, err := s.ListXattr(ctx, f.Ino)
	if err != nil || !slices.Equal(names, []string{strings.Repeat("n", 255), "user.a", "user.b"}) {
		t.Fatalf("list = %q, %v", names, err)
	}
	if err := s.RemoveXattr(ctx, f.Ino, "user.a"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "remove missing", s.RemoveXattr(ctx, f.Ino, "user.a"), errs.NoData)
	_, err = s.GetXattr(ctx, 4444, "user.a")
	wantCode(t, "get on missing inode", err, errs.NotFound)
	_, err = s.ListXattr(ctx, 4444)
	wantCode(t, "list on missing inode", err, errs.NotFound)
	// Xattrs go with the inode.
	if err := s.Unlink(ctx, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	var left int
	s.db.View(ctx, func(tx kv.Txn) error {
		p := []byte{pfxXattr}
		return tx.Scan(p, kv.PrefixEnd(p), 0, func(_, _ []byte) bool { left++; return true })
	})
	if left != 0 {
		t.Fatalf("%d xattr keys left after the inode was freed", left)
	}
}

func TestReadDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	d := mustMkdir(t, s, RootIno, "d")
	var want []string
	for i := range 25 {
		name := string(rune('a'+i%26)) + strings.Repeat("x", i)
		want = append(want, name)
		if i%5 == 0 {
			mustMkdir(t, s, d.Ino, name)
		} else {
			mustCreate(t, s, d.Ino, name)
		}
	}
	slices.Sort(want)
	for _, page := range []uint32{1, 7, 25, 26, 0} {
		var got []string
		for _, e := range listAll(t, s, d.Ino, page) {
			got = append(got, e.Name)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("page %d: got %q, want %q", page, got, want)
		}
	}
	r, err := s.ReadDir(ctx, &wire.ReadDirReq{Ino: d.Ino, Limit: 25})
	if err != nil || len(r.Entries) != 25 || !r.EOF || r.Cursor != want[24] {
		t.Fatalf("full page: %d entries, EOF %v, cursor %q, %v", len(r.Entries), r.EOF, r.Cursor, err)
	}
	r, err = s.ReadDir(ctx, &wire.ReadDirReq{Ino: d.Ino, Limit: 3, Plus: true})
	if err != nil || len(r.Entries) != 3 || r.EOF {
		t.Fatalf("plus page: %+v, %v", r, err)
	}
	for _, e := range r.Entries {
		if e.Attr == nil || e.Attr.Ino != e.Ino || e.Attr.Mode&modeType != e.Mode {
			t.Fatalf("plus entry %+v", e)
		}
	}
	// Changes during a listing: unchanged entries exactly once.
	r, _ = s.ReadDir(ctx, &wire.ReadDirReq{Ino: d.Ino, Limit: 10})
	mustCreate(t, s, d.Ino, "0first") // before the cursor: not seen
	mustCreate(t, s, d.Ino, "zzlast") // after: seen
	if err := s.Unlink(ctx, d.Ino, want[21]); err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, e := range r.Entries {
		got = append(got, e.Name)
	}
	for cur := r.Cursor; ; {
		r, err := s.ReadDir(ctx, &wire.ReadDirReq{Ino: d.Ino, Cursor: cur, Limit: 4})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range r.Entries {
			got = append(got, e.Name)
		}
		if r.EOF {
			break
		}
		cur = r.Cursor
	}
	exp := append(slices.Clone(want[:21]), want[22:]...)
	exp = append(exp, "zzlast")
	if !slices.Equal(got, exp) {
		t.Fatalf("listing across changes: got %q, want %q", got, exp)
	}
	last, _ := s.Lookup(ctx, d.Ino, "zzlast")
	_, err = s.ReadDir(ctx, &wire.ReadDirReq{Ino: last.Ino})
	wantCode(t, "readdir of a file", err, errs.NotDir)
	_, err = s.ReadDir(ctx, &wire.ReadDirReq{Ino: 5555})
	wantCode(t, "readdir of missing", err, errs.NotFound)
}

// chainsOf maps targets to their chains of one replica.
func chainsOf(ts []placement.TargetID) []placement.ChainID {
	out := make([]placement.ChainID, len(ts))
	for i, t := range ts {
		out[i] = placement.ChainID(t)
	}
	return out
}

// TestReadDirXattr: a plus listing that names an extended attribute
// brings each entry's value of it (or says it has none), in the order of
// the entries, on every page; a listing without plus or without a name
// brings none, and an invalid name is refused.
func TestReadDirXattr(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	d := mustMkdir(t, s, RootIno, "d")
	const name = "user.meta"
	want := map[string]string{}
	for i := range 30 {
		n := fmt.Sprintf("f%02d", i)
		var ino uint64
		if i%7 == 3 {
			ino = mustMkdir(t, s, d.Ino, n).Ino
		} else {
			ino = mustCreate(t, s, d.Ino, n).Ino
		}
		if i%3 != 0 {
			v := fmt.Sprintf("value of %s %s", n, strings.Repeat("v", i))
			if err := s.SetXattr(ctx, &wire.XattrReq{Ino: ino, Name: name, Value: []byte(v)}); err != nil {
				t.Fatal(err)
			}
			want[n] = v
		}
		if err := s.SetXattr(ctx, &wire.XattrReq{Ino: ino, Name: "user.other", Value: []byte("other")}); err != nil {
			t.Fatal(err)
		}
	}
	seen := 0
	for cursor := ""; ; {
		r, err := s.ReadDir(ctx, &wire.ReadDirReq{Ino: d.Ino, Cursor: cursor, Limit: 7, Plus: true, Xattr: name})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Xattrs) != len(r.Entries) {
			t.Fatalf("page after %q: %d entries, %d xattr values", cursor, len(r.Entries), len(r.Xattrs))
		}
		for i, e := range r.Entries {
			v, ok := want[e.Name]
			if x := r.Xattrs[i]; x.Has != ok || string(x.Value) != v {
				t.Fatalf("entry %q: xattr %v %q, want %v %q", e.Name, x.Has, x.Value, ok, v)
			}
			if e.Attr == nil {
				t.Fatalf("entry %q without attributes", e.Name)
			}
			seen++
		}
		if r.EOF {
			break
		}
		cursor = r.Cursor
	}
	if seen != 30 {
		t.Fatalf("listed %d entries, want 30", seen)
	}
	for _, req := range []*wire.ReadDirReq{{Ino: d.Ino, Xattr: name}, {Ino: d.Ino, Plus: true}} {
		if r, err := s.ReadDir(ctx, req); err != nil || r.Xattrs != nil {
			t.Fatalf("listing %+v: %d xattr values, %v; want none", req, len(r.Xattrs), err)
		}
	}
	if _, err := s.ReadDir(ctx, &wire.ReadDirReq{Ino: d.Ino, Plus: true, Xattr: "bad\x00name"}); err == nil {
		t.Fatal("a listing with an invalid xattr name succeeded")
	}
}
