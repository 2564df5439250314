package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// chunkFiles maps each chunk data file of data ID id to its size, by
// target: "T/slot" -> bytes.
func chunkSizes(t *testing.T, dataDir string, id uint64) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, err := filepath.Glob(filepath.Join(dataDir, "targets", "*", "chunks", fmt.Sprintf("%02x", id&0xff), fmt.Sprintf("%016x.*.dat", id)))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(p))))
		var slot int
		fmt.Sscanf(strings.Split(filepath.Base(p), ".")[1], "%x", &slot)
		out[fmt.Sprintf("%s/%d", target, slot)] = fi.Size()
	}
	return out
}

// TestProgressiveLayoutCLI: `sluice layout set --extent` on a directory
// with pools: `layout get` shows the extents; a file written across them
// has each extent's chunks on its pool's targets, with the bytes the
// layout math says, reads back whole, and after a truncate into the
// second extent the chunks past it are cut. Bad extents are refused with a
// clear error.
func TestProgressiveLayoutCLI(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	ctx := context.Background()
	s.mustCLI("pool", "create", "fast", "1")
	s.mustCLI("pool", "create", "slow", "2", "3", "4")
	s.mustCLI("mkdir", "/p")
	s.mustCLI("layout", "set", "/p", "--extent", "1M:1::fast", "--extent", "3M:2:256K:slow", "--extent", "eof:0:512K:slow")
	got := s.mustCLI("layout", "get", "/p")
	if want := "extents=[0-1MiB 1x1MiB pool=fast | 1MiB-3MiB 2x256KiB pool=slow | 3MiB-eof allx512KiB pool=slow]"; !strings.Contains(got, want) {
		t.Errorf("layout get /p: %q, want %q", got, want)
	}
	c := s.client()
	data := randBytes(21, 5<<20+12345)
	if err := proctest.WriteFile(ctx, c, "/p/f", data); err != nil {
		t.Fatal(err)
	}
	l, err := c.GetLayout(ctx, "/p/f")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Chains) != 6 || l.Chains[0] != 1 {
		t.Fatalf("file layout %+v: want slot 0 on target 1 and 1 + 2 + 3 slots", l)
	}
	for _, ch := range l.Chains[1:] {
		if ch == 1 {
			t.Errorf("file layout %+v: a slow extent on the fast target", l)
		}
	}
	fi, err := c.Stat(ctx, "/p/f")
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Attr().Ino
	// 1 MiB in slot 0; 2 MiB over slots 1-2 (1 MiB each); the rest,
	// 2 MiB + 12345, over slots 3-5 in 512 KiB stripes: stripes 0 and 3
	// in slot 3, 1 and the last 12345 bytes (stripe 4) in slot 4, 2 in 5.
	want := map[int]int64{0: 1 << 20, 1: 1 << 20, 2: 1 << 20, 3: 1 << 20, 4: 512<<10 + 12345, 5: 512 << 10}
	chunks := chunkSizes(t, s.dataDir, ino)
	for slot, size := range want {
		k := fmt.Sprintf("%d/%d", l.Chains[slot], slot)
		if chunks[k] != size {
			t.Errorf("chunk %s: %d bytes, want %d (all: %v)", k, chunks[k], size, chunks)
		}
	}
	f, err := c.Open(ctx, "/p/f")
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(f)
	f.Close()
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("read back %d bytes, %v", len(back), err)
	}
	// Truncate into the second extent: its second slot keeps 256 KiB + 100,
	// the third extent's chunks are cut to nothing.
	if err := c.Truncate(ctx, "/p/f", 1<<20+256<<10+256<<10+100); err != nil {
		t.Fatal(err)
	}
	chunks = chunkSizes(t, s.dataDir, ino)
	for slot, size := range map[int]int64{0: 1 << 20, 1: 256<<10 + 100, 2: 256 << 10, 3: 0, 4: 0, 5: 0} {
		k := fmt.Sprintf("%d/%d", l.Chains[slot], slot)
		if got, ok := chunks[k]; ok && got != size || !ok && size != 0 {
			t.Errorf("after truncate, chunk %s: %d bytes (present %v), want %d", k, got, ok, size)
		}
	}
	f, err = c.Open(ctx, "/p/f")
	if err != nil {
		t.Fatal(err)
	}
	back, _ = io.ReadAll(f)
	f.Close()
	if !bytes.Equal(back, data[:1<<20+512<<10+100]) {
		t.Errorf("after truncate: read %d bytes, not the file's first %d", len(back), 1<<20+512<<10+100)
	}
	// A subdirectory inherits the extents.
	s.mustCLI("mkdir", "/p/sub")
	if got := s.mustCLI("layout", "get", "/p/sub"); !strings.Contains(got, "extents=[0-1MiB") {
		t.Errorf("layout get /p/sub: %q", got)
	}
	s.failCLI("END:COUNT", "layout", "set", "/p", "--extent", "1M")
	s.failCLI("end of the file", "layout", "set", "/p", "--extent", "1M:1", "--extent", "2M:1")
	s.failCLI("not after", "layout", "set", "/p", "--extent", "2M:1", "--extent", "1M:1", "--extent", "eof:1")
	s.failCLI("pool", "layout", "set", "/p", "--extent", "1M:1::nope", "--extent", "eof:1")
	s.failCLI("--extent", "layout", "set", "/p", "--extent", "1M:1", "--extent", "eof:1", "--stripe-count", "2")
	// A plain layout replaces the extents.
	s.mustCLI("layout", "set", "/p", "--stripe-count", "2")
	if got := s.mustCLI("layout", "get", "/p"); strings.Contains(got, "extents") {
		t.Errorf("after a plain layout set: %q", got)
	}
}

