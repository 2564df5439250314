package fuse

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestTwoMountsTree: two mounts take turns changing a small tree:
// mkdir, rmdir, renames of files and directories (also across
// directories and over existing names), creates, rewrites and unlinks.
// After each turn both mounts must show the model's tree, every file's
// bytes included, within the change feed's bound. The seed is logged;
// SLUICE_TWOTREES_SEED replays it and SLUICE_TWOTREES_TURNS runs more
// turns (default 150).
func TestTwoMountsTree(t *testing.T) {
	requireFUSE(t)
	rt := newRandomTurns(t, "TWOTREES", 150, 37)
	turns, rng := rt.turns, rt.rng
	verbose := os.Getenv("SLUICE_TWOTREES_VERBOSE") != ""
	s, _ := modelServer(t)
	mounts := []*mount{startMount(t, s.addr), startMount(t, s.addr)}
	must(t, os.Mkdir(mounts[0].path("t"), 0o755))
	// The model: relative path -> bytes; a directory is a nil value.
	model := map[string][]byte{}
	dirNames := []string{"x", "y", "z"}
	fileNames := []string{"f", "g", "h"}
	pick := func(dirs bool) (string, bool) {
		var have []string
		for p, b := range model {
			if (b == nil) == dirs {
				have = append(have, p)
			}
		}
		if len(have) == 0 {
			return "", false
		}
		slices.Sort(have)
		return have[rng.IntN(len(have))], true
	}
	// parent picks an existing directory ("" is the root of the tree).
	parent := func() string {
		if d, ok := pick(true); ok && rng.IntN(3) > 0 {
			return d
		}
		return ""
	}
	join := func(dir, name string) string {
		if dir == "" {
			return name
		}
		return dir + "/" + name
	}
	fail := func(turn int, format string, args ...any) { t.Helper(); rt.fail(t, turn, format, args...) }
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	for turn := range turns {
		m := mounts[rng.IntN(2)]
		abs := func(p string) string { return m.path("t", p) }
		var err error
		what := ""
		switch k := rng.IntN(10); {
		case k < 2: // mkdir
			p := join(parent(), dirNames[rng.IntN(len(dirNames))])
			if _, taken := model[p]; taken {
				continue
			}
			what, err = "mkdir "+p, os.Mkdir(abs(p), 0o755)
			model[p] = nil
		case k < 3: // rmdir of an empty directory
			d, ok := pick(true)
			if !ok {
				continue
			}
			empty := true
			for p := range model {
				if p != d && under(p, d) {
					empty = false
				}
			}
			if !empty {
				continue
			}
			what, err = "rmdir "+d, os.Remove(abs(d))
			delete(model, d)
		case k < 5: // create or rewrite a file
			p := join(parent(), fileNames[rng.IntN(len(fileNames))])
			if b, taken := model[p]; taken && b == nil {
				continue
			}
			data := bytes.Repeat([]byte{byte(turn)}, rng.IntN(40<<10))
			data = append(data, []byte(fmt.Sprintf("turn %d", turn))...)
			what, err = "write "+p, os.WriteFile(abs(p), data, 0o644)
			model[p] = data
		case k < 6: // unlink
			f, ok := pick(false)
			if !ok {
				continue
			}
			what, err = "unlink "+f, os.Remove(abs(f))
			delete(model, f)
		case k < 8: // rename a file, maybe over another file
			f, ok := pick(false)
			if !ok {
				continue
			}
			to := join(parent(), fileNames[rng.IntN(len(fileNames))])
			if b, taken := model[to]; to == f || (taken && b == nil) {
				continue
			}
			what, err = "rename "+f+" "+to, os.Rename(abs(f), abs(to))
			model[to] = model[f]
			delete(model, f)
		default: // rename a directory (not into itself), maybe over an empty one
			d, ok := pick(true)
			if !ok {
				continue
			}
			to := join(parent(), dirNames[rng.IntN(len(dirNames))])
			if under(to, d) {
				continue
			}
			if b, taken := model[to]; taken {
				if b != nil {
					continue
				}
				for p := range model {
					if p != to && under(p, to) {
						taken = false // not empty: skip
					}
				}
				if !taken {
					continue
				}
			}
			// rename(2) itself: os.Rename refuses to replace a directory.
			what, err = "rename "+d+" "+to, syscall.Rename(abs(d), abs(to))
			next := map[string][]byte{}
			for p, b := range model {
				if under(p, d) {
					next[to+strings.TrimPrefix(p, d)] = b
				} else if p != to {
					next[p] = b
				}
			}
			model = next
		}
		if verbose {
			t.Logf("%d %s: %s: %v", turn, m.dir, what, err)
		}
		if err != nil {
			fail(turn, "%s through %s: %v", what, m.dir, err)
		}
		for _, r := range mounts {
			if err := pollTree(r.path("t"), model); err != nil {
				fail(turn, "after %s through %s, %s: %v", what, m.dir, r.dir, err)
			}
		}
	}
	for _, m := range mounts {
		m.stop()
	}
}

// pollTree waits (up to the change feed's bound, as pollSettle) until the
// tree under root is model, and returns what still differs.
func pollTree(root string, model map[string][]byte) error {
	return pollFor(func() error { return sameModelTree(root, model) })
}

func sameModelTree(root string, model map[string][]byte) error {
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		want, ok := model[rel]
		if !ok {
			return fmt.Errorf("%s exists, not in the model", rel)
		}
		seen[rel] = true
		if e.IsDir() != (want == nil) {
			return fmt.Errorf("%s: directory %v, want %v", rel, e.IsDir(), want == nil)
		}
		if !e.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil || !bytes.Equal(b, want) {
				return fmt.Errorf("%s reads %d bytes, %v; want %d", rel, len(b), err, len(want))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for p := range model {
		if !seen[p] {
			return fmt.Errorf("%s missing", p)
		}
	}
	return nil
}
