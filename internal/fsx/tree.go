package fsx

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
)

// TreeNamer is a Namer with directories, for RunTree. Names are paths
// relative to its top directory, "d/x" for x in directory d.
type TreeNamer interface {
	Namer
	Mkdir(name string) error
	Rmdir(name string) error
	// Symlink makes name a symbolic link to target (relative to name's
	// directory).
	Symlink(target, name string) error
	// Link makes name another (hard) link to the file from.
	Link(from, name string) error
	// Replaces reports whether Write with oneRequest replaces the file
	// (a new inode, as a rename over it: its other links keep the old
	// bytes) rather than writing it (every link sees the new bytes).
	Replaces(oneRequest bool) bool
}

// TreeCounts are the operations a RunTree run did.
type TreeCounts struct {
	NameCounts
	DirRenames, Mkdirs, Rmdirs, Links, HardLinks int
}

// treeDirs and treeFiles are the names RunTree uses: directories in the
// top directory, files in it and in them. They never clash, so no
// operation meets a directory where it expects a file.
var (
	treeDirs  = []string{"d0", "d1", "d2"}
	treeFiles = []string{"a", "b", "c"}
)

// The symbolic links RunTree makes in the top directory: dirLink to one
// of treeDirs, fileLink to one of the files beside it (a checkpoint's
// "latest"). Reads and stats name paths through them.
const (
	dirLink  = "l0"
	fileLink = "l1"
)

// treeModel is what RunTree expects: files by path (hard links of one
// file share its treeFile), the directories, and the symbolic links'
// targets.
type treeModel struct {
	files map[string]*treeFile
	dirs  map[string]bool
	links map[string]string
}

// treeFile is a file of the model (an inode).
type treeFile struct{ data []byte }

// content returns the bytes of the file at path p; had: there is one.
func (m *treeModel) content(p string) (data []byte, had bool) {
	f, ok := m.files[p]
	if !ok {
		return nil, false
	}
	return f.data, true
}

// resolve returns path p with a link at its start replaced by its target
// (p itself when there is no such link: it then names nothing).
func (m *treeModel) resolve(p string) string {
	if t, ok := m.links[fileLink]; ok && p == fileLink {
		return t
	}
	if t, ok := m.links[dirLink]; ok && strings.HasPrefix(p, dirLink+"/") {
		return t + p[len(dirLink):]
	}
	return p
}

// parents are the directories files can be made in: "" and the
// directories that exist, in order.
func (m *treeModel) parents() []string {
	return append([]string{""}, slices.Sorted(maps.Keys(m.dirs))...)
}

