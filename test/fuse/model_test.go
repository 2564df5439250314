package fuse

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestModel applies long random sequences of file operations both to a
// directory on the mount and to a local directory, and checks that every
// operation gives the same result and errno, and that the trees end equal.
// SLUICE_MODEL_OPS sets the number of operations (default 20,000),
// SLUICE_MODEL_SEED the seed (printed on failure).
func TestModel(t *testing.T) {
	requireFUSE(t)
	n := 20000
	if v := os.Getenv("SLUICE_MODEL_OPS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("SLUICE_MODEL_OPS=%q: %v", v, err)
		}
	}
	if testing.Short() {
		n = min(n, 2000)
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SLUICE_MODEL_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SLUICE_MODEL_SEED=%q: %v", v, err)
		}
	}
	t.Logf("model test: %d operations, seed %d (rerun with SLUICE_MODEL_SEED=%d)", n, seed, seed)
	s := startServer(t, "", "")
	m := startMount(t, s.addr)
	sluiceDir := m.path("model")
	must(t, os.Mkdir(sluiceDir, 0o755))
	local := t.TempDir()
	mt := &model{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), roots: [2]string{local, sluiceDir}, seed: seed}
	for i := range n {
		mt.step(i)
		if t.Failed() {
			t.Fatalf("stopped after operation %d; seed %d", i, seed)
		}
		if i%2000 == 1999 {
			mt.compareTrees(i)
		}
	}
	mt.closeAll()
	mt.compareTrees(n)
	if t.Failed() {
		t.Fatalf("seed %d", seed)
	}
	m.stop()
}

type model struct {
	t     *testing.T
	rng   *rand.Rand
	roots [2]string // local, sluice
	seed  uint64
	open  []openPair // descriptors kept open across operations
	log   []string   // recent operations, for failure messages
}

type openPair struct {
	rel string
	f   [2]*os.File
}

var modelNames = []string{"a", "b", "c", "d", "e"}

// path picks a path of depth 1 to 3 from a small set, so that operations
// collide often.
func (m *model) path() string {
	depth := 1 + m.rng.IntN(3)
	parts := make([]string, depth)
	for i := range parts {
		parts[i] = modelNames[m.rng.IntN(len(modelNames))]
	}
	return strings.Join(parts, "/")
}

func (m *model) data() []byte {
	n := m.rng.IntN(5000)
	if m.rng.IntN(10) == 0 {
		n = m.rng.IntN(300000)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(m.rng.IntN(256))
	}
	return b
}

func (m *model) offset() int64 {
	switch m.rng.IntN(10) {
	case 0:
		return m.rng.Int64N(8 << 20) // sparse
	case 1, 2:
		return 0
	}
	return m.rng.Int64N(200000)
}

// result is what one operation returned on one side.
type result struct {
	errno syscall.Errno
	out   string
}

