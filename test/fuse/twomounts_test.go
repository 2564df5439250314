package fuse

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTwoMountsRandom: two mounts of one file system take turns changing a
// directory of a few files: rewrites (O_TRUNC), overwrites, appends and
// truncates of sizes around the inline limit (16 KiB) and the block size,
// hard links, renames over other names, unlinks and creates; reads in between fill
// both mounts' caches. After a change of an existing file's bytes, a new
// open through either mount must read the model's bytes at once
// (close-to-open); after a change of names, both mounts must show the
// model's names and bytes within the change feed's bound (pollSettle).
// It runs with two `sluice mount` processes (also both with
// --direct-read), and with the mount of a
// `sluice serve --mount --passthrough` (whose reads of one-chunk files the
// kernel serves from the chunk files) beside a `sluice mount` of it.
// The seed is logged; SLUICE_TWOMOUNTS_SEED replays it and
// SLUICE_TWOMOUNTS_TURNS runs more turns (default 150).
func TestTwoMountsRandom(t *testing.T) {
	requireFUSE(t)
	t.Run("mounts", func(t *testing.T) {
		s, _ := modelServer(t)
		a, b := startMount(t, s.addr), startMount(t, s.addr)
		twoMountsRandom(t, a.dir, b.dir)
		a.stop()
		b.stop()
	})
	t.Run("direct", func(t *testing.T) {
		// Both mounts read chunks from their files on this machine
		// (ADR 0025), beside each other's writes.
		s, _ := modelServer(t)
		a, b := startMount(t, s.addr, "--direct-read"), startMount(t, s.addr, "--direct-read")
		twoMountsRandom(t, a.dir, b.dir)
		a.stop()
		b.stop()
	})
	t.Run("passthrough", func(t *testing.T) {
		_, dir, _, addr := startServeMount(t, "--passthrough")
		b := startMount(t, addr)
		twoMountsRandom(t, dir, b.dir)
		b.stop()
	})
}

