package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/dashboard"
)

// TestRebalance fills target 1 of a real `sluice serve` (files made in a
// pool of that target alone, whose directory then leaves the pool) and
// runs `sluice rebalance`: a dry run changes nothing; the run spreads the
// files over the four targets (each holds a share near the mean), files
// still in a pool stay, and every file reads back as written.
func TestRebalance(t *testing.T) {
	s := startServer(t, "")
	c := s.client()
	ctx := context.Background()
	s.mustCLI("pool", "create", "one", "1")
	s.mustCLI("mkdir", "/hot", "/kept")
	s.mustCLI("layout", "set", "/hot", "--pool", "one", "--stripe-count", "1")
	s.mustCLI("layout", "set", "/kept", "--pool", "one", "--stripe-count", "1")
	want := map[string][]byte{}
	for i := range 12 {
		p := fmt.Sprintf("/hot/f%d", i)
		want[p] = randBytes(uint64(80+i), 2<<20)
		writeFile(t, c, p, want[p])
	}
	for i := range 2 {
		p := fmt.Sprintf("/kept/f%d", i)
		want[p] = randBytes(uint64(90+i), 2<<20)
		writeFile(t, c, p, want[p])
	}
	s.mustCLI("layout", "set", "/hot", "--pool", "")
	perTarget := func() map[uint32]int {
		n := map[uint32]int{}
		for p := range want {
			l, err := c.GetLayout(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range l.Chains {
				n[ch]++
			}
		}
		return n
	}
	if n := perTarget(); n[1] != 14 {
		t.Fatalf("before: files per target %v, want all 14 on target 1", n)
	}
	// The band in percentage points of the (shared, large) disk: tiny.
	band := "0.000001"
	dry := s.mustCLI("rebalance", "--dry-run", "--band", band)
	if !strings.Contains(dry, "chunk moves") || !strings.Contains(dry, "target 1 ->") {
		t.Fatalf("dry run prints no plan:\n%s", dry)
	}
	if n := perTarget(); n[1] != 14 {
		t.Fatalf("a dry run moved files: %v", n)
	}
	out := s.mustCLI("rebalance", "--band", band, "--rate", "0")
	t.Logf("sluice rebalance:\n%s", out)
	n := perTarget()
	for id := uint32(1); id <= 4; id++ {
		if n[id] < 2 || n[id] > 5 {
			t.Errorf("after: target %d holds %d files, want 2-5 (3.5 on average): %v", id, n[id], n)
		}
	}
	for p, data := range want {
		l, err := c.GetLayout(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(p, "/kept/") && !slices.Equal(l.Chains, []uint32{1}) {
			t.Errorf("%s left its pool: %+v", p, l)
		}
		if got, err := readFile(s.client(), p); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s after the rebalance: %v (or the bytes differ)", p, err)
		}
	}
	// Balanced now: a second run plans nothing.
	if again := s.mustCLI("rebalance", "--dry-run", "--band", "0.0001"); !strings.Contains(again, "plan: 0 chunk moves") {
		t.Errorf("a second run still plans moves:\n%s", again)
	}
	s.failCLI("band", "rebalance", "--band", "0")
}

// TestServeRebalance runs the rebalancer inside `sluice serve`
// (--rebalance-every): files made on one target spread over the others by
// themselves, and its progress is in the metrics.
func TestServeRebalance(t *testing.T) {
	s := startServer(t, "", "--http", "127.0.0.1:0", "--rebalance-every", "300ms", "--rebalance-band", "0.000001", "--rebalance-rate", "0")
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := s.client()
	ctx := context.Background()
	s.mustCLI("pool", "create", "one", "1")
	s.mustCLI("mkdir", "/hot")
	s.mustCLI("layout", "set", "/hot", "--pool", "one", "--stripe-count", "1")
	want := map[string][]byte{}
	for i := range 8 {
		p := fmt.Sprintf("/hot/f%d", i)
		want[p] = randBytes(uint64(70+i), 1<<20)
		writeFile(t, c, p, want[p])
	}
	s.mustCLI("layout", "set", "/hot", "--pool", "")
	deadline := time.Now().Add(60 * time.Second)
	for {
		on1 := 0
		for p := range want {
			if l, err := c.GetLayout(ctx, p); err == nil && slices.Equal(l.Chains, []uint32{1}) {
				on1++
			}
		}
		if on1 <= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 8 files still on target 1 after 60 s of --rebalance-every", on1)
		}
		time.Sleep(300 * time.Millisecond)
	}
	for p, data := range want {
		if got, err := readFile(s.client(), p); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s after the rebalancer: %v (or the bytes differ)", p, err)
		}
	}
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`(?m)^sluice_rebalance_moved_files_total (\d+)`).FindSubmatch(body)
	if m == nil || string(m[1]) == "0" {
		t.Errorf("metrics show no moved files: %q", m)
	}
	if !strings.Contains(string(body), "sluice_rebalance_last_spread_ratio") {
		t.Error("no sluice_rebalance_last_spread_ratio in the metrics")
	}
	// The dashboard's snapshot (what its page draws) has it too.
	snap, err := dashboard.Fetch(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Rebalancer == nil || snap.Rebalancer.Files < 1 || snap.Rebalancer.Bytes < 1<<20 || snap.Rebalancer.Passes < 1 {
		t.Errorf("dashboard snapshot rebalancer: %+v", snap.Rebalancer)
	}
}
