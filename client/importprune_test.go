package client

import (
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"syscall"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
)

// walkTree is a directory tree for importWalk: entries of each directory
// by inode, listed in pages of pageSize in name order, as the metadata
// service lists them.
type walkTree struct {
	dirs     map[uint64][]InodeDirEntry
	pageSize int
	fail     uint64 // a directory whose listing fails (0: none)
}

func (tr *walkTree) read(ino uint64, cursor string) (DirPage, error) {
	if ino == tr.fail {
		return DirPage{}, errs.New(errs.Unavailable, "listing of %d fails", ino)
	}
	es := tr.dirs[ino]
	i := sort.Search(len(es), func(i int) bool { return es[i].Name > cursor })
	j := min(i+tr.pageSize, len(es))
	p := DirPage{Entries: es[i:j], EOF: j == len(es)}
	if j > i {
		p.Cursor = es[j-1].Name
	}
	return p, nil
}

// TestImportWalkOrder: the walk of random trees, listed a few entries at
// a time, gives every regular file (not the import's temporary names,
// not other types) once, in the byte order of its key (the prefix and the
// path below the top), which is the order S3 lists keys in: a directory
// "d" comes after its siblings "d-x" and "d.txt" and before "d0"; and a
// listing that fails stops the walk with its error.
func TestImportWalkOrder(t *testing.T) {
	names := []string{"a", "a-", "a.b", "a!", "a/", "ab", "a0", "b", "d", "d-x", "d.txt", "d0", "z", ".h", importTempPrefix + "1"}
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		tr := &walkTree{dirs: map[uint64][]InodeDirEntry{}, pageSize: 1 + rng.IntN(4)}
		next := uint64(1)
		var want []string
		var build func(ino uint64, rel string, depth int)
		build = func(ino uint64, rel string, depth int) {
			var es []InodeDirEntry
			for _, n := range names {
				if n == "a/" || rng.IntN(3) > 0 {
					continue
				}
				next++
				e := InodeDirEntry{Name: n, Ino: next}
				switch r := rng.IntN(10); {
				case r < 3 && depth < 3:
					e.Mode = syscall.S_IFDIR | 0o755
					build(e.Ino, rel+n+"/", depth+1)
				case r < 4:
					e.Mode = syscall.S_IFLNK | 0o777
				default:
					e.Mode = syscall.S_IFREG | 0o644
					if n != importTempPrefix+"1" {
						want = append(want, "p/"+rel+n)
					}
				}
				es = append(es, e)
			}
			slices.SortFunc(es, func(a, b InodeDirEntry) int {
				if a.Name < b.Name {
					return -1
				}
				return 1
			})
			tr.dirs[ino] = es
		}
		build(1, "", 0)
		slices.Sort(want)
		w := &importWalk{read: tr.read, prefix: "p/", stack: []*walkFrame{{ino: 1, path: "/top"}}}
		var got []string
		for {
			f, ok := w.peek()
			if !ok {
				break
			}
			if again, _ := w.peek(); again != f {
				t.Fatalf("seed %d: peek twice: %+v, then %+v", seed, f, again)
			}
			w.next()
			if f.path != path.Join("/top", f.key[len("p/"):]) {
				t.Fatalf("seed %d: file %+v: path and key disagree", seed, f)
			}
			got = append(got, f.key)
		}
		if w.err != nil {
			t.Fatalf("seed %d: %v", seed, w.err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d (pages of %d): walked\n%q\nwant\n%q", seed, tr.pageSize, got, want)
		}
	}
	// A listing that fails ends the walk with its error.
	tr := &walkTree{pageSize: 2, fail: 2, dirs: map[uint64][]InodeDirEntry{
		1: {{Name: "a", Ino: 3, Mode: syscall.S_IFREG}, {Name: "d", Ino: 2, Mode: syscall.S_IFDIR}, {Name: "z", Ino: 4, Mode: syscall.S_IFREG}},
	}}
	w := &importWalk{read: tr.read, prefix: "", stack: []*walkFrame{{ino: 1, path: "/"}}}
	var got []string
	for f, ok := w.peek(); ok; f, ok = w.peek() {
		w.next()
		got = append(got, f.key)
	}
	if errs.CodeOf(w.err) != errs.Unavailable || !slices.Equal(got, []string{"a"}) {
		t.Fatalf("walk with a failing listing: %q, %v; want [a] and the listing's error", got, w.err)
	}
}

// TestImportPruneMerge: merged with a listing, the files whose keys the
// listing lacks, and only those, are handed on.
func TestImportPruneMerge(t *testing.T) {
	tr := &walkTree{pageSize: 2, dirs: map[uint64][]InodeDirEntry{
		1: {{Name: "a", Ino: 2, Mode: syscall.S_IFREG}, {Name: "d", Ino: 3, Mode: syscall.S_IFDIR}, {Name: "d.x", Ino: 4, Mode: syscall.S_IFREG}, {Name: "z", Ino: 5, Mode: syscall.S_IFREG}},
		3: {{Name: "b", Ino: 6, Mode: syscall.S_IFREG}, {Name: "c", Ino: 7, Mode: syscall.S_IFREG}},
	}}
	for _, tc := range []struct {
		listed []string
		gone   []string
	}{
		{[]string{"k/a", "k/d.x", "k/d/b", "k/d/c", "k/z"}, nil},
		{nil, []string{"k/a", "k/d.x", "k/d/b", "k/d/c", "k/z"}},
		{[]string{"k/a", "k/b", "k/d/c", "k/new", "k/zz"}, []string{"k/d.x", "k/d/b", "k/z"}},
		{[]string{"k/d/b"}, []string{"k/a", "k/d.x", "k/d/c", "k/z"}},
	} {
		var gone []string
		p := &importPrune{walk: &importWalk{read: tr.read, prefix: "k/", stack: []*walkFrame{{ino: 1, path: "/i"}}}, gone: func(f walkFile) { gone = append(gone, f.key) }}
		for _, k := range tc.listed {
			p.seen(k)
		}
		p.end()
		if !slices.Equal(gone, tc.gone) {
			t.Errorf("listing %q: gone %q, want %q", tc.listed, gone, tc.gone)
		}
	}
}