// TestMigrateProgressive: `sluice migrate` of a progressive file keeps its
// extents (chains chosen anew in each extent's pool) and its bytes;
// `--stripe-count` makes it plain; `sluice target drain` moves a
// progressive file's chunks off the target, extents kept.
func TestMigrateProgressive(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	ctx := context.Background()
	c := s.client()
	s.mustCLI("mkdir", "/p")
	s.mustCLI("layout", "set", "/p", "--extent", "1M:1", "--extent", "3M:2:256K", "--extent", "eof:2:512K")
	data := randBytes(22, 4<<20+999)
	check := func(what string) {
		t.Helper()
		f, err := c.Open(ctx, "/p/f")
		if err != nil {
			t.Fatal(err)
		}
		back, err := io.ReadAll(f)
		f.Close()
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("%s: read back %d bytes, %v", what, len(back), err)
		}
	}
	if err := proctest.WriteFile(ctx, c, "/p/f", data); err != nil {
		t.Fatal(err)
	}
	before, err := c.GetLayout(ctx, "/p/f")
	if err != nil {
		t.Fatal(err)
	}
	s.mustCLI("migrate", "/p/f")
	after, err := c.GetLayout(ctx, "/p/f")
	if err != nil {
		t.Fatal(err)
	}
	if after.Data == 0 || len(after.Components) != 3 || len(after.Chains) != 5 || !slices.Equal(after.Components, before.Components) {
		t.Fatalf("after migrate: %+v, want the extents of %+v under a new data ID", after, before)
	}
	check("after migrate")

	// Drain a target the file uses: its chunks move off it, extents kept.
	victim := after.Chains[0]
	out := s.mustCLI("target", "drain", fmt.Sprint(victim))
	drained, err := c.GetLayout(ctx, "/p/f")
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range drained.Chains {
		if ch == victim {
			t.Errorf("after draining target %d: %+v still on it\n%s", victim, drained, out)
		}
	}
	if !slices.Equal(drained.Components, before.Components) {
		t.Errorf("the drain changed the extents: %+v", drained)
	}
	check("after the drain")
	s.mustCLI("target", "drain", "--stop", fmt.Sprint(victim))

	s.mustCLI("migrate", "--stripe-count", "2", "/p/f")
	plain, err := c.GetLayout(ctx, "/p/f")
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Components) != 0 || plain.StripeCount != 2 {
		t.Errorf("after migrate --stripe-count 2: %+v, want a plain layout of 2", plain)
	}
	check("after migrate to a plain layout")
}