// under returns the paths of the files in directory d, in order.
func (m *treeModel) under(d string) []string {
	var out []string
	for p := range m.files {
		if strings.HasPrefix(p, d+"/") {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// pickPath draws a path for a read or a stat: a file in the top
// directory or in one of treeDirs (which may not exist), or through a
// link.
func (m *treeModel) pickPath(r *rand.Rand) string {
	if r.IntN(8) == 0 {
		return fileLink
	}
	parents := append([]string{"", dirLink}, treeDirs...)
	return path.Join(parents[r.IntN(len(parents))], treeFiles[r.IntN(len(treeFiles))])
}

// listing is what a listing of directory d must show: its files' sizes
// and, in the top directory, the directories (-1) and links (-2).
func (m *treeModel) listing(d string) map[string]int64 {
	out := map[string]int64{}
	for p, f := range m.files {
		if dir, name := path.Split(p); strings.TrimSuffix(dir, "/") == d {
			out[name] = int64(len(f.data))
		}
	}
	if d == "" {
		for k := range m.dirs {
			out[k] = -1
		}
		for k := range m.links {
			out[k] = -2
		}
	}
	return out
}

// RunTree is RunNames with directories: random whole writes of files in
// the top directory and in a few directories below it, renames of files
// (within and across directories), renames of directories (to a new name
// or over an empty directory, and over one with files, which must fail),
// mkdir and rmdir (of empty and non-empty
// directories), removals, reads and stats, and a listing of one of the
// directories after every listEvery-th operation, every answer checked
// against a model of the operations done so far. It returns the model's
// files (path to content) for the caller to compare with what another
// client sees. A failure names the seed, the operation and the last 20
// done.
func RunTree(n TreeNamer, seed uint64, ops int) (map[string][]byte, TreeCounts, error) {
	r := rand.New(rand.NewPCG(seed, 0x7ee5))
	m := &treeModel{files: map[string]*treeFile{}, dirs: map[string]bool{}, links: map[string]string{}}
	var trace []string
	var c TreeCounts
	fail := func(i int, format string, args ...any) error {
		return fmt.Errorf("seed %d, op %d: %s (replay: SLUICE_FSX_SEED=%d SLUICE_FSX_OPS=%d); the operations before it:\n%s",
			seed, i, fmt.Sprintf(format, args...), seed, i+1, strings.Join(trace[max(len(trace)-20, 0):], "\n"))
	}
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	for i := range ops {
		switch op := r.IntN(24); {
		case op < 5:
			p := path.Join(pick(m.parents()), pick(treeFiles))
			data := make([]byte, []int{0, 3000, 40 << 10, 300 << 10}[r.IntN(4)]+r.IntN(5000))
			for k := range data {
				data[k] = byte(r.Uint32())
			}
			one := len(data) <= 16<<10 && r.IntN(2) == 0
			if err := n.Write(p, data, one); err != nil {
				return nil, c, fail(i, "write %s (%d bytes, one request %v): %v", p, len(data), one, err)
			}
			if f, ok := m.files[p]; ok && !n.Replaces(one) {
				f.data = data // every link of it sees the new bytes
			} else {
				m.files[p] = &treeFile{data}
			}
			c.Writes++
			trace = append(trace, fmt.Sprintf("%d: write %s %d bytes (one request %v)", i, p, len(data), one))
		case op < 8:
			have := slices.Sorted(maps.Keys(m.files))
			if len(have) == 0 {
				continue
			}
			from, to := pick(have), path.Join(pick(m.parents()), pick(treeFiles))
			if from == to {
				continue
			}
			if err := n.Rename(from, to); err != nil {
				return nil, c, fail(i, "rename %s %s: %v", from, to, err)
			}
			if m.files[to] != m.files[from] { // two links of one file: nothing happens
				m.files[to] = m.files[from]
				delete(m.files, from)
			}
			c.Renames++
			trace = append(trace, fmt.Sprintf("%d: rename %s %s (%d bytes)", i, from, to, len(m.files[to].data)))
		case op < 10:
			have := slices.Sorted(maps.Keys(m.dirs))
			if len(have) == 0 {
				continue
			}
			from, to := pick(have), pick(treeDirs)
			if from == to {
				continue
			}
			if k := len(m.under(to)); k > 0 {
				// A queued rename must fail at once too: a client
				// checks it against the namespace as it sees it.
				if err := n.Rename(from, to); err == nil {
					return nil, c, fail(i, "rename directory %s over %s, which has %d files: no error", from, to, k)
				}
				c.DirRenames++
				trace = append(trace, fmt.Sprintf("%d: rename directory %s over %s (%d files): failed", i, from, to, k))
				continue
			}
			if err := n.Rename(from, to); err != nil {
				return nil, c, fail(i, "rename directory %s %s (over an empty one: %v): %v", from, to, m.dirs[to], err)
			}
			for _, p := range m.under(from) {
				m.files[to+p[len(from):]] = m.files[p]
				delete(m.files, p)
			}
			delete(m.dirs, from)
			m.dirs[to] = true
			c.DirRenames++
			trace = append(trace, fmt.Sprintf("%d: rename directory %s %s", i, from, to))
		case op < 11:
			d := pick(treeDirs)
			err := n.Mkdir(d)
			if m.dirs[d] != (err != nil) || (m.dirs[d] && !errors.Is(err, fs.ErrExist)) {
				return nil, c, fail(i, "mkdir %s: %v; the model has it: %v", d, err, m.dirs[d])
			}
			m.dirs[d] = true
			c.Mkdirs++
			trace = append(trace, fmt.Sprintf("%d: mkdir %s", i, d))
		case op < 12:
			d := pick(treeDirs)
			err := n.Rmdir(d)
			files := len(m.under(d))
			if ok := m.dirs[d] && files == 0; ok != (err == nil) || (!m.dirs[d] && !errors.Is(err, fs.ErrNotExist)) {
				return nil, c, fail(i, "rmdir %s: %v; the model has it: %v, with %d files", d, err, m.dirs[d], files)
			}
			if err == nil {
				delete(m.dirs, d)
			}
			c.Rmdirs++
			trace = append(trace, fmt.Sprintf("%d: rmdir %s (%d files: %v)", i, d, files, err))
		case op < 14:
			p := path.Join(pick(m.parents()), pick(treeFiles))
			err := n.Remove(p)
			_, had := m.files[p]
			if had != (err == nil) || (!had && !errors.Is(err, fs.ErrNotExist)) {
				return nil, c, fail(i, "remove %s: %v; the model has it: %v", p, err, had)
			}
			delete(m.files, p)
			c.Removes++
			trace = append(trace, fmt.Sprintf("%d: remove %s", i, p))
		case op < 18:
			// Reads and stats also name directories that do not exist.
			p := m.pickPath(r)
			want, had := m.content(m.resolve(p))
			if msg := checkRead(n, p, want, had); msg != "" {
				return nil, c, fail(i, "%s", msg)
			}
			c.Reads++
		case op < 20:
			p := m.pickPath(r)
			want, had := m.content(m.resolve(p))
			if msg := checkSize(n, p, want, had); msg != "" {
				return nil, c, fail(i, "%s", msg)
			}
			c.Stats++
		case op < 22:
			// A hard link of a file, to a new name or an existing one
			// (which must fail).
			have := slices.Sorted(maps.Keys(m.files))
			if len(have) == 0 {
				continue
			}
			from, to := pick(have), path.Join(pick(m.parents()), pick(treeFiles))
			err := n.Link(from, to)
			if _, exists := m.files[to]; exists {
				if !errors.Is(err, fs.ErrExist) {
					return nil, c, fail(i, "link %s %s over an existing file: %v, want it to exist", from, to, err)
				}
			} else {
				if err != nil {
					return nil, c, fail(i, "link %s %s: %v", from, to, err)
				}
				m.files[to] = m.files[from]
			}
			c.HardLinks++
			trace = append(trace, fmt.Sprintf("%d: link %s %s (%v)", i, from, to, err))
		default:
			// Make, replace or remove a symbolic link.
			l, targets := dirLink, treeDirs
			if r.IntN(2) == 0 {
				l, targets = fileLink, treeFiles
			}
			target := pick(targets)
			_, had := m.links[l]
			if had {
				if err := n.Remove(l); err != nil {
					return nil, c, fail(i, "remove link %s: %v", l, err)
				}
				delete(m.links, l)
				if r.IntN(2) == 0 {
					c.Links++
					trace = append(trace, fmt.Sprintf("%d: remove link %s", i, l))
					break
				}
			}
			if err := n.Symlink(target, l); err != nil {
				return nil, c, fail(i, "symlink %s -> %s: %v", l, target, err)
			}
			m.links[l] = target
			c.Links++
			trace = append(trace, fmt.Sprintf("%d: link %s -> %s", i, l, target))
		}
		if i%listEvery == listEvery-1 {
			// The directories in turn, drawing no random numbers.
			ps := m.parents()
			d := ps[(i/listEvery)%len(ps)]
			got, err := n.List(d)
			if err != nil {
				return nil, c, fail(i, "after it, list %q: %v", d, err)
			}
			if diff := listDiff(got, m.listing(d)); diff != "" {
				return nil, c, fail(i, "after it, list %q: %s", d, diff)
			}
			c.Lists++
		}
	}
	out := make(map[string][]byte, len(m.files))
	for p, f := range m.files {
		out[p] = f.data
	}
	return out, c, nil
}

// listDiff says how listing got differs from want ("": not).
func listDiff(got, want map[string]int64) string {
	var d []string
	for name, size := range got {
		if w, ok := want[name]; !ok {
			d = append(d, fmt.Sprintf("%s listed (size %d), the model has no such entry", name, size))
		} else if size != w {
			d = append(d, fmt.Sprintf("%s listed with size %d, want %d (-1: a directory)", name, size, w))
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			d = append(d, fmt.Sprintf("%s not listed", name))
		}
	}
	slices.Sort(d)
	return strings.Join(d, "; ")
}
