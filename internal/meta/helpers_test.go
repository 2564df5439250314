package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// fakeTargets is a fixed set of healthy targets that records RemoveChunks
// calls and can be made to fail them.
type fakeTargets struct {
	mu      sync.Mutex
	targets []wire.TargetAddr
	removed []removal
	fences  []fence
	fail    map[placement.TargetID]bool
}

type fence struct {
	target placement.TargetID
	ino    uint64
	slots  []uint32
	mode   uint8
}

type removal struct {
	Target placement.TargetID
	Ino    uint64
	Slots  []uint32
}

func newFakeTargets(n int) *fakeTargets {
	f := &fakeTargets{fail: map[placement.TargetID]bool{}}
	for i := range n {
		f.targets = append(f.targets, wire.TargetAddr{
			ID: placement.TargetID(10 + i), Addr: fmt.Sprintf("t%d:1", i), Healthy: true,
			Capacity: 1 << 40, Used: 1 << 30,
		})
	}
	return f
}

func (f *fakeTargets) List(ctx context.Context) ([]wire.TargetAddr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.targets), nil
}

func (f *fakeTargets) Chains(ctx context.Context) (uint64, []placement.Chain, error) {
	return 0, nil, nil
}

func (f *fakeTargets) FormChains(ctx context.Context, r int, pool []placement.TargetID) error {
	return errs.New(errs.Invalid, "fake targets form no chains of %d replicas", r)
}

func (f *fakeTargets) RemoveChunks(ctx context.Context, chain placement.ChainID, ino uint64, slots []uint32) error {
	target := placement.TargetID(chain)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail[target] {
		return errs.New(errs.Unavailable, "fake target %d is down", target)
	}
	f.removed = append(f.removed, removal{target, ino, slices.Clone(slots)})
	return nil
}

func (f *fakeTargets) FenceChunks(ctx context.Context, chain placement.ChainID, ino uint64, slots []uint32, mode uint8) error {
	target := placement.TargetID(chain)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail[target] {
		return errs.New(errs.Unavailable, "fake target %d is down", target)
	}
	f.fences = append(f.fences, fence{target, ino, slices.Clone(slots), mode})
	return nil
}

func (f *fakeTargets) setFail(t placement.TargetID, fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[t] = fail
}

func (f *fakeTargets) removals() []removal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.removed)
}

