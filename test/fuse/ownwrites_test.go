package fuse

import (
	"bytes"
	"io"
	"os"
	"syscall"
	"testing"
	"unsafe"
)

// TestOwnWritesKeepCache: a file written through a mount reads back
// through it from the kernel's page cache (the targets serve none of it:
// the pages hold what the mount's own writes sent), and a change through
// another mount afterwards is seen at the next open (close-to-open): the
// cache is kept only while the file's mtime and size are what the
// mount's own last change left.
func TestOwnWritesKeepCache(t *testing.T) {
	requireFUSE(t)
	s, admin := modelServer(t)
	a := startMount(t, s.addr)
	b := startMount(t, s.addr)
	// writeReadBack writes p through a, reads it back through a and
	// checks that the targets served none of it.
	writeReadBack := func(what string, p []byte) {
		t.Helper()
		must(t, os.WriteFile(a.path("f"), p, 0o644))
		before := targetReadBytes(t, admin)
		got, err := os.ReadFile(a.path("f"))
		must(t, err)
		if !bytes.Equal(got, p) {
			t.Fatalf("%s read back through the writing mount: wrong bytes", what)
		}
		if n := targetReadBytes(t, admin) - before; n != 0 {
			t.Errorf("reading back %s through the mount that wrote it read %d bytes from the targets, want 0 (its own pages)", what, n)
		}
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: in chunks, not inline
	writeReadBack("a new file", data)
	// A rewrite (O_TRUNC of the existing file) keeps the pages too.
	writeReadBack("a rewrite", bytes.Repeat([]byte("fedcba9876543210"), 1<<16))

	// The same size, other bytes, through the other mount.
	other := bytes.Repeat([]byte("ZYXWVUTSRQPONMLK"), 1<<16)
	must(t, os.WriteFile(b.path("f"), other, 0o644))
	got, err := os.ReadFile(a.path("f"))
	must(t, err)
	if !bytes.Equal(got, other) {
		t.Fatalf("first mount read its own old bytes after the other mount overwrote the file (close-to-open): %q...", got[:16])
	}

	// Written again through the first mount, read through both.
	must(t, os.WriteFile(a.path("f"), data, 0o644))
	for _, m := range []*mount{a, b} {
		got, err = os.ReadFile(m.path("f"))
		must(t, err)
		if !bytes.Equal(got, data) {
			t.Fatalf("%s read %q... after the first mount's rewrite", m.path("f"), got[:16])
		}
	}
	a.stop()
	b.stop()
}

// TestOwnWritesOtherWriter: a mount that writes a file while another
// mount changes other bytes of it must not keep, after its close, the
// pages it read before the other's change, even though its own commit
// came last (so the file's mtime and size are its own): the answer to its
// commit says the file was changed in between (wire.AttrUnchanged absent).
func TestOwnWritesOtherWriter(t *testing.T) {
	requireFUSE(t)
	s, _ := modelServer(t)
	a := startMount(t, s.addr)
	b := startMount(t, s.addr)
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: in chunks
	must(t, os.WriteFile(a.path("f"), data, 0o644))

	fa, err := os.OpenFile(a.path("f"), os.O_RDWR, 0)
	must(t, err)
	got := make([]byte, len(data))
	if _, err := fa.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("first read through a: %v", err)
	}
	fb, err := os.OpenFile(b.path("f"), os.O_RDWR, 0)
	must(t, err)
	other := bytes.Repeat([]byte("B"), 4096)
	if _, err := fb.WriteAt(other, 0); err != nil {
		t.Fatal(err)
	}
	must(t, fb.Close()) // b's commit
	if _, err := fa.WriteAt([]byte("A"), 512<<10); err != nil {
		t.Fatal(err)
	}
	must(t, fa.Close()) // a's commit, the last change of the file

	want := bytes.Clone(data)
	copy(want, other)
	want[512<<10] = 'A'
	for _, m := range []*mount{a, b} {
		got, err := os.ReadFile(m.path("f"))
		must(t, err)
		if !bytes.Equal(got[:4096], want[:4096]) || !bytes.Equal(got, want) {
			t.Errorf("%s: first bytes %q, want %q (the other mount's write)", m.path("f"), got[:8], want[:8])
		}
	}
	a.stop()
	b.stop()
}

