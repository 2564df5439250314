package client

import (
	"testing"

	"github.com/sluice-fs/sluice/internal/wire"
)

func TestRenameAffects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p, old, new string
		want        bool
	}{
		{"/ckpt/s1/.metadata", "/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", true},     // the name it makes
		{"/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", true}, // the name it removes
		{"/ckpt/s1/__0_0.distcp", "/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", false}, // a sibling
		{"/ckpt/s1", "/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", true},               // the parent: its removal depends on it
		{"/ckpt", "/a", "/ckpt/s1/x", true},                                              // an ancestor of the target
		{"/ckpt/s2", "/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", false},              // a sibling directory
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

// renameByPath and renameByName are queued renames for the tables.
func renameByPath(oldPath, newPath string, exchange bool) *renameRec {
	r := &renameRec{oldPath: oldPath, newPath: newPath}
	if exchange {
		r.req.Flags = wire.RenameExchange
	}
	return r
}

func renameByName(oldParent uint64, oldName string, newParent uint64, newName string, exchange bool) *renameRec {
	r := &renameRec{req: wire.RenameReq{OldParent: oldParent, OldName: oldName, NewParent: newParent, NewName: newName}}
	if exchange {
		r.req.Flags = wire.RenameExchange
	}
	return r
}

func TestRenamedPath(t *testing.T) {
	t.Parallel()
	commit := renameByPath("/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", false)
	dir := renameByPath("/ckpt/tmp2", "/ckpt/step2", false)
	swap := renameByPath("/x", "/y", true)
	byIno := renameByName(1, "a", 1, "b", false) // no paths
	ab, bc, ba := renameByPath("/a", "/b", false), renameByPath("/b", "/c", false), renameByPath("/b", "/a", false)
	for _, c := range []struct {
		p    string
		rs   []*renameRec
		want string
		gone bool
	}{
		{"/ckpt/s1/.metadata", []*renameRec{commit}, "/ckpt/s1/.metadata.tmp", false},
		{"/ckpt/s1/.metadata.tmp", []*renameRec{commit}, "", true},
		{"/ckpt/s1/__0_0.distcp", []*renameRec{commit}, "/ckpt/s1/__0_0.distcp", false},
		{"/ckpt/step2/x.pt", []*renameRec{dir}, "/ckpt/tmp2/x.pt", false},
		{"/ckpt/tmp2/x.pt", []*renameRec{dir}, "", true},
		{"/ckpt/step20", []*renameRec{dir}, "/ckpt/step20", false},
		// a to b, then b to c: c is a now; b and a are gone.
		{"/c", []*renameRec{ab, bc}, "/a", false},
		{"/b", []*renameRec{ab, bc}, "", true},
		// a to b, then a written again and renamed to c: not possible (the
		// create waits); a to b then b back to a: a is a.
		{"/a", []*renameRec{ab, ba}, "/a", false},
		{"/x", []*renameRec{swap}, "/y", false},
		{"/y", []*renameRec{swap}, "/x", false},
		{"/b", []*renameRec{byIno}, "/b", false}, // paths unknown: as it is
	} {
		got, gone := renamedPath(c.p, c.rs)
		if got != c.want || gone != c.gone {
			t.Errorf("renamedPath(%q, %+v) = %q, %v; want %q, %v", c.p, c.rs, got, gone, c.want, c.gone)
		}
	}
}

func TestRenamedName(t *testing.T) {
	t.Parallel()
	ab := renameByName(1, "a", 2, "b", false)
	bc := renameByName(2, "b", 2, "c", false)
	swap := renameByName(1, "x", 1, "y", true)
	for _, c := range []struct {
		parent uint64
		name   string
		rs     []*renameRec
		wantP  uint64
		wantN  string
		gone   bool
	}{
		{2, "b", []*renameRec{ab}, 1, "a", false},
		{1, "a", []*renameRec{ab}, 0, "", true},
		{2, "a", []*renameRec{ab}, 2, "a", false}, // another directory's a
		{2, "c", []*renameRec{ab, bc}, 1, "a", false},
		{2, "b", []*renameRec{ab, bc}, 0, "", true},
		{1, "x", []*renameRec{swap}, 1, "y", false},
		{1, "y", []*renameRec{swap}, 1, "x", false},
	} {
		p, n, gone := renamedName(c.parent, c.name, c.rs)
		if p != c.wantP || n != c.wantN || gone != c.gone {
			t.Errorf("renamedName(%d, %q, %+v) = %d, %q, %v; want %d, %q, %v", c.parent, c.name, c.rs, p, n, gone, c.wantP, c.wantN, c.gone)
		}
	}
}

func TestRenamedDir(t *testing.T) {
	t.Parallel()
	commit := renameByName(5, ".metadata.tmp", 5, ".metadata", false)
	in := renameByName(1, "a", 2, "b", false) // into directory 2
	bc := renameByName(2, "b", 2, "c", false)
	ab, ba := renameByName(2, "a", 2, "b", false), renameByName(2, "b", 2, "a", false)
	swap := renameByName(2, "x", 2, "y", true)
	for _, c := range []struct {
		name string
		dir  uint64
		rs   []*renameRec
		want map[string]dirMove
	}{
		{"commit", 5, []*renameRec{commit}, map[string]dirMove{
			".metadata.tmp": {gone: true},
			".metadata":     {parent: 5, name: ".metadata.tmp"},
		}},
		{"another directory", 6, []*renameRec{commit}, nil},
		{"moved in", 2, []*renameRec{in}, map[string]dirMove{"b": {parent: 1, name: "a"}}},
		{"moved out", 1, []*renameRec{in}, map[string]dirMove{"a": {gone: true}}},
		{"moved in, then on", 2, []*renameRec{in, bc}, map[string]dirMove{
			"b": {gone: true},
			"c": {parent: 1, name: "a"},
		}},
		{"away and back", 2, []*renameRec{ab, ba}, map[string]dirMove{"b": {gone: true}}},
		{"exchange", 2, []*renameRec{swap}, map[string]dirMove{
			"x": {parent: 2, name: "y"},
			"y": {parent: 2, name: "x"},
		}},
		{"none", 2, nil, nil},
	} {
		got := renamedDir(c.dir, c.rs)
		if len(got) != len(c.want) {
			t.Errorf("%s: renamedDir(%d) = %+v, want %+v", c.name, c.dir, got, c.want)
			continue
		}
		for k, w := range c.want {
			if g, ok := got[k]; !ok || g != w {
				t.Errorf("%s: renamedDir(%d)[%q] = %+v (%v), want %+v", c.name, c.dir, k, g, ok, w)
			}
		}
	}
}
