package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/proctest"
	"golang.org/x/sync/errgroup"
)

// absorbServer starts a server with an /ckpt directory under the absorb
// policy and returns its address and a client without staging.
func absorbServer(t *testing.T) (string, *client.Client) {
	t.Helper()
	_, addr := proctest.Start(t, binary, nil, regexp.MustCompile(`serving on (\S+)`),
		"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "")
	ctx := context.Background()
	other := proctest.Client(t, addr)
	if err := other.Mkdir(ctx, "/ckpt", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := other.SetAbsorb(ctx, "/ckpt", client.AbsorbOn); err != nil {
		t.Fatal(err)
	}
	return addr, other
}

// TestStagingFull stages on a small tmpfs. With the default limit (three
// quarters of the space, less the pool's share) a file twice the size of
// the disk, written in one call, is written at the drain's rate: the
// write waits for room instead of failing, and the file drains intact.
// With a limit larger than the disk, the write that hits the full
// staging disk fails with a no-space error, what was acknowledged before
// drains intact, and once drained the space is there again.
func TestStagingFull(t *testing.T) {
	staging := t.TempDir()
	proctest.MountTmpfs(t, staging, "8m")
	addr, other := absorbServer(t)
	ctx := context.Background()

	small := shardData(9, 0)[:2<<20]
	big := bytes.Repeat(shardData(9, 1)[:1<<20], 16)
	t.Run("limit", func(t *testing.T) {
		c, err := client.New(ctx, client.Options{Server: addr, StagingDir: staging})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := proctest.WriteFile(ctx, c, "/ckpt/a", small); err != nil {
			t.Fatal(err)
		}
		if n, err := writeOnce(ctx, c, "/ckpt/big", big); err != nil {
			t.Fatalf("a file twice the staging disk's size: wrote %d of %d bytes: %v", n, len(big), err)
		}
		st := c.StagingStats()
		t.Logf("staging: limit %d, peak %d bytes held, %d writes waited %v, %d segments", st.Limit, st.PeakHeld, st.Throttled, st.ThrottledTime, st.Segments)
		if st.Limit <= 0 || st.Limit >= 8<<20 {
			t.Errorf("the default limit on an 8 MiB staging disk is %d bytes", st.Limit)
		}
		if st.Throttled == 0 || st.PeakHeld > st.Limit {
			t.Errorf("writes that waited: %d; the most bytes held %d, limit %d", st.Throttled, st.PeakHeld, st.Limit)
		}
		if st.StagedBytes != int64(len(small)+len(big)) {
			t.Errorf("staged %d bytes, want %d: the write did not go through the staging area", st.StagedBytes, len(small)+len(big))
		}
		if err := c.WaitStaged(ctx); err != nil {
			t.Fatal(err)
		}
		for p, want := range map[string][]byte{"/ckpt/a": small, "/ckpt/big": big} {
			if got, err := readFile(ctx, other, p); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s after the drain: %d bytes (first difference at %d), %v", p, len(got), firstDiff(got, want), err)
			}
		}
		if st := c.StagingStats(); st.Held != 0 {
			t.Errorf("%d bytes still held after everything drained", st.Held)
		}
	})

	// Another program fills most of the staging disk after the client
	// started: the limit shrinks with the free space, so the writes wait
	// for drains instead of failing. Also with a limit (64 MiB) larger
	// than the disk.
	filler := filepath.Join(staging, "filler")
	defer os.Remove(filler)
	t.Run("filled", func(t *testing.T) {
		c, err := client.New(ctx, client.Options{Server: addr, StagingDir: staging, StagingMax: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fill(t, filler, 5<<20)
		defer os.Remove(filler)
		if n, err := writeOnce(ctx, c, "/ckpt/big3", big); err != nil {
			t.Fatalf("16 MiB through a staging disk with 3 MiB free: wrote %d of %d bytes: %v", n, len(big), err)
		}
		st := c.StagingStats()
		t.Logf("staging: limit %d, peak %d bytes held, %d writes waited %v", st.Limit, st.PeakHeld, st.Throttled, st.ThrottledTime)
		if st.Throttled == 0 || st.PeakHeld > 3<<20 {
			t.Errorf("writes that waited: %d; the most bytes held %d with 3 MiB free", st.Throttled, st.PeakHeld)
		}
		if err := c.WaitStaged(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := readFile(ctx, other, "/ckpt/big3"); err != nil || !bytes.Equal(got, big) {
			t.Errorf("after the drain: %d bytes (first difference at %d), %v", len(got), firstDiff(got, big), err)
		}
	})

	// A disk that fills anyway (nothing staged could drain to make room):
	// the write fails with a no-space error, what was acknowledged before
	// drains intact, and once there is space the writes go on.
	t.Run("no-space", func(t *testing.T) {
		c, err := client.New(ctx, client.Options{Server: addr, StagingDir: staging, StagingMax: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := proctest.WriteFile(ctx, c, "/ckpt/c", small); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitStaged(ctx); err != nil {
			t.Fatal(err)
		}
		fill(t, filler, 64<<20) // all there is
		f, err := c.Create(ctx, "/ckpt/big2")
		if err != nil {
			t.Fatal(err)
		}
		_, werr := f.Write(big)
		f.Close()
		if errs.CodeOf(werr) != errs.NoSpace {
			t.Fatalf("a write past the staging disk's space: %v (class %v), want no space", werr, errs.CodeOf(werr))
		}
		os.Remove(filler)
		if err := c.WaitStaged(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := readFile(ctx, other, "/ckpt/c")
		if err != nil || !bytes.Equal(got, small) {
			t.Fatalf("acknowledged file after the staging disk filled: %d bytes, %v", len(got), err)
		}
		// The staging disk has room again.
		if err := proctest.WriteFile(ctx, c, "/ckpt/d", small); err != nil {
			t.Fatalf("write after the drain freed the staging disk: %v", err)
		}
		if err := c.WaitStaged(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := readFile(ctx, other, "/ckpt/d"); err != nil || !bytes.Equal(got, small) {
			t.Fatalf("file written after the space came back: %d bytes, %v", len(got), err)
		}
	})
}

// TestStagingLimit: four writers stage files of three times the limit
// each, at once, in writes of 256 KiB: the bytes held never pass the
// limit by more than a write per writer, writers wait for room, every byte goes through the staging area,
// and every file drains intact.
func TestStagingLimit(t *testing.T) {
	addr, other := absorbServer(t)
	ctx := context.Background()
	const limit = 4 << 20
	c, err := client.New(ctx, client.Options{Server: addr, StagingDir: t.TempDir(), StagingMax: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := make([][]byte, 4)
	var g errgroup.Group
	for i := range data {
		data[i] = bytes.Repeat(shardData(10, i)[:1<<20], 3*limit>>20)
		g.Go(func() error {
			p := fmt.Sprintf("/ckpt/shard%d", i)
			f, err := c.Create(ctx, p)
			if err != nil {
				return err
			}
			for off := 0; off < len(data[i]); off += 256 << 10 {
				if _, err := f.Write(data[i][off : off+256<<10]); err != nil {
					f.Close()
					return fmt.Errorf("%s: write at %d: %w", p, off, err)
				}
			}
			return f.Close()
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	st := c.StagingStats()
	t.Logf("staging: limit %d, peak %d bytes held, %d writes waited %v, %d segments", st.Limit, st.PeakHeld, st.Throttled, st.ThrottledTime, st.Segments)
	// Each writer may pass the limit by one write (256 KiB) when nothing
	// sealed is left to drain (docs/checkpoint.md, Limits).
	if st.Limit != limit || st.PeakHeld > limit+4*256<<10 || st.PeakHeld == 0 {
		t.Errorf("limit %d (set %d); the most bytes held %d", st.Limit, limit, st.PeakHeld)
	}
	if st.Throttled == 0 {
		t.Error("no write waited for room, with 12 MiB written under a 4 MiB limit")
	}
	if want := int64(len(data) * 3 * limit); st.StagedBytes != want {
		t.Errorf("staged %d bytes, want %d", st.StagedBytes, want)
	}
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	for i, want := range data {
		p := fmt.Sprintf("/ckpt/shard%d", i)
		if got, err := readFile(ctx, other, p); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after the drain: %d bytes (first difference at %d), %v", p, len(got), firstDiff(got, want), err)
		}
	}
}

// fill writes up to n bytes of zeros to path, as another program filling
// the staging disk would; it stops quietly at a full disk.
func fill(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 256<<10)
	for n > 0 {
		k, err := f.Write(buf[:min(n, len(buf))])
		n -= k
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// writeOnce creates p through c and writes data in one call, then closes
// it: the close's error counts.
func writeOnce(ctx context.Context, c *client.Client, p string, data []byte) (int, error) {
	f, err := c.Create(ctx, p)
	if err != nil {
		return 0, err
	}
	n, err := f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}