func (m *model) step(i int) {
	var desc string
	var do func(root string, side int) result
	p, q := m.path(), m.path()
	switch op := m.rng.IntN(125); {
	case op < 12:
		excl := m.rng.IntN(3) == 0
		desc = fmt.Sprintf("create %s excl=%v", p, excl)
		do = func(root string, _ int) result {
			fl := os.O_CREATE | os.O_WRONLY
			if excl {
				fl |= os.O_EXCL
			}
			f, err := os.OpenFile(filepath.Join(root, p), fl, 0o644)
			if err == nil {
				err = f.Close()
			}
			return result{errno: errnoOf(err)}
		}
	case op < 32:
		data, off := m.data(), m.offset()
		desc = fmt.Sprintf("write %s at %d, %d bytes", p, off, len(data))
		do = func(root string, _ int) result {
			f, err := os.OpenFile(filepath.Join(root, p), os.O_WRONLY, 0)
			if err != nil {
				return result{errno: errnoOf(err)}
			}
			_, err = f.WriteAt(data, off)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return result{errno: errnoOf(err)}
		}
	case op < 36:
		data := m.data()
		desc = fmt.Sprintf("append %s %d bytes", p, len(data))
		do = func(root string, _ int) result {
			f, err := os.OpenFile(filepath.Join(root, p), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return result{errno: errnoOf(err)}
			}
			_, err = f.Write(data)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return result{errno: errnoOf(err)}
		}
	case op < 42:
		size := m.offset()
		desc = fmt.Sprintf("truncate %s to %d", p, size)
		do = func(root string, _ int) result {
			return result{errno: errnoOf(os.Truncate(filepath.Join(root, p), size))}
		}
	case op < 52:
		flags := uint(0)
		if m.rng.IntN(8) == 0 {
			flags = 1 // RENAME_NOREPLACE
		}
		desc = fmt.Sprintf("rename %s %s flags=%d", p, q, flags)
		do = func(root string, _ int) result {
			err := renameat2(filepath.Join(root, p), filepath.Join(root, q), flags)
			return result{errno: errnoOf(err)}
		}
	case op < 57:
		desc = fmt.Sprintf("link %s %s", p, q)
		do = func(root string, _ int) result {
			return result{errno: errnoOf(os.Link(filepath.Join(root, p), filepath.Join(root, q)))}
		}
	case op < 65:
		desc = fmt.Sprintf("unlink %s", p)
		do = func(root string, _ int) result {
			return result{errno: errnoOf(syscall.Unlink(filepath.Join(root, p)))}
		}
	case op < 72:
		desc = fmt.Sprintf("mkdir %s", p)
		do = func(root string, _ int) result {
			return result{errno: errnoOf(syscall.Mkdir(filepath.Join(root, p), 0o755))}
		}
	case op < 77:
		desc = fmt.Sprintf("rmdir %s", p)
		do = func(root string, _ int) result {
			return result{errno: errnoOf(syscall.Rmdir(filepath.Join(root, p)))}
		}
	case op < 87:
		desc = fmt.Sprintf("read %s", p)
		do = func(root string, _ int) result {
			b, err := os.ReadFile(filepath.Join(root, p))
			return result{errno: errnoOf(err), out: string(b)}
		}
	case op < 92:
		desc = fmt.Sprintf("stat %s", p)
		do = func(root string, _ int) result {
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(root, p), &st); err != nil {
				return result{errno: errnoOf(err)}
			}
			out := fmt.Sprintf("type %o", st.Mode&syscall.S_IFMT)
			if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
				out += fmt.Sprintf(" size %d nlink %d", st.Size, st.Nlink)
			}
			return result{out: out}
		}
	case op < 95:
		desc = fmt.Sprintf("readdir %s", p)
		do = func(root string, _ int) result {
			ents, err := os.ReadDir(filepath.Join(root, p))
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			return result{errno: errnoOf(err), out: strings.Join(names, ",")}
		}
	case op < 98:
		desc = fmt.Sprintf("open-keep %s", p)
		var pair openPair
		pair.rel = p
		do = func(root string, side int) result {
			f, err := os.OpenFile(filepath.Join(root, p), os.O_RDWR, 0)
			if err == nil {
				pair.f[side] = f
				if side == 1 {
					m.open = append(m.open, pair)
				}
			}
			return result{errno: errnoOf(err)}
		}
	default:
		if len(m.open) == 0 {
			return
		}
		desc, do = m.keptOp()
	}
	m.log = append(m.log, fmt.Sprintf("%d: %s", i, desc))
	if len(m.log) > 20 {
		m.log = m.log[1:]
	}
	want, got := do(m.roots[0], 0), do(m.roots[1], 1)
	if want.errno != got.errno || want.out != got.out {
		m.t.Errorf("operation %d (%s), seed %d: local gave errno %v and %s; sluice gave errno %v and %s%s\nrecent operations:\n%s",
			i, desc, m.seed, want.errno, short(want.out), got.errno, short(got.out), firstDifference(want.out, got.out), strings.Join(m.log, "\n"))
	}
}

// firstDifference says where two long outputs start to differ.
func firstDifference(a, b string) string {
	if len(a) < 80 && len(b) < 80 {
		return ""
	}
	i := 0
	for i < min(len(a), len(b)) && a[i] == b[i] {
		i++
	}
	return fmt.Sprintf(" (the outputs differ from byte %d: local %s, sluice %s)", i, short(a[i:min(len(a), i+16)]), short(b[i:min(len(b), i+16)]))
}

func short(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%q... (%d bytes)", s[:80], len(s))
	}
	return fmt.Sprintf("%q", s)
}

func (m *model) closeAll() {
	for _, p := range m.open {
		p.f[0].Close()
		p.f[1].Close()
	}
	m.open = nil
}

// compareTrees walks both trees and compares names, types, sizes, link
// counts and contents.
func (m *model) compareTrees(i int) {
	m.t.Helper()
	var trees [2]string
	for side, root := range m.roots {
		var b strings.Builder
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			rel, _ := filepath.Rel(root, p)
			if err != nil {
				fmt.Fprintf(&b, "%s: error %v\n", rel, errnoOf(err))
				return nil
			}
			var st syscall.Stat_t
			syscall.Lstat(p, &st)
			if d.IsDir() {
				fmt.Fprintf(&b, "%s/ dir\n", rel)
				return nil
			}
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, "%s size %d nlink %d sum %x\n", rel, st.Size, st.Nlink, checksum(data))
			return nil
		})
		trees[side] = b.String()
	}
	if trees[0] != trees[1] {
		m.t.Errorf("after %d operations (seed %d) the trees differ:\nlocal:\n%s\nsluice:\n%s", i, m.seed, trees[0], trees[1])
	}
}