// TestOwnWritesRandom: two mounts take turns changing one file (random
// writes, sometimes a truncate, sometimes a read of the whole file first,
// which fills the kernel's cache), each turn an open and a close; after
// every turn a fresh open on each mount reads the whole file, which must
// match the model byte for byte, whichever mount kept which pages.
// SLUICE_OWNWRITES_SEED replays a seed; SLUICE_OWNWRITES_TURNS runs more
// turns (default 120).
func TestOwnWritesRandom(t *testing.T) {
	requireFUSE(t)
	rt := newRandomTurns(t, "OWNWRITES", 120, 13)
	seed, turns, rng := rt.seed, rt.turns, rt.rng
	s, _ := modelServer(t)
	mounts := []*mount{startMount(t, s.addr), startMount(t, s.addr)}
	const maxSize = 3 << 20
	var model []byte
	must(t, os.WriteFile(mounts[0].path("f"), nil, 0o644))
	for turn := range turns {
		m := mounts[rng.IntN(2)]
		flag := os.O_RDWR
		if rng.IntN(8) == 0 {
			flag |= os.O_TRUNC // a rewrite
			model = model[:0]
		}
		f, err := os.OpenFile(m.path("f"), flag, 0)
		must(t, err)
		if rng.IntN(2) == 0 {
			got, err := io.ReadAll(f)
			if err != nil || !bytes.Equal(got, model) {
				t.Fatalf("turn %d, %s: read before writing: %d bytes, %v; want the model's %d", turn, m.path("f"), len(got), err, len(model))
			}
		}
		switch k := rng.IntN(10); {
		case k == 0:
			n := rng.IntN(len(model) + 1)
			must(t, f.Truncate(int64(n)))
			model = model[:n]
		default:
			off := rng.IntN(maxSize - 1)
			n := 1 + rng.IntN(min(maxSize-off, 300<<10))
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			if _, err := f.WriteAt(b, int64(off)); err != nil {
				t.Fatal(err)
			}
			if end := off + n; end > len(model) {
				model = append(model, make([]byte, end-len(model))...)
			}
			copy(model[off:], b)
		}
		must(t, f.Close())
		for _, r := range mounts {
			got, err := os.ReadFile(r.path("f"))
			if err != nil || !bytes.Equal(got, model) {
				i := 0
				for i < min(len(got), len(model)) && got[i] == model[i] {
					i++
				}
				t.Fatalf("turn %d (written through %s): %s read %d bytes, %v; want %d, first difference at %d (seed %d)",
					turn, m.path("f"), r.path("f"), len(got), err, len(model), i, seed)
			}
		}
	}
	for _, m := range mounts {
		m.stop()
	}
}

// TestReopenAfterShrink: a mount whose File for a file outlives an open
// (here a descriptor held open, as a release the kernel has not yet sent
// does) must, at the next open after another mount shrank the file, read
// the new size and no byte past it, and afterwards the bytes another
// mount wrote at the same size (close-to-open), not what it read ahead
// before.
func TestReopenAfterShrink(t *testing.T) {
	requireFUSE(t)
	s, _ := modelServer(t)
	a := startMount(t, s.addr)
	b := startMount(t, s.addr)
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	must(t, os.WriteFile(a.path("f"), data, 0o644))
	held, err := os.Open(b.path("f"))
	must(t, err)
	defer held.Close()
	got, err := io.ReadAll(held)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("first read through the second mount: %d bytes, %v", len(got), err)
	}
	for i, n := range []int{2<<20 + 12345, 700000, 4096, 0} {
		f, err := os.OpenFile(a.path("f"), os.O_RDWR, 0)
		must(t, err)
		must(t, f.Truncate(int64(n)))
		// Same size, other bytes at the start: a cached copy shows.
		if n > 0 {
			if _, err := f.WriteAt([]byte{byte(i + 1)}, 0); err != nil {
				t.Fatal(err)
			}
		}
		must(t, f.Close())
		want := bytes.Clone(data[:n])
		if n > 0 {
			want[0] = byte(i + 1)
		}
		for round := range 2 {
			got, err := os.ReadFile(b.path("f"))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("after the other mount cut the file to %d: read %d bytes (round %d), %v; first byte %v, want %v", n, len(got), round, err, got[:min(1, len(got))], want[:min(1, len(want))])
			}
		}
		// O_DIRECT reads reach the mount without the kernel's size.
		if got, err := readDirect(b.path("f"), len(data)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("after the other mount cut the file to %d: O_DIRECT read %d bytes, %v", n, len(got), err)
		}
		// The descriptor held open through it all reads the new end too.
		p := make([]byte, 8192)
		k, _ := held.ReadAt(p, int64(n))
		if k != 0 {
			t.Fatalf("the descriptor held open read %d bytes past the new end %d", k, n)
		}
	}
	a.stop()
	b.stop()
}

// readDirect reads up to max bytes of path with O_DIRECT, in aligned
// 64 KiB reads, until a short one.
func readDirect(path string, max int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	const blk = 64 << 10
	buf := make([]byte, blk+4096)
	al := buf[4096-int(uintptr(unsafe.Pointer(&buf[0]))&4095):][:blk]
	var out []byte
	for len(out) < max+blk {
		n, err := f.ReadAt(al, int64(len(out)))
		out = append(out, al[:n]...)
		if n < blk || err != nil {
			if err == io.EOF {
				err = nil
			}
			return out, err
		}
	}
	return out, nil
}

// TestAppendAfterShrink: an O_APPEND write through a mount whose kernel
// last saw the file larger (another mount cut it since) lands at the new
// end, not at the end the kernel remembered.
func TestAppendAfterShrink(t *testing.T) {
	requireFUSE(t)
	s, _ := modelServer(t)
	a := startMount(t, s.addr)
	b := startMount(t, s.addr)
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	must(t, os.WriteFile(a.path("f"), data, 0o644))
	if got, err := os.ReadFile(b.path("f")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("first read through the second mount: %d bytes, %v", len(got), err)
	}
	for i, n := range []int{100000, 5000, 0} {
		must(t, os.Truncate(a.path("f"), int64(n)))
		f, err := os.OpenFile(b.path("f"), os.O_WRONLY|os.O_APPEND, 0)
		must(t, err)
		tail := []byte{'X', byte('0' + i)}
		if _, err := f.Write(tail); err != nil {
			t.Fatal(err)
		}
		must(t, f.Close())
		want := append(bytes.Clone(data[:n]), tail...)
		for _, m := range []*mount{a, b} {
			got, err := os.ReadFile(m.path("f"))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("after a cut to %d and an append through the other mount, %s read %d bytes, %v; want %d", n, m.path("f"), len(got), err, len(want))
			}
		}
		data = want
	}
	a.stop()
	b.stop()
}
