package fsx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sluice-fs/sluice/client"
)

// Namer is what RunNames drives: whole files of one directory, by name.
// A missing file's error must satisfy errors.Is(err, fs.ErrNotExist).
type Namer interface {
	// Write makes name hold data (created or replaced whole); oneRequest
	// asks for a small file in one request where the target has one.
	Write(name string, data []byte, oneRequest bool) error
	Rename(from, to string) error
	Remove(name string) error
	Read(name string) ([]byte, error)
	Size(name string) (int64, error)
	// List returns the entries of directory dir ("": the top one): name
	// to size, -1 for a directory, -2 for a symbolic link.
	List(dir string) (map[string]int64, error)
}

// NameCounts are the operations a RunNames run did.
type NameCounts struct {
	Writes, Renames, Removes, Reads, Stats, Lists int
}

// listEvery is how often RunNames lists the directory: after every
// listEvery-th operation (drawing no random numbers, so that a seed runs
// the same operations as before listings were checked).
const listEvery = 4

// RunNames runs ops random operations of seed on the names in n: whole
// writes (empty, inline-sized, of one and of several chunks; small ones
// in one request half of the time), renames of existing names, removals,
// reads and stats, lists the directory after every listEvery-th, and
// checks every answer against a model of the operations done so far, in
// order (a listing: the model's names with their sizes, no others). It
// returns the model's final files (name to content) for the caller to
// compare with what another client sees. A failure names the seed, the operation and the last 20 done.
func RunNames(n Namer, names []string, seed uint64, ops int) (map[string][]byte, NameCounts, error) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	model := map[string][]byte{}
	var trace []string
	var c NameCounts
	fail := func(i int, format string, args ...any) error {
		return fmt.Errorf("seed %d, op %d: %s (replay: SLUICE_FSX_SEED=%d SLUICE_FSX_OPS=%d); the operations before it:\n%s",
			seed, i, fmt.Sprintf(format, args...), seed, i+1, strings.Join(trace[max(len(trace)-20, 0):], "\n"))
	}
	for i := range ops {
		name := names[r.IntN(len(names))]
		switch op := r.IntN(10); {
		case op < 3:
			data := make([]byte, []int{0, 3000, 40 << 10, 300 << 10}[r.IntN(4)]+r.IntN(5000))
			for k := range data {
				data[k] = byte(r.Uint32())
			}
			one := len(data) <= 16<<10 && r.IntN(2) == 0
			if err := n.Write(name, data, one); err != nil {
				return nil, c, fail(i, "write %s (%d bytes, one request %v): %v", name, len(data), one, err)
			}
			model[name] = data
			c.Writes++
			trace = append(trace, fmt.Sprintf("%d: write %s %d bytes (one request %v)", i, name, len(data), one))
		case op < 6:
			have := make([]string, 0, len(model))
			for k := range model {
				have = append(have, k)
			}
			if len(have) == 0 {
				continue
			}
			slices.Sort(have)
			from, to := have[r.IntN(len(have))], names[r.IntN(len(names))]
			if to == from {
				continue
			}
			if err := n.Rename(from, to); err != nil {
				return nil, c, fail(i, "rename %s %s: %v", from, to, err)
			}
			model[to] = model[from]
			delete(model, from)
			c.Renames++
			trace = append(trace, fmt.Sprintf("%d: rename %s %s (%d bytes)", i, from, to, len(model[to])))
		case op < 7:
			err := n.Remove(name)
			_, had := model[name]
			if had != (err == nil) || (!had && !errors.Is(err, fs.ErrNotExist)) {
				return nil, c, fail(i, "remove %s: %v; the model has it: %v", name, err, had)
			}
			delete(model, name)
			c.Removes++
			trace = append(trace, fmt.Sprintf("%d: remove %s", i, name))
		case op < 9:
			want, had := model[name]
			if msg := checkRead(n, name, want, had); msg != "" {
				return nil, c, fail(i, "%s", msg)
			}
			c.Reads++
		default:
			want, had := model[name]
			if msg := checkSize(n, name, want, had); msg != "" {
				return nil, c, fail(i, "%s", msg)
			}
			c.Stats++
		}
		if i%listEvery == listEvery-1 {
			got, err := n.List("")
			if err != nil {
				return nil, c, fail(i, "after it, list: %v", err)
			}
			want := map[string]int64{}
			for k, v := range model {
				want[k] = int64(len(v))
			}
			if diff := listDiff(got, want); diff != "" {
				return nil, c, fail(i, "after it, list: %s", diff)
			}
			c.Lists++
		}
	}
	return model, c, nil
}

// checkRead reads name and says how it differs from the model's file
// (want; had: the model has it), "" if not.
func checkRead(n Namer, name string, want []byte, had bool) string {
	got, err := n.Read(name)
	switch {
	case !had && !errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("read %s: %d bytes, %v; the model has no such file", name, len(got), err)
	case had && (err != nil || !bytes.Equal(got, want)):
		return fmt.Sprintf("read %s: %d bytes, %v; want %d bytes (the same: %v)", name, len(got), err, len(want), bytes.Equal(got, want))
	}
	return ""
}

// checkSize is checkRead of name's size.
func checkSize(n Namer, name string, want []byte, had bool) string {
	size, err := n.Size(name)
	switch {
	case !had && !errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("stat %s: size %d, %v; the model has no such file", name, size, err)
	case had && (err != nil || size != int64(len(want))):
		return fmt.Sprintf("stat %s: size %d, %v; want %d", name, size, err, len(want))
	}
	return ""
}

