package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// chunksOn counts the chunk files on target id of a `sluice serve` data dir.
func chunksOn(t *testing.T, dataDir string, id int) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dataDir, "targets", fmt.Sprint(id), "chunks"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".sum") {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDrain drains target 2 of a real `sluice serve` with `sluice target
// drain` while a writer rewrites a file on it: afterwards no file has a
// chunk there (its chunk directory empties once the old chunks are
// collected), every file reads back as written, files of a pool stay in
// the pool, new files avoid the target, and --stop lets it take data again.
func TestDrain(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	c := s.client()
	ctx := context.Background()
	s.mustCLI("mkdir", "/a", "/one", "/p")
	s.mustCLI("layout", "set", "/one", "--stripe-count", "1")
	s.mustCLI("pool", "create", "two", "2", "3")
	s.mustCLI("layout", "set", "/p", "--pool", "two", "--stripe-count", "2")
	want := map[string][]byte{}
	put := func(p string, n int) {
		want[p] = randBytes(uint64(len(want)+60), n)
		writeFile(t, c, p, want[p])
	}
	for i := range 3 {
		put(fmt.Sprintf("/a/f%d", i), 3<<20+i)
		put(fmt.Sprintf("/p/f%d", i), 2<<20+i)
	}
	for i := range 6 {
		put(fmt.Sprintf("/one/f%d", i), 1<<20+i)
	}
	put("/a/tiny", 100)
	// The file of /one on target 2 alone is rewritten during the drain.
	var on2 string
	for i := range 6 {
		p := fmt.Sprintf("/one/f%d", i)
		if l, err := c.GetLayout(ctx, p); err == nil && slices.Equal(l.Chains, []uint32{2}) {
			on2 = p
		}
	}
	if on2 == "" {
		t.Fatal("no file of /one is on target 2")
	}
	if n := chunksOn(t, dir, 2); n < 5 {
		t.Fatalf("only %d chunks on target 2 before the drain", n)
	}

	w := &writer{model: bytes.Clone(want[on2])}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { w.run(ctx, t, c, on2, 61, 512<<10, 2<<20, stop) })
	time.Sleep(200 * time.Millisecond)
	out := s.mustCLI("target", "drain", "--rate", "32M", "2")
	close(stop)
	wg.Wait()
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
	want[on2] = w.model
	t.Logf("sluice target drain 2:\n%s(%d writes during it)", out, w.n)
	if !strings.Contains(out, on2+"\t") {
		t.Errorf("the drain did not move %s, which was on target 2", on2)
	}
	if !strings.Contains(out, "; 0 failed") {
		t.Errorf("drain summary: %q", out)
	}
	if st := s.mustCLI("status"); !strings.Contains(st, "draining") {
		t.Errorf("status does not show the draining target:\n%s", st)
	}
	put("/a/new", 5<<20)
	for p, data := range want {
		l, err := c.GetLayout(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(l.Chains, 2) {
			t.Errorf("%s still on target 2 after the drain: %+v", p, l)
		}
		if strings.HasPrefix(p, "/p/") && !slices.Equal(l.Chains, []uint32{3}) {
			t.Errorf("%s left its pool (targets 2, 3) or kept 2 stripes: %+v", p, l)
		}
		got, err := readFile(s.client(), p)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s after the drain: %v (or the bytes differ)", p, err)
		}
	}
	if l, _ := c.GetLayout(ctx, "/a/new"); len(l.Chains) != 3 {
		t.Errorf("a new file while target 2 drains: %+v, want 3 stripes off it", l)
	}
	deadline := time.Now().Add(30 * time.Second)
	for chunksOn(t, dir, 2) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("target 2 still holds %d chunks", chunksOn(t, dir, 2))
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.failCLI("no target", "target", "drain", "99")

	// Removal: refused for a target that is not draining or is in a pool,
	// then done; the target is gone from status and from placement.
	s.failCLI("not draining", "target", "rm", "3")
	s.failCLI("pool", "target", "rm", "2")
	s.mustCLI("pool", "remove", "two", "2")
	for {
		r := s.cli("target", "rm", "2")
		if r.code == 0 {
			break
		}
		// The node reports its chunk count with its next heartbeat.
		if !strings.Contains(r.stderr, "chunks") || time.Now().After(deadline) {
			t.Fatalf("target rm 2: %s", r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ts, err := c.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(ts, func(ti client.TargetInfo) bool { return ti.ID == 2 }) {
		t.Errorf("target 2 still listed after rm: %+v", ts)
	}
	s.failCLI("was removed", "target", "drain", "2")
	put("/a/new2", 5<<20)
	if l, _ := c.GetLayout(ctx, "/a/new2"); len(l.Chains) != 3 || slices.Contains(l.Chains, 2) {
		t.Errorf("a new file after target 2 was removed: %+v", l)
	}

	// --stop: a drained target takes data again.
	s.mustCLI("target", "drain", "-q", "4")
	put("/a/new3", 5<<20)
	if l, _ := c.GetLayout(ctx, "/a/new3"); len(l.Chains) != 2 || slices.Contains(l.Chains, 4) {
		t.Errorf("a new file while target 4 drains: %+v, want 2 stripes off it", l)
	}
	s.mustCLI("target", "drain", "--stop", "4")
	if st := s.mustCLI("status"); strings.Contains(st, "draining") {
		t.Errorf("status still shows a draining target after --stop:\n%s", st)
	}
	put("/a/new4", 5<<20)
	if l, _ := c.GetLayout(ctx, "/a/new4"); len(l.Chains) != 3 {
		t.Errorf("a new file after --stop: %+v, want 3 stripes", l)
	}
	for p, data := range want {
		if got, err := readFile(s.client(), p); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s at the end: %v (or the bytes differ)", p, err)
		}
	}
}