func checksum(b []byte) uint64 {
	var h uint64 = 14695981039346656037
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

func renameat2(from, to string, flags uint) error {
	if flags == 0 {
		return syscall.Rename(from, to)
	}
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}

// keptOp draws an operation on a descriptor kept open across operations:
// several writes, truncates, syncs and reads through one open file (and
// mmap and copy_file_range), the sequences a write-back buffer can get
// wrong, each checked against the local side byte for byte.
func (m *model) keptOp() (string, func(root string, side int) result) {
	k := m.rng.IntN(len(m.open))
	pair := m.open[k]
	switch sub := m.rng.IntN(16); {
	case sub < 5:
		data, off := m.data(), m.offset()
		return fmt.Sprintf("pwrite kept %s at %d, %d bytes", pair.rel, off, len(data)), func(_ string, side int) result {
			_, err := pair.f[side].WriteAt(data, off)
			return result{errno: errnoOf(err)}
		}
	case sub < 7:
		size := m.offset()
		return fmt.Sprintf("ftruncate kept %s to %d", pair.rel, size), func(_ string, side int) result {
			return result{errno: errnoOf(pair.f[side].Truncate(size))}
		}
	case sub < 8:
		data := m.rng.IntN(2) == 0
		return fmt.Sprintf("fsync kept %s (data only: %v)", pair.rel, data), func(_ string, side int) result {
			if data {
				return result{errno: errnoOf(unix.Fdatasync(int(pair.f[side].Fd())))}
			}
			return result{errno: errnoOf(pair.f[side].Sync())}
		}
	case sub < 11:
		off, n := m.offset(), 1+m.rng.IntN(300000)
		return fmt.Sprintf("pread kept %s at %d, %d bytes", pair.rel, off, n), func(_ string, side int) result {
			b := make([]byte, n)
			got, err := pair.f[side].ReadAt(b, off)
			if err == io.EOF {
				err = nil
			}
			return result{errno: errnoOf(err), out: string(b[:got])}
		}
	case sub < 13:
		// mmap inside the file's current size, at the same fraction of it
		// on both sides (the sizes are equal unless something is wrong,
		// which the returned size shows).
		frac, n, write := m.rng.Float64(), 1+m.rng.IntN(100000), m.rng.IntN(2) == 0
		data := m.data()
		return fmt.Sprintf("mmap kept %s at %.3f of its size, %d bytes (write: %v)", pair.rel, frac, n, write), func(_ string, side int) result {
			f := pair.f[side]
			fi, err := f.Stat()
			if err != nil {
				return result{errno: errnoOf(err)}
			}
			size := fi.Size()
			if size == 0 {
				return result{out: "empty"}
			}
			off := min(int64(frac*float64(size)), size-1)
			cnt := int(min(int64(n), size-off))
			page := int64(os.Getpagesize())
			start := off &^ (page - 1)
			prot := unix.PROT_READ
			if write {
				prot |= unix.PROT_WRITE
			}
			mm, err := unix.Mmap(int(f.Fd()), start, int(off-start)+cnt, prot, unix.MAP_SHARED)
			if err != nil {
				return result{errno: errnoOf(err)}
			}
			defer unix.Munmap(mm)
			at := int(off - start)
			if write {
				copy(mm[at:at+cnt], data)
				return result{errno: errnoOf(unix.Msync(mm, unix.MS_SYNC)), out: fmt.Sprintf("size %d", size)}
			}
			return result{out: fmt.Sprintf("size %d: %s", size, mm[at:at+cnt])}
		}
	case sub < 14:
		src := m.open[m.rng.IntN(len(m.open))]
		soff, doff, n := m.offset(), m.offset(), 1+m.rng.IntN(300000)
		return fmt.Sprintf("copy_file_range kept %s at %d -> kept %s at %d, %d bytes", src.rel, soff, pair.rel, doff, n), func(_ string, side int) result {
			so, do := soff, doff
			got, err := unix.CopyFileRange(int(src.f[side].Fd()), &so, int(pair.f[side].Fd()), &do, n, 0)
			if errnoOf(err) == syscall.EINVAL && src.f[side] == pair.f[side] {
				err = nil // overlapping ranges of one descriptor: both sides refuse
				got = -1
			}
			return result{errno: errnoOf(err), out: strconv.Itoa(got)}
		}
	default:
		data, off := m.data(), m.offset()
		m.open = slices.Delete(m.open, k, k+1)
		return fmt.Sprintf("write+read+close kept descriptor of %s at %d, %d bytes", pair.rel, off, len(data)), func(_ string, side int) result {
			f := pair.f[side]
			_, err := f.WriteAt(data, off)
			if err != nil {
				f.Close()
				return result{errno: errnoOf(err)}
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				f.Close()
				return result{errno: errnoOf(err)}
			}
			b, err := io.ReadAll(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return result{errno: errnoOf(err), out: string(b)}
		}
	}
}