// twoMountsRandom runs the turns over two mount points of one file system.
func twoMountsRandom(t *testing.T, dirs ...string) {
	rt := newRandomTurns(t, "TWOMOUNTS", 150, 29)
	turns, rng := rt.turns, rt.rng
	type root string
	mounts := []root{root(dirs[0]), root(dirs[1])}
	rpath := func(r root, elem ...string) string { return filepath.Join(append([]string{string(r)}, elem...)...) }
	must(t, os.Mkdir(rpath(mounts[0], "d"), 0o755))
	model := map[string]*[]byte{} // hard links share one
	snapshot := func() map[string][]byte {
		out := make(map[string][]byte, len(model))
		for n, b := range model {
			out[n] = *b
		}
		return out
	}
	names := []string{"a", "b", "c", "d", "e"}
	size := func() int { return rt.size(400 << 10) }
	fill := rt.bytes
	existing := func() (string, bool) { return oneOf(rng, names, model) }
	verbose := os.Getenv("SLUICE_TWOMOUNTS_VERBOSE") != ""
	logf := func(format string, args ...any) {
		if verbose {
			t.Logf(format, args...)
		}
	}
	fail := func(turn int, format string, args ...any) { t.Helper(); rt.fail(t, turn, format, args...) }
	for turn := range turns {
		m := mounts[rng.IntN(2)]
		p := func(n string) string { return rpath(m, "d", n) }
		var changed string // an existing file's bytes changed in place
		names0 := false    // the names changed
		switch k := rng.IntN(20); {
		case k < 5: // write a whole file, new or over an existing one (O_TRUNC)
			n := names[rng.IntN(len(names))]
			cur, had := model[n]
			b := fill(size())
			must(t, os.WriteFile(p(n), b, 0o644))
			logf("%d %s: write %s, %d bytes (existed %v)", turn, m, n, len(b), had)
			if had {
				*cur, changed = b, n
			} else {
				model[n], names0 = &b, true
			}
		case k < 9: // overwrite part of an existing file
			n, ok := existing()
			if !ok {
				continue
			}
			old := *model[n]
			off := rng.IntN(len(old) + 1)
			b := fill(1 + rng.IntN(70<<10))
			f, err := os.OpenFile(p(n), os.O_RDWR, 0)
			must(t, err)
			if _, err := f.WriteAt(b, int64(off)); err != nil {
				fail(turn, "write at %d of %s: %v", off, n, err)
			}
			must(t, f.Close())
			logf("%d %s: overwrite %s at %d, %d bytes", turn, m, n, off, len(b))
			if end := off + len(b); end > len(old) {
				old = append(old, make([]byte, end-len(old))...)
			}
			copy(old[off:], b)
			*model[n], changed = old, n
		case k == 9 && rng.IntN(2) == 0: // overwrite inside the file through a shared mapping
			n, ok := existing()
			if !ok || len(*model[n]) == 0 {
				continue
			}
			old := *model[n]
			off := rng.IntN(len(old))
			b := fill(1 + rng.IntN(min(len(old)-off, 40<<10)))
			f, err := os.OpenFile(p(n), os.O_RDWR, 0)
			must(t, err)
			mem, err := syscall.Mmap(int(f.Fd()), 0, len(old), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
			if err != nil {
				fail(turn, "mmap of %s (%d bytes): %v", n, len(old), err)
			}
			copy(mem[off:], b)
			if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
				fail(turn, "msync of %s: %v", n, err)
			}
			must(t, syscall.Munmap(mem))
			must(t, f.Close())
			logf("%d %s: mmap write %s at %d, %d bytes", turn, m, n, off, len(b))
			copy(old[off:], b)
			*model[n], changed = old, n
		case k < 11: // append
			n, ok := existing()
			if !ok {
				continue
			}
			b := fill(1 + rng.IntN(20<<10))
			f, err := os.OpenFile(p(n), os.O_WRONLY|os.O_APPEND, 0)
			must(t, err)
			if _, err := f.Write(b); err != nil {
				fail(turn, "append to %s: %v", n, err)
			}
			must(t, f.Close())
			logf("%d %s: append %s, %d bytes", turn, m, n, len(b))
			*model[n], changed = append(*model[n], b...), n
		case k < 14: // truncate, smaller or larger
			n, ok := existing()
			if !ok {
				continue
			}
			sz := rng.IntN(len(*model[n]) + 1)
			if rng.IntN(3) == 0 {
				sz = len(*model[n]) + rng.IntN(30<<10)
			}
			must(t, os.Truncate(p(n), int64(sz)))
			logf("%d %s: truncate %s to %d", turn, m, n, sz)
			old := *model[n]
			if sz <= len(old) {
				old = old[:sz]
			} else {
				old = append(old, make([]byte, sz-len(old))...)
			}
			*model[n], changed = old, n
		case k == 14: // a hard link to a free name
			n, ok := existing()
			if !ok {
				continue
			}
			to := names[rng.IntN(len(names))]
			if _, taken := model[to]; taken {
				continue
			}
			must(t, os.Link(p(n), p(to)))
			logf("%d %s: link %s to %s", turn, m, n, to)
			model[to], names0 = model[n], true
		case k < 16: // rename over another name, or to a free one
			n, ok := existing()
			if !ok {
				continue
			}
			to := names[rng.IntN(len(names))]
			if to == n {
				continue
			}
			must(t, os.Rename(p(n), p(to)))
			logf("%d %s: rename %s to %s", turn, m, n, to)
			if model[to] == model[n] {
				continue // links to one file: rename does nothing (POSIX)
			}
			model[to] = model[n]
			delete(model, n)
			names0 = true
		case k < 18: // unlink
			n, ok := existing()
			if !ok {
				continue
			}
			must(t, os.Remove(p(n)))
			logf("%d %s: unlink %s", turn, m, n)
			delete(model, n)
			names0 = true
		default: // read a file through either mount: fills its caches
			n, ok := existing()
			if !ok {
				continue
			}
			if got, err := os.ReadFile(p(n)); err != nil || !bytes.Equal(got, *model[n]) {
				fail(turn, "read of %s through %s: %d bytes, %v; want %d", n, m, len(got), err, len(*model[n]))
			}
		}
		if changed != "" {
			// Close-to-open: both mounts read the new bytes at once,
			// through every name of the file.
			for _, r := range mounts {
				for n, b := range model {
					if b != model[changed] {
						continue
					}
					got, err := os.ReadFile(rpath(r, "d", n))
					if err != nil || !bytes.Equal(got, *b) {
						fail(turn, "%s changed through %s: %s read %s: %d bytes, %v; want %d, first difference at %d",
							changed, m, r, n, len(got), err, len(*b), firstDiff(got, *b))
					}
				}
			}
		}
		if names0 {
			for _, r := range mounts {
				if err := pollSettle(rpath(r, "d"), snapshot(), names...); err != nil {
					fail(turn, "after a change of names through %s, %s: %v", m, r, err)
				}
			}
		}
	}
}

// pollSettle waits until dir lists exactly model's names, every file
// reads model's bytes and each of names that model lacks is absent when
// looked up through the mount, for up to the change feed's bound on this
// machine (pollFor), and returns what still differs after it.
//
// The lookups matter: the listing comes from the metadata service, but a
// name another mount removed stays in this mount's kernel cache until the
// feed's invalidation arrives. A turn that then creates the name here
// opens the cached inode instead (O_CREAT of a name the kernel believes
// exists), which is what this mount may do within the feed's bound (ADR
// 0022) but not what the model expects of the next turn.
func pollSettle(dir string, model map[string][]byte, names ...string) error {
	return pollFor(func() error { return settled(dir, model, names...) })
}

func settled(dir string, model map[string][]byte, names ...string) error {
	for _, n := range names {
		if _, ok := model[n]; ok {
			continue
		}
		if _, err := os.Lstat(dir + "/" + n); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s, removed, is still seen through this mount: %v", n, err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var got, want []string
	for _, e := range ents {
		if e.Name() != ".sluice-s3" { // the S3 gateway's own (TestMountS3Random)
			got = append(got, e.Name())
		}
	}
	for n := range model {
		want = append(want, n)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("lists %v, want %v", got, want)
	}
	for _, n := range want {
		b, err := os.ReadFile(dir + "/" + n)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && !bytes.Equal(b, model[n])) {
			return fmt.Errorf("%s reads %d bytes, %v; want %d, first difference at %d", n, len(b), err, len(model[n]), firstDiff(b, model[n]))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func firstDiff(a, b []byte) int {
	i := 0
	for i < min(len(a), len(b)) && a[i] == b[i] {
		i++
	}
	return i
}
