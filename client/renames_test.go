package client

import "testing"

func TestRenameAffects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p, old, new string
		want        bool
	}{
		{"/ckpt/s1/.metadata", "/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", true},     // the name it makes
		{"/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", true}, // the name it removes
		{"/ckpt/s1/__0_0.distcp", "/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", false}, // a sibling
		{"/ckpt/s1", "/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", false},              // the parent
		{"/ckpt/step2/x.pt", "/ckpt/tmp2", "/ckpt/step2", true},                          // below a renamed directory
		{"/ckpt/tmp2/x.pt", "/ckpt/tmp2", "/ckpt/step2", true},
		{"/ckpt/step20", "/ckpt/tmp2", "/ckpt/step2", false}, // a prefix of the name only
		{"/a", "", "", false}, // a rename by inode: no paths
	} {
		if got := renameAffects(c.p, c.old, c.new); got != c.want {
			t.Errorf("renameAffects(%q, %q, %q) = %v, want %v", c.p, c.old, c.new, got, c.want)
		}
	}
}

func TestRenamedPath(t *testing.T) {
	t.Parallel()
	commit := queuedRename{oldPath: "/ckpt/s1/.metadata.tmp", newPath: "/ckpt/s1/.metadata"}
	dir := queuedRename{oldPath: "/ckpt/tmp2", newPath: "/ckpt/step2"}
	swap := queuedRename{oldPath: "/x", newPath: "/y", exchange: true}
	byIno := queuedRename{oldParent: 1, oldName: "a", newParent: 1, newName: "b"} // no paths
	for _, c := range []struct {
		p    string
		rs   []queuedRename
		want string
		gone bool
	}{
		{"/ckpt/s1/.metadata", []queuedRename{commit}, "/ckpt/s1/.metadata.tmp", false},
		{"/ckpt/s1/.metadata.tmp", []queuedRename{commit}, "", true},
		{"/ckpt/s1/__0_0.distcp", []queuedRename{commit}, "/ckpt/s1/__0_0.distcp", false},
		{"/ckpt/step2/x.pt", []queuedRename{dir}, "/ckpt/tmp2/x.pt", false},
		{"/ckpt/tmp2/x.pt", []queuedRename{dir}, "", true},
		{"/ckpt/step20", []queuedRename{dir}, "/ckpt/step20", false},
		// a to b, then b to c: c is a now; b and a are gone.
		{"/c", []queuedRename{{oldPath: "/a", newPath: "/b"}, {oldPath: "/b", newPath: "/c"}}, "/a", false},
		{"/b", []queuedRename{{oldPath: "/a", newPath: "/b"}, {oldPath: "/b", newPath: "/c"}}, "", true},
		// a to b, then a written again and renamed to c: not possible (the
		// create waits); a to b then b back to a: a is a.
		{"/a", []queuedRename{{oldPath: "/a", newPath: "/b"}, {oldPath: "/b", newPath: "/a"}}, "/a", false},
		{"/x", []queuedRename{swap}, "/y", false},
		{"/y", []queuedRename{swap}, "/x", false},
		{"/b", []queuedRename{byIno}, "/b", false}, // paths unknown: as it is
	} {
		got, gone := renamedPath(c.p, c.rs)
		if got != c.want || gone != c.gone {
			t.Errorf("renamedPath(%q, %+v) = %q, %v; want %q, %v", c.p, c.rs, got, gone, c.want, c.gone)
		}
	}
}

func TestRenamedName(t *testing.T) {
	t.Parallel()
	ab := queuedRename{oldParent: 1, oldName: "a", newParent: 2, newName: "b"}
	bc := queuedRename{oldParent: 2, oldName: "b", newParent: 2, newName: "c"}
	swap := queuedRename{oldParent: 1, oldName: "x", newParent: 1, newName: "y", exchange: true}
	for _, c := range []struct {
		parent uint64
		name   string
		rs     []queuedRename
		wantP  uint64
		wantN  string
		gone   bool
	}{
		{2, "b", []queuedRename{ab}, 1, "a", false},
		{1, "a", []queuedRename{ab}, 0, "", true},
		{2, "a", []queuedRename{ab}, 2, "a", false}, // another directory's a
		{2, "c", []queuedRename{ab, bc}, 1, "a", false},
		{2, "b", []queuedRename{ab, bc}, 0, "", true},
		{1, "x", []queuedRename{swap}, 1, "y", false},
		{1, "y", []queuedRename{swap}, 1, "x", false},
	} {
		p, n, gone := renamedName(c.parent, c.name, c.rs)
		if p != c.wantP || n != c.wantN || gone != c.gone {
			t.Errorf("renamedName(%d, %q, %+v) = %d, %q, %v; want %d, %q, %v", c.parent, c.name, c.rs, p, n, gone, c.wantP, c.wantN, c.gone)
		}
	}
}