func newTestService(t testing.TB, db kv.DB, targets Targets) *Service {
	t.Helper()
	if db == nil {
		db = openTestDB(t)
	}
	if targets == nil {
		targets = newFakeTargets(4)
	}
	s, err := New(context.Background(), Options{DB: db, Targets: targets})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// mustCreate creates a regular file with chunks (as a client does before
// its first chunk write), so that freeing it queues chunk removals.
func mustCreate(t testing.TB, s *Service, parent uint64, name string) wire.Attr {
	t.Helper()
	a := mustCreateInline(t, s, parent, name)
	a, err := s.SetChunks(context.Background(), a.Ino)
	if err != nil {
		t.Fatalf("setchunks %d/%s: %v", parent, name, err)
	}
	return a
}

// mustCreateInline creates a regular file as Create leaves it: no chunks,
// every byte inline.
func mustCreateInline(t testing.TB, s *Service, parent uint64, name string) wire.Attr {
	t.Helper()
	a, err := s.Create(context.Background(), &wire.CreateReq{Parent: parent, Name: name, Mode: 0o644, Exclusive: true})
	if err != nil {
		t.Fatalf("create %d/%s: %v", parent, name, err)
	}
	return a
}

func mustMkdir(t testing.TB, s *Service, parent uint64, name string) wire.Attr {
	t.Helper()
	a, err := s.Mkdir(context.Background(), &wire.CreateReq{Parent: parent, Name: name, Mode: 0o755})
	if err != nil {
		t.Fatalf("mkdir %d/%s: %v", parent, name, err)
	}
	return a
}

func wantCode(t testing.TB, what string, err error, code errs.Code) {
	t.Helper()
	if got := errs.CodeOf(err); got != code {
		t.Fatalf("%s: got error %v (class %v), want class %v", what, err, got, code)
	}
	if code != errs.OK && !errors.Is(err, &errs.Error{Code: code}) {
		t.Fatalf("%s: errors.Is(%v, class %v) is false", what, err, code)
	}
}

// listAll reads a whole directory with pages of the given size.
func listAll(t testing.TB, s *Service, dir uint64, page uint32) []wire.DirEntry {
	t.Helper()
	var out []wire.DirEntry
	cursor := ""
	for {
		r, err := s.ReadDir(context.Background(), &wire.ReadDirReq{Ino: dir, Cursor: cursor, Limit: page})
		if err != nil {
			t.Fatalf("readdir %d after %q: %v", dir, cursor, err)
		}
		out = append(out, r.Entries...)
		if r.EOF {
			return out
		}
		if len(r.Entries) == 0 {
			t.Fatalf("readdir %d after %q: empty page without EOF", dir, cursor)
		}
		cursor = r.Cursor
	}
}

// checkTree walks the namespace from the root and checks its invariants:
// every inode reached once per link, directories reached once, stored
// parents match, no cycles, nlink counts right. It returns the inodes seen.
func checkTree(t testing.TB, s *Service) map[uint64]wire.Attr {
	t.Helper()
	ctx := context.Background()
	seen := map[uint64]wire.Attr{}
	links := map[uint64]uint32{}
	root, err := s.GetAttr(ctx, RootIno)
	if err != nil {
		t.Fatal(err)
	}
	seen[RootIno] = root
	var walk func(dir uint64, depth int)
	walk = func(dir uint64, depth int) {
		if depth > 1000 {
			t.Fatalf("directory %d is over 1000 levels deep: cycle", dir)
		}
		var subdirs uint32
		for _, e := range listAll(t, s, dir, 100) {
			a, err := s.GetAttr(ctx, e.Ino)
			if err != nil {
				t.Fatalf("entry %d/%s -> %d: %v", dir, e.Name, e.Ino, err)
			}
			if a.Mode&modeType != e.Mode {
				t.Fatalf("entry %d/%s: type %#o in entry, %#o in inode", dir, e.Name, e.Mode, a.Mode&modeType)
			}
			links[e.Ino]++
			if e.Mode == modeDir {
				subdirs++
				if _, dup := seen[e.Ino]; dup {
					t.Fatalf("directory %d reached twice (again as %d/%s)", e.Ino, dir, e.Name)
				}
				seen[e.Ino] = a
				var parent uint64
				if err := s.db.View(ctx, func(tx kv.Txn) error {
					n, err := getInode(tx, e.Ino)
					if err == nil {
						parent = n.Parent
					}
					return err
				}); err != nil {
					t.Fatal(err)
				}
				if parent != dir {
					t.Fatalf("directory %d is in %d but its parent says %d", e.Ino, dir, parent)
				}
				walk(e.Ino, depth+1)
			} else {
				seen[e.Ino] = a
			}
		}
		if a := seen[dir]; a.Nlink != 2+subdirs {
			t.Fatalf("directory %d has nlink %d, want 2+%d", dir, a.Nlink, subdirs)
		}
	}
	walk(RootIno, 0)
	for ino, n := range links {
		if a := seen[ino]; a.Mode&modeType != modeDir && a.Nlink != n {
			t.Fatalf("inode %d has nlink %d but %d entries", ino, a.Nlink, n)
		}
	}
	return seen
}

// addTestBackend registers tier backend "b" (nothing listens there).
func addTestBackend(t *testing.T, s *Service) {
	t.Helper()
	if err := s.TierSet(context.Background(), &wire.TierSetReq{Backend: wire.TierBackend{Name: "b", Endpoint: "http://x", Bucket: "k"}}); err != nil {
		t.Fatal(err)
	}
}