// ClientNames is a Namer of directory Dir through the Go client library
// (oneRequest: client.PutFile).
type ClientNames struct {
	C   *client.Client
	Dir string
	Ctx context.Context
}

func (c ClientNames) p(name string) string { return path.Join(c.Dir, name) }

// Write implements Namer.
func (c ClientNames) Write(name string, data []byte, oneRequest bool) error {
	if oneRequest {
		_, err := c.C.PutFile(c.Ctx, c.p(name), data, 0o644, client.PutOptions{})
		return err
	}
	f, err := c.C.Create(c.Ctx, c.p(name))
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Mkdir implements TreeNamer.
func (c ClientNames) Mkdir(name string) error { return c.C.Mkdir(c.Ctx, c.p(name), 0o755) }

// Link implements TreeNamer.
func (c ClientNames) Link(from, name string) error { return c.C.Link(c.Ctx, c.p(from), c.p(name)) }

// Replaces implements TreeNamer: a write in one request is PutFile, which
// makes a new file under the name.
func (c ClientNames) Replaces(oneRequest bool) bool { return oneRequest }

// Symlink implements TreeNamer.
func (c ClientNames) Symlink(target, name string) error { return c.C.Symlink(c.Ctx, target, c.p(name)) }

// Rmdir implements TreeNamer.
func (c ClientNames) Rmdir(name string) error { return c.C.Remove(c.Ctx, c.p(name)) }

// Rename implements Namer.
func (c ClientNames) Rename(from, to string) error { return c.C.Rename(c.Ctx, c.p(from), c.p(to)) }

// Remove implements Namer.
func (c ClientNames) Remove(name string) error { return c.C.Remove(c.Ctx, c.p(name)) }

// Read implements Namer.
func (c ClientNames) Read(name string) ([]byte, error) {
	f, err := c.C.Open(c.Ctx, c.p(name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Size implements Namer.
func (c ClientNames) Size(name string) (int64, error) {
	fi, err := c.C.Stat(c.Ctx, c.p(name))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// List implements Namer: a listing with attributes in pages of two
// entries (client.ReadDirPage), checked against the names of a plain
// listing (client.ReadDirAll).
func (c ClientNames) List(dir string) (map[string]int64, error) {
	fi, err := c.C.Stat(c.Ctx, c.p(dir))
	if err != nil {
		return nil, err
	}
	ino := fi.Attr().Ino
	out := map[string]int64{}
	var order []string
	for cursor := ""; ; {
		page, err := c.C.ReadDirPage(c.Ctx, ino, cursor, 2, true)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entries {
			if e.Attr == nil {
				return nil, fmt.Errorf("entry %s without attributes", e.Name)
			}
			if _, dup := out[e.Name]; dup {
				return nil, fmt.Errorf("entry %s listed twice", e.Name)
			}
			out[e.Name] = int64(e.Attr.Size)
			switch e.Attr.Mode & syscall.S_IFMT {
			case syscall.S_IFDIR:
				out[e.Name] = -1
			case syscall.S_IFLNK:
				out[e.Name] = -2
			}
			order = append(order, e.Name)
		}
		if page.EOF || len(page.Entries) == 0 {
			break
		}
		cursor = page.Cursor
	}
	if !slices.IsSorted(order) {
		return nil, fmt.Errorf("entries out of order: %q", order)
	}
	all, err := c.C.ReadDirAll(c.Ctx, c.p(dir))
	if err != nil {
		return nil, err
	}
	var plain []string
	for _, e := range all {
		plain = append(plain, e.Name)
	}
	if !slices.Equal(plain, order) {
		return nil, fmt.Errorf("a listing in pages of two gave %q, a plain one %q", order, plain)
	}
	return out, nil
}

// DirNames is a Namer of a directory of the local file system (a Sluice
// mount); it has no one-request write.
type DirNames string

func (d DirNames) p(name string) string { return filepath.Join(string(d), name) }

// Write implements Namer.
func (d DirNames) Write(name string, data []byte, _ bool) error {
	return os.WriteFile(d.p(name), data, 0o644)
}

// Mkdir implements TreeNamer.
func (d DirNames) Mkdir(name string) error { return os.Mkdir(d.p(name), 0o755) }

// Link implements TreeNamer.
func (d DirNames) Link(from, name string) error { return os.Link(d.p(from), d.p(name)) }

// Replaces implements TreeNamer: os.WriteFile truncates the file.
func (d DirNames) Replaces(bool) bool { return false }

// Symlink implements TreeNamer.
func (d DirNames) Symlink(target, name string) error { return os.Symlink(target, d.p(name)) }

// Rmdir implements TreeNamer.
func (d DirNames) Rmdir(name string) error { return syscall.Rmdir(d.p(name)) }

// Rename implements Namer, with rename(2)'s semantics (os.Rename refuses
// to replace a directory).
func (d DirNames) Rename(from, to string) error {
	if err := syscall.Rename(d.p(from), d.p(to)); err != nil {
		return &os.LinkError{Op: "rename", Old: d.p(from), New: d.p(to), Err: err}
	}
	return nil
}

// Remove implements Namer.
func (d DirNames) Remove(name string) error { return os.Remove(d.p(name)) }

// Read implements Namer.
func (d DirNames) Read(name string) ([]byte, error) { return os.ReadFile(d.p(name)) }

// Size implements Namer.
func (d DirNames) Size(name string) (int64, error) {
	fi, err := os.Stat(d.p(name))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// List implements Namer.
func (d DirNames) List(dir string) (map[string]int64, error) { return Dir(d.p(dir)).List() }
