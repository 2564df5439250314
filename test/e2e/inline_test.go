package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
)

// chunkFiles counts the chunk data files on all the server's targets.
func chunkFiles(t *testing.T, dataDir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dataDir, "targets"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".dat") {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestInlineSmallFiles: files up to --inline-max live in the metadata
// service (no chunk files on any target), larger ones in chunks, both
// read back byte for byte, and what Close acknowledged survives kill -9 of
// the server; with --inline-max 0 every file has chunks.
func TestInlineSmallFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sizes := []int{0, 1, 4 << 10, 64 << 10, 64<<10 + 1, 200 << 10}
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([][]byte, len(sizes))
	for i, n := range sizes {
		data[i] = make([]byte, n)
		for j := range data[i] {
			data[i][j] = byte(rng.Uint32())
		}
	}
	for _, tc := range []struct {
		flag       string
		wantChunks int // chunk files after writing the small files
	}{
		{"64KiB", 0},
		{"0", -1}, // some: every written file has chunks
	} {
		t.Run("inline-max="+tc.flag, func(t *testing.T) {
			dir := t.TempDir()
			s := startServer(t, dir, "--inline-max", tc.flag, "--targets", "2")
			c := s.client()
			for i, n := range sizes {
				if n > 64<<10 {
					continue
				}
				writeFile(t, c, fmt.Sprintf("/small%d", i), data[i])
			}
			got := chunkFiles(t, dir)
			if tc.wantChunks == 0 && got != 0 {
				t.Fatalf("%d chunk files for files up to the inline limit, want none", got)
			}
			if tc.wantChunks < 0 && got == 0 {
				t.Fatalf("no chunk files with --inline-max 0")
			}
			for i, n := range sizes {
				if n > 64<<10 {
					writeFile(t, c, fmt.Sprintf("/big%d", i), data[i])
				}
			}
			if chunkFiles(t, dir) <= got {
				t.Fatalf("files past the inline limit made no chunk files")
			}
			s.kill()
			s = startServer(t, dir, "--inline-max", tc.flag, "--targets", "2")
			c = s.client()
			for i, n := range sizes {
				p := fmt.Sprintf("/small%d", i)
				if n > 64<<10 {
					p = fmt.Sprintf("/big%d", i)
				}
				if b := mustRead(t, c, p); !bytes.Equal(b, data[i]) {
					t.Fatalf("%s after kill -9: %d bytes, want %d (first difference at %d)", p, len(b), len(data[i]), firstDiff(b, data[i]))
				}
			}
			for i, n := range sizes {
				p := fmt.Sprintf("/small%d", i)
				if n > 64<<10 {
					p = fmt.Sprintf("/big%d", i)
				}
				if err := c.Remove(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestInlineTwoClients: a client that learnt a file's bytes were all
// inline keeps writing and reading correctly after another client froze
// the inline part (wrote past the limit) and truncated it lower: each of
// its writes lands where the bytes live now.
func TestInlineTwoClients(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startServer(t, "", "--inline-max", "4KiB")
	a, b, check := s.client(), s.client(), s.client()
	want := bytes.Repeat([]byte("a"), 1000)
	writeFile(t, a, "/f", want)

	put := func(f *client.File, p []byte, off int64) {
		t.Helper()
		if _, err := f.WriteAt(p, off); err != nil {
			t.Fatal(err)
		}
		if err := f.FlushContext(ctx); err != nil {
			t.Fatal(err)
		}
		if end := off + int64(len(p)); end > int64(len(want)) {
			want = append(want, make([]byte, end-int64(len(want)))...)
		}
		copy(want[off:], p)
	}
	verify := func(what string) {
		t.Helper()
		if got := mustRead(t, check, "/f"); !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, want %d (first difference at %d)", what, len(got), len(want), firstDiff(got, want))
		}
	}
	fa, err := a.OpenFile(ctx, "/f", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := b.OpenFile(ctx, "/f", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()

	// b writes past the limit: the first 1000 bytes stay inline, frozen.
	put(fb, bytes.Repeat([]byte("B"), 10<<10), 500)
	verify("after b wrote past the inline limit")
	// a still thinks every byte is inline.
	put(fa, []byte("0123456789"), 990)
	verify("after a wrote below the frozen end")
	put(fa, bytes.Repeat([]byte("x"), 20), 995)
	verify("after a wrote across the frozen end")
	put(fa, []byte("tail"), 20<<10)
	verify("after a wrote past the end")
	// b truncates below the inline end: a's next write past it goes to
	// the chunks and the bytes between read as zeros.
	if err := fb.Truncate(ctx, 700); err != nil {
		t.Fatal(err)
	}
	want = want[:700]
	verify("after b truncated below the inline end")
	put(fa, []byte("zz"), 800)
	verify("after a wrote past the lowered end")
	put(fa, []byte("yy"), 699)
	verify("after a wrote across the lowered end")
	// Reads through both handles see the same bytes. (A handle's size
	// does not shrink with another client's truncate, as documented, so
	// they read exactly the file's length.)
	for _, f := range []*client.File{fa, fb} {
		got := make([]byte, len(want))
		if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read through a handle: %v (first difference at %d)", err, firstDiff(got, want))
		}
	}
}

func mustRead(t *testing.T, c *client.Client, p string) []byte {
	t.Helper()
	b, err := readFile(c, p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return b
}

// TestFsxInline runs the exerciser on small files around the inline limit
// (16 KiB): files grow past it and are truncated below it again, and each
// reopen goes through the other of two clients, so each File starts from
// what the metadata says about where the bytes live. SLUICE_FSX_SEED and
// SLUICE_FSX_OPS replay a seed or run longer.
func TestFsxInline(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c, other := s.client(), s.client()
	plan, err := fsx.PlanFromEnv(4000, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, seed := range plan.Seeds {
		dir := fmt.Sprintf("/inline-%d", i)
		if err := c.Mkdir(ctx, dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := fsx.Config{Seed: seed, Ops: plan.Ops, Files: 4, MaxSize: 48 << 10, MaxIO: 12 << 10,
			Boundaries: []int64{4 << 10, 16 << 10}, NoAllocate: plan.NoAllocate}
		st, err := fsx.Run(ctx, &fsx.Client{C: c, Others: []*client.Client{other}, Dir: dir, Ctx: ctx}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: %v", seed, st)
	}
}

// TestOpenRead: OpenRead returns a file open for reading with its
// attributes and the extended attribute asked for, for inline, mixed and
// chunked files alike, and refuses directories.
func TestOpenRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startServer(t, "")
	c := s.client()
	for _, n := range []int{0, 100, 16 << 10, 300 << 10} {
		p := fmt.Sprintf("/f%d", n)
		data := randBytes(uint64(n), n)
		writeFile(t, c, p, data)
		if n == 100 {
			if err := c.SetXattr(ctx, p, "user.meta", []byte("m")); err != nil {
				t.Fatal(err)
			}
		}
		f, a, x, err := c.OpenRead(ctx, p, "user.meta")
		if err != nil {
			t.Fatal(err)
		}
		if a.Size != uint64(n) || (n == 100) != (x != nil) || (x != nil && string(x) != "m") {
			t.Fatalf("%s: size %d, xattr %q; want %d and the xattr only on f100", p, a.Size, x, n)
		}
		got := make([]byte, n+10)
		k, err := f.ReadAt(got, 0)
		if k != n || !bytes.Equal(got[:k], data) {
			t.Fatalf("%s: read %d bytes (%v), want %d (first difference at %d)", p, k, err, n, firstDiff(got[:k], data))
		}
		f.Close()
		// The parallel read path (the mount's, the Python client's).
		f, _, _, err = c.OpenRead(ctx, p, "")
		if err != nil {
			t.Fatal(err)
		}
		clear(got)
		k, err = f.ReadAtParallel(ctx, got, 0)
		if k != n || !bytes.Equal(got[:k], data) || (n > 0 && err != io.EOF) {
			t.Fatalf("%s: parallel read %d bytes (%v), want %d and EOF (first difference at %d)", p, k, err, n, firstDiff(got[:k], data))
		}
		if n > 10 {
			k, err = f.ReadAtParallel(ctx, got[:10], int64(n-10))
			if k != 10 || err != nil || !bytes.Equal(got[:10], data[n-10:]) {
				t.Fatalf("%s: parallel read of the last 10 bytes: %d, %v", p, k, err)
			}
		}
		f.Close()
	}
	if err := c.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c.OpenRead(ctx, "/d", ""); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("OpenRead of a directory: %v, want an is-a-directory error", err)
	}
}
