package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/dashboard"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestPools makes pools of the four targets of a real `sluice serve`,
// points directories at them with `sluice layout set --pool`, and checks
// that new files land on the pool's targets only, read back intact
// (SHA-256), that subdirectories inherit the pool, that bad input is
// refused with a clear error, and that pools survive a restart.
func TestPools(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--http", "127.0.0.1:0")
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := s.client()
	ctx := context.Background()

	s.mustCLI("pool", "create", "fast", "1")
	s.mustCLI("pool", "add", "fast", "2")
	s.mustCLI("pool", "create", "slow", "3", "4")
	s.mustCLI("pool", "create", "empty")
	s.failCLI("exists", "pool", "create", "fast")
	s.failCLI("pool name", "pool", "create", "Fast")
	s.failCLI("does not exist", "pool", "add", "fast", "99")
	s.failCLI("already", "pool", "add", "fast", "1")
	s.failCLI("not in the pool", "pool", "remove", "fast", "4")
	s.failCLI("invalid target", "pool", "add", "fast", "x")
	s.failCLI("no pool", "pool", "add", "nope", "1")

	ls := s.mustCLI("pool", "ls")
	for _, want := range []string{"fast  ", "1,2", "slow", "3,4", "empty"} {
		if !strings.Contains(ls, want) {
			t.Errorf("pool ls lacks %q:\n%s", want, ls)
		}
	}
	ps, err := c.Pools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[1].Name != "fast" || !slices.Equal(ps[1].Targets, []uint32{1, 2}) || ps[1].Capacity <= 0 || ps[0].Capacity != 0 {
		t.Fatalf("pools: %+v", ps)
	}
	if st := s.mustCLI("status"); !strings.Contains(st, "POOL") || !strings.Contains(st, "3,4") {
		t.Errorf("status shows no pools:\n%s", st)
	}
	// The metrics and the dashboard's snapshot (what its page draws).
	snap, err := dashboard.Fetch(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pools) != 3 || snap.Pools[1].Name != "fast" || snap.Pools[1].Targets != 2 ||
		snap.Pools[1].Capacity != float64(ps[1].Capacity) || snap.Pools[0].Capacity != 0 {
		t.Errorf("dashboard snapshot pools: %+v, want those of %+v", snap.Pools, ps)
	}

	s.mustCLI("mkdir", "/hot", "/cold", "/none")
	s.mustCLI("layout", "set", "/hot", "--pool", "fast")
	s.mustCLI("layout", "set", "/cold", "--pool", "slow", "--stripe-count", "2")
	s.mustCLI("layout", "set", "/none", "--pool", "empty")
	s.failCLI("no pool", "layout", "set", "/hot", "--pool", "nope")
	s.mustCLI("mkdir", "/hot/sub")
	for _, p := range []string{"/hot", "/hot/sub"} {
		if got := s.mustCLI("layout", "get", p); !strings.Contains(got, "pool=fast") {
			t.Errorf("layout get %s: %q", p, got)
		}
	}

	sums := make(map[string][32]byte)
	put := func(p string, seed uint64) {
		data := randBytes(seed, 2<<20+int(seed)*4099)
		writeFile(t, c, p, data)
		sums[p] = sha256.Sum256(data)
	}
	on := func(p string, pool ...uint32) {
		t.Helper()
		l, err := c.GetLayout(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Chains) != len(pool) {
			t.Errorf("%s: chains %v, want %d of pool %v", p, l.Chains, len(pool), pool)
		}
		for _, ch := range l.Chains {
			if !slices.Contains(pool, ch) {
				t.Errorf("%s: on target %d, outside pool %v", p, ch, pool)
			}
		}
	}
	for i := range 6 {
		for _, d := range []string{"/hot", "/hot/sub", "/cold"} {
			put(fmt.Sprintf("%s/f%d", d, i), uint64(i+1))
		}
	}
	for i := range 6 {
		on(fmt.Sprintf("/hot/f%d", i), 1, 2)
		on(fmt.Sprintf("/hot/sub/f%d", i), 1, 2)
		on(fmt.Sprintf("/cold/f%d", i), 3, 4)
	}
	if err := proctest.WriteFile(ctx, c, "/none/f", []byte("x")); err == nil || !strings.Contains(err.Error(), `pool "empty"`) {
		t.Errorf("a file in a directory of an empty pool: %v, want an error naming the pool", err)
	}
	s.mustCLI("layout", "set", "/cold", "--stripe-count", "3")
	if err := proctest.WriteFile(ctx, c, "/cold/wide", []byte("x")); err == nil || !strings.Contains(err.Error(), `pool "slow"`) {
		t.Errorf("3 stripes in a pool of 2 targets: %v, want an error naming the pool", err)
	}

	// A target leaves a pool: its files stay, new files avoid it.
	s.mustCLI("pool", "remove", "fast", "2")
	put("/hot/after", 9)
	on("/hot/after", 1)
	// The pool cleared: files go anywhere again (the default 4 stripes).
	s.mustCLI("layout", "set", "/hot/sub", "--pool", "")
	put("/hot/sub/all", 10)
	on("/hot/sub/all", 1, 2, 3, 4)
	// A deleted pool: creating fails with a clear error, nothing is lost.
	s.mustCLI("pool", "remove", "slow")
	if err := proctest.WriteFile(ctx, c, "/cold/gone", []byte("x")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a file in a directory of a deleted pool: %v", err)
	}

	check := func(c *client.Client) {
		t.Helper()
		for p, want := range sums {
			got, err := readFile(c, p)
			if err != nil {
				t.Fatalf("read %s: %v", p, err)
			}
			if sha256.Sum256(got) != want {
				t.Fatalf("%s: SHA-256 differs from what was written", p)
			}
		}
	}
	check(c)

	s.stop()
	s = startServer(t, dir)
	c = s.client()
	check(c)
	if got := s.mustCLI("layout", "get", "/hot"); !strings.Contains(got, "pool=fast") {
		t.Errorf("after restart, layout get /hot: %q", got)
	}
	if got := s.mustCLI("layout", "get", "/hot/sub"); strings.Contains(got, "pool=") {
		t.Errorf("after restart, layout get /hot/sub: %q (pool cleared before)", got)
	}
	ls = s.mustCLI("pool", "ls")
	if !strings.Contains(ls, "fast") || strings.Contains(ls, "slow") {
		t.Errorf("after restart, pool ls:\n%s", ls)
	}
	put("/hot/restarted", 11)
	on("/hot/restarted", 1)
	check(c)
}
