package meta

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// renameTree is the tree each rename case starts from:
//
//	/a/sub/deep/   /b/   /c/x   /f  /g  /h (= f)  /s -> f
type renameTree struct {
	a, sub, deep, b, c, x, f, g, s wire.Attr
}

func newRenameTree(t *testing.T, s *Service) renameTree {
	t.Helper()
	var tr renameTree
	tr.a = mustMkdir(t, s, RootIno, "a")
	tr.sub = mustMkdir(t, s, tr.a.Ino, "sub")
	tr.deep = mustMkdir(t, s, tr.sub.Ino, "deep")
	tr.b = mustMkdir(t, s, RootIno, "b")
	tr.c = mustMkdir(t, s, RootIno, "c")
	tr.x = mustCreate(t, s, tr.c.Ino, "x")
	tr.f = mustCreate(t, s, RootIno, "f")
	tr.g = mustCreate(t, s, RootIno, "g")
	if _, err := s.Link(context.Background(), tr.f.Ino, RootIno, "h"); err != nil {
		t.Fatal(err)
	}
	var err error
	if tr.s, err = s.Symlink(context.Background(), &wire.SymlinkReq{Parent: RootIno, Name: "s", Target: "f"}); err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestRename(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type check func(t *testing.T, s *Service, tr renameTree)
	lookupIno := func(t *testing.T, s *Service, parent uint64, name string) uint64 {
		t.Helper()
		a, err := s.Lookup(ctx, parent, name)
		if err != nil {
			t.Fatalf("lookup %d/%s: %v", parent, name, err)
		}
		return a.Ino
	}
	nlink := func(t *testing.T, s *Service, ino uint64) uint32 {
		t.Helper()
		a, err := s.GetAttr(ctx, ino)
		if err != nil {
			t.Fatal(err)
		}
		return a.Nlink
	}
	gone := func(t *testing.T, s *Service, parent uint64, name string) {
		t.Helper()
		_, err := s.Lookup(ctx, parent, name)
		wantCode(t, fmt.Sprintf("lookup %d/%s", parent, name), err, errs.NotFound)
	}
	for _, tc := range []struct {
		name  string
		req   func(tr renameTree) wire.RenameReq
		code  errs.Code
		check check
	}{
		{"file in one dir", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "f", NewParent: RootIno, NewName: "f2"}
		}, errs.OK, func(t *testing.T, s *Service, tr renameTree) {
			gone(t, s, RootIno, "f")
			if lookupIno(t, s, RootIno, "f2") != tr.f.Ino {
				t.Fatal("f2 is not f")
			}
		}},
		{"file over file", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "g", NewParent: tr.c.Ino, NewName: "x"}
		}, errs.OK, func(t *testing.T, s *Service, tr renameTree) {
			gone(t, s, RootIno, "g")
			if lookupIno(t, s, tr.c.Ino, "x") != tr.g.Ino {
				t.Fatal("c/x is not g")
			}
			_, err := s.GetAttr(ctx, tr.x.Ino)
			wantCode(t, "replaced inode", err, errs.NotFound)
			if n, _ := s.PendingGarbage(ctx); n != 1 {
				t.Fatalf("%d removals queued, want 1", n)
			}
		}},
		{"file over a link to another file with two links", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "g", NewParent: RootIno, NewName: "h"}
		}, errs.OK, func(t *testing.T, s *Service, tr renameTree) {
			if nlink(t, s, tr.f.Ino) != 1 || lookupIno(t, s, RootIno, "h") != tr.g.Ino {
				t.Fatal("f should keep one link and h be g")
			}
			if n, _ := s.PendingGarbage(ctx); n != 0 {
				t.Fatalf("%d removals queued, want 0", n)
			}
		}},
		{"onto another link of the same inode", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "f", NewParent: RootIno, NewName: "h"}
		}, errs.OK, func(t *testing.T, s *Service, tr renameTree) {
			if lookupIno(t, s, RootIno, "f") != tr.f.Ino || lookupIno(t, s, RootIno, "h") != tr.f.Ino || nlink(t, s, tr.f.Ino) != 2 {
				t.Fatal("no-op rename changed something")
			}
		}},
		{"onto itself", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: tr.a.Ino, OldName: "sub", NewParent: tr.a.Ino, NewName: "sub"}
		}, errs.OK, func(t *testing.T, s *Service, tr renameTree) {
			if lookupIno(t, s, tr.a.Ino, "sub") != tr.sub.Ino {
				t.Fatal("sub moved")
			}
		}},
		{"file over dir", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "f", NewParent: RootIno, NewName: "b"}
		}, errs.IsDir, nil},
		{"dir over file", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "b", NewParent: RootIno, NewName: "f"}
		}, errs.NotDir, nil},
		{"dir over non-empty dir", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "b", NewParent: RootIno, NewName: "c"}
		}, errs.NotEmpty, nil},
		{"dir over empty dir", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: tr.a.Ino, OldName: "sub", NewParent: RootIno, NewName: "b"}
		}, errs.OK, func(t *testing.T, s *Service, tr renameTree) {
			if lookupIno(t, s, RootIno, "b") != tr.sub.Ino || nlink(t, s, RootIno) != 5 || nlink(t, s, tr.a.Ino) != 2 {
				t.Fatal("wrong result")
			}
			_, err := s.GetAttr(ctx, tr.b.Ino)
			wantCode(t, "replaced dir", err, errs.NotFound)
			if a, err := s.Resolve(ctx, "/b/deep/..", false); err != nil || a.Ino != tr.sub.Ino {
				t.Fatalf("/b/deep/.. = %d, %v", a.Ino, err)
			}
		}},
		{"dir into itself", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "a", NewParent: tr.a.Ino, NewName: "a2"}
		}, errs.Invalid, nil},
		{"dir into its subtree", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "a", NewParent: tr.deep.Ino, NewName: "a2"}
		}, errs.Invalid, nil},
		{"dir to another dir", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: tr.a.Ino, OldName: "sub", NewParent: tr.b.Ino, NewName: "sub2"}
		}, errs.OK, func(t *testing.T, s *Service, tr renameTree) {
			if nlink(t, s, tr.a.Ino) != 2 || nlink(t, s, tr.b.Ino) != 3 {
				t.Fatal("parents' nlink not updated")
			}
			if a, err := s.Resolve(ctx, "/b/sub2/deep/../..", false); err != nil || a.Ino != tr.b.Ino {
				t.Fatalf("/b/sub2/deep/../.. = %d, %v", a.Ino, err)
			}
		}},
		{"noreplace over existing", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "f", NewParent: RootIno, NewName: "g", Flags: wire.RenameNoReplace}
		}, errs.Exists, nil},
		{"noreplace to a new name", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "s", NewParent: tr.b.Ino, NewName: "s", Flags: wire.RenameNoReplace}
		}, errs.OK, func(t *testing.T, s *Service, tr renameTree) {
			if lookupIno(t, s, tr.b.Ino, "s") != tr.s.Ino {
				t.Fatal("b/s is not s")
			}
		}},
		{"exchange file and dir across dirs", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "f", NewParent: tr.a.Ino, NewName: "sub", Flags: wire.RenameExchange}
		}, errs.OK, func(t *testing.T, s *Service, tr renameTree) {
			if lookupIno(t, s, RootIno, "f") != tr.sub.Ino || lookupIno(t, s, tr.a.Ino, "sub") != tr.f.Ino {
				t.Fatal("entries not exchanged")
			}
			if nlink(t, s, RootIno) != 6 || nlink(t, s, tr.a.Ino) != 2 {
				t.Fatal("parents' nlink not updated")
			}
			if a, err := s.Resolve(ctx, "/f/deep/../..", false); err != nil || a.Ino != RootIno {
				t.Fatalf("/f/deep/../.. = %d, %v", a.Ino, err)
			}
		}},
		{"exchange two dirs across dirs", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "c", NewParent: tr.a.Ino, NewName: "sub", Flags: wire.RenameExchange}
		}, errs.OK, func(t *testing.T, s *Service, tr renameTree) {
			if lookupIno(t, s, RootIno, "c") != tr.sub.Ino || lookupIno(t, s, tr.a.Ino, "sub") != tr.c.Ino {
				t.Fatal("entries not exchanged")
			}
		}},
		{"exchange file and symlink in one dir", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "g", NewParent: RootIno, NewName: "s", Flags: wire.RenameExchange}
		}, errs.OK, func(t *testing.T, s *Service, tr renameTree) {
			if lookupIno(t, s, RootIno, "g") != tr.s.Ino || lookupIno(t, s, RootIno, "s") != tr.g.Ino {
				t.Fatal("entries not exchanged")
			}
		}},
		{"exchange with missing", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "f", NewParent: RootIno, NewName: "nope", Flags: wire.RenameExchange}
		}, errs.NotFound, nil},
		{"exchange dir with its descendant", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "a", NewParent: tr.sub.Ino, NewName: "deep", Flags: wire.RenameExchange}
		}, errs.Invalid, nil},
		{"exchange descendant with its ancestor", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: tr.sub.Ino, OldName: "deep", NewParent: RootIno, NewName: "a", Flags: wire.RenameExchange}
		}, errs.Invalid, nil},
		{"both flags", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "f", NewParent: RootIno, NewName: "g", Flags: wire.RenameExchange | wire.RenameNoReplace}
		}, errs.Invalid, nil},
		{"missing source", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "nope", NewParent: RootIno, NewName: "g"}
		}, errs.NotFound, nil},
		{"source parent not a dir", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: tr.f.Ino, OldName: "x", NewParent: RootIno, NewName: "g"}
		}, errs.NotDir, nil},
		{"target parent missing", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "f", NewParent: 9999, NewName: "g"}
		}, errs.NotFound, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newTestService(t, nil, nil)
			tr := newRenameTree(t, s)
			before := checkTree(t, s)
			req := tc.req(tr)
			err := s.Rename(ctx, &req)
			wantCode(t, "rename", err, tc.code)
			after := checkTree(t, s)
			if tc.code != errs.OK && len(after) != len(before) {
				t.Fatalf("failed rename changed the tree: %d inodes, then %d", len(before), len(after))
			}
			if tc.check != nil {
				tc.check(t, s, tr)
			}
		})
	}
}

// TestRenameRace runs random renames of files and directories among a
// small tree from several goroutines, including moves of directories into
// each other's subtrees, then checks the tree from the root.
func TestRenameRace(t *testing.T) {
	t.Parallel()
	workers, perWorker := 8, 2000
	if testing.Short() {
		perWorker = 300
	}
	s := newTestService(t, nil, nil)
	runRenameRace(t, s, workers, perWorker)
}

func runRenameRace(t *testing.T, s *Service, workers, perWorker int) {
	ctx := context.Background()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	// Six directories and twelve files, all in the root at first, with a
	// few names each can take.
	var dirs []uint64
	created := map[uint64]bool{RootIno: true}
	for i := range 6 {
		d := mustMkdir(t, s, RootIno, fmt.Sprintf("d%d", i))
		dirs = append(dirs, d.Ino)
		created[d.Ino] = true
	}
	for i := range 12 {
		f := mustCreate(t, s, RootIno, fmt.Sprintf("f%d", i))
		created[f.Ino] = true
	}
	var names []string // the initial names and as many spare ones
	for i := range 6 {
		names = append(names, fmt.Sprintf("d%d", i), fmt.Sprintf("dn%d", i))
	}
	for i := range 12 {
		names = append(names, fmt.Sprintf("f%d", i), fmt.Sprintf("fn%d", i))
	}
	parents := append([]uint64{RootIno}, dirs...)

	var ok, invalid atomic.Int64
	var codes sync.Map // errs.Code -> *atomic.Int64
	var createdMu sync.Mutex
	find := func(r *rand.Rand, name string) uint64 { // where name is now, or a random dir
		for _, i := range r.Perm(len(parents)) {
			if _, err := s.Lookup(ctx, parents[i], name); err == nil {
				return parents[i]
			}
		}
		return parents[r.IntN(len(parents))]
	}
	// Rounds of racing workers until both outcomes (done, and refused as a
	// move into a subtree) were seen: a short round may see only one.
	for round := 0; round < 20 && (ok.Load() == 0 || invalid.Load() == 0); round++ {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(seed, uint64(round*1000+w)))
				for range perWorker {
					// Replacing renames free files: make new ones now and then.
					if r.IntN(10) == 0 {
						name := names[12+r.IntN(24)] // a file name
						a, err := s.Create(ctx, &wire.CreateReq{Parent: parents[r.IntN(len(parents))], Name: name, Mode: 0o644, Exclusive: true})
						if err == nil {
							createdMu.Lock()
							created[a.Ino] = true
							createdMu.Unlock()
						}
						continue
					}
					req := wire.RenameReq{OldName: names[r.IntN(len(names))], NewName: names[r.IntN(len(names))]}
					req.OldParent = find(r, req.OldName)
					req.NewParent = parents[r.IntN(len(parents))]
					switch r.IntN(4) {
					case 0:
						req.Flags = wire.RenameNoReplace
					case 1:
						req.Flags = wire.RenameExchange
						req.NewParent = find(r, req.NewName)
					}
					err := s.Rename(ctx, &req)
					switch code := errs.CodeOf(err); code {
					case errs.OK:
						ok.Add(1)
					case errs.Invalid:
						invalid.Add(1)
					case errs.NotFound, errs.Exists, errs.NotEmpty, errs.IsDir, errs.NotDir:
						c, _ := codes.LoadOrStore(code, new(atomic.Int64))
						c.(*atomic.Int64).Add(1)
					default:
						t.Errorf("rename %+v: unexpected error %v (seed %d)", req, err, seed)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
	var refusals []string
	codes.Range(func(k, v any) bool {
		refusals = append(refusals, fmt.Sprintf("%v: %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	t.Logf("renames: %d done, %d refused as a move into a subtree, other refusals %v", ok.Load(), invalid.Load(), refusals)
	if ok.Load() == 0 || invalid.Load() == 0 {
		t.Fatalf("20 rounds of the race did not exercise both outcomes (seed %d)", seed)
	}
	// Renames that replace drop files; the rest must all be reachable.
	seen := checkTree(t, s)
	for ino := range seen {
		if !created[ino] {
			t.Fatalf("reached inode %d that was never created (seed %d)", ino, seed)
		}
	}
	for ino := range created {
		if _, ok := seen[ino]; ok {
			continue
		}
		if _, err := s.GetAttr(ctx, ino); errs.CodeOf(err) != errs.NotFound {
			t.Fatalf("inode %d is not reachable but still exists (%v) (seed %d)", ino, err, seed)
		}
	}
	for _, d := range dirs {
		if _, ok := seen[d]; !ok {
			// A directory is only freed by being replaced while empty.
			if _, err := s.GetAttr(ctx, d); errs.CodeOf(err) != errs.NotFound {
				t.Fatalf("directory %d lost (seed %d)", d, seed)
			}
		}
	}
}

// TestRenameSetsCtime: a rename changes the ctime of the inodes it moves,
// directories as well as files (ext4, POSIX-2008), within one parent and
// across parents, and of both entries of an exchange; their mtimes stay.
func TestRenameSetsCtime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		req   func(tr renameTree) wire.RenameReq
		moved func(tr renameTree) []wire.Attr
	}{
		{"dir in one parent", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: tr.a.Ino, OldName: "sub", NewParent: tr.a.Ino, NewName: "sub2"}
		}, func(tr renameTree) []wire.Attr { return []wire.Attr{tr.sub} }},
		{"dir across parents", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: tr.a.Ino, OldName: "sub", NewParent: tr.b.Ino, NewName: "sub"}
		}, func(tr renameTree) []wire.Attr { return []wire.Attr{tr.sub} }},
		{"empty dir over empty dir", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "b", NewParent: tr.sub.Ino, NewName: "deep"}
		}, func(tr renameTree) []wire.Attr { return []wire.Attr{tr.b} }},
		{"file in one parent", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "g", NewParent: RootIno, NewName: "g2"}
		}, func(tr renameTree) []wire.Attr { return []wire.Attr{tr.g} }},
		{"file across parents", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: tr.c.Ino, OldName: "x", NewParent: tr.b.Ino, NewName: "x"}
		}, func(tr renameTree) []wire.Attr { return []wire.Attr{tr.x} }},
		{"exchange dirs in one parent", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: RootIno, OldName: "b", NewParent: RootIno, NewName: "c", Flags: wire.RenameExchange}
		}, func(tr renameTree) []wire.Attr { return []wire.Attr{tr.b, tr.c} }},
		{"exchange dir and file across parents", func(tr renameTree) wire.RenameReq {
			return wire.RenameReq{OldParent: tr.a.Ino, OldName: "sub", NewParent: tr.c.Ino, NewName: "x", Flags: wire.RenameExchange}
		}, func(tr renameTree) []wire.Attr { return []wire.Attr{tr.sub, tr.x} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _ := newClockService(t)
			tr := newRenameTree(t, s)
			req := tc.req(tr)
			var before []wire.Attr
			for _, m := range tc.moved(tr) {
				a, err := s.GetAttr(ctx, m.Ino)
				if err != nil {
					t.Fatal(err)
				}
				before = append(before, a)
			}
			if err := s.Rename(ctx, &req); err != nil {
				t.Fatalf("rename: %v", err)
			}
			// The parent's ctime is the rename's time: the moved inodes
			// must carry the same one.
			np, err := s.GetAttr(ctx, req.NewParent)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range before {
				a, err := s.GetAttr(ctx, b.Ino)
				if err != nil {
					t.Fatal(err)
				}
				if a.Ctime <= b.Ctime || a.Ctime != np.Ctime {
					t.Errorf("inode %d (mode %o): ctime %d after the rename, %d before, parent's %d: want the parent's", b.Ino, b.Mode, a.Ctime, b.Ctime, np.Ctime)
				}
				if a.Mtime != b.Mtime {
					t.Errorf("inode %d (mode %o): mtime %d after the rename, %d before", b.Ino, b.Mode, a.Mtime, b.Mtime)
				}
			}
		})
	}
}
