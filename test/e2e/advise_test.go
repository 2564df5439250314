package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-fs/sluice/internal/advise"
	"github.com/sluice-fs/sluice/internal/cli"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestAdvise calibrates a model on a real sluice serve (small cells),
// records a job reading large files sequentially, and checks the advice:
// printed with its reason and figures from the model, a --check replay
// that measures both layouts, and --apply, given a model in which stripe
// count 2 is twice as fast, setting the directory's layout and migrating
// its files (their bytes unchanged). Bad input gets clear errors.
func TestAdvise(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	ctx := context.Background()
	setup := s.client()
	tmp := t.TempDir()

	modelFile := filepath.Join(tmp, "model.json")
	out := s.mustCLI("advise", "calibrate", "--out", modelFile, "--size", "2MiB", "--cell-time", "50ms", "-q")
	if !strings.Contains(out, "written to") {
		t.Errorf("calibrate: %q", out)
	}
	m := readModel(t, modelFile)
	// 4 targets: stripe counts 1, 2, 4 by stripe sizes 1 and 4 MiB; 20
	// cells each, and 12 of sequential reads with read-ahead off and 64 MiB.
	if len(m.Cells) != 6*32 || m.Targets != 4 || m.Date == "" || !strings.Contains(m.Command, "calibrate") {
		t.Errorf("model: %d cells, %d targets, %q, %q", len(m.Cells), m.Targets, m.Date, m.Command)
	}
	for _, c := range m.Cells {
		if c.MBps <= 0 {
			t.Errorf("cell %+v measured nothing", c)
		}
	}
	if l := s.mustCLI("ls", "/"); strings.Contains(l, "calibrate") {
		t.Errorf("the calibration left its files: %s", l)
	}

	// The workload: 2 files of 8 MiB with stripe count 4, read whole in
	// 1 MiB requests by 2 streams, twice.
	s.mustCLI("mkdir", "/ds")
	s.mustCLI("layout", "set", "/ds", "--stripe-count", "4")
	sums := map[string][32]byte{}
	for i := range 2 {
		data := randBytes(uint64(i), 8<<20)
		p := fmt.Sprintf("/ds/f%d", i)
		if err := proctest.WriteFile(ctx, setup, p, data); err != nil {
			t.Fatal(err)
		}
		sums[p] = sha256.Sum256(data)
	}
	recordReads(t, s, "adv", "a1", "/ds", slices.Collect(maps.Keys(sums)), 2)

	var res cli.AdviseResult
	if err := json.Unmarshal([]byte(s.mustCLI("advise", "a1", "--model", modelFile, "--check", "--check-bytes", "16MiB", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	w := res.Workload
	if w.Op != "read" || w.Pattern != "seq" || w.ReqSize != 1<<20 || w.FileSpan != 8<<20 || res.Layout.StripeCount != 4 || res.Layout.StripeSize != 1<<20 || res.Dir != "/ds" {
		t.Errorf("workload %+v on %+v in %s", w, res.Layout, res.Dir)
	}
	if len(res.Advice) != 5 || res.Advice[4].Setting != "writeback-cache" || res.Advice[4].Change() || res.Advice[0].Setting != "layout" || res.Advice[0].Reason == "" || res.Advice[1].Setting != "client-read-ahead" || res.Advice[2].To != "training" || res.Advice[3].Setting != "name-cache" || res.Advice[3].Change() {
		t.Fatalf("advice %+v", res.Advice)
	}
	chk := res.Check
	if chk == nil || chk.FromMBps <= 0 || chk.ToMBps <= 0 || chk.Bytes != 16<<20 || chk.From.Layout != res.Layout || chk.To == chk.From {
		t.Errorf("check %+v: want two configurations measured over 16 MiB", chk)
	}
	if l := s.mustCLI("ls", "/"); strings.Contains(l, "advise-check") {
		t.Errorf("the check left its copies: %s", l)
	}

	// A model in which stripe count 2 is twice as fast as 1 and 4.
	forcedFile := forcedModel(t, m, tmp, func(c advise.Cell) float64 {
		if c.StripeCount == 2 {
			return 200
		}
		return 100
	})
	text := s.mustCLI("advise", "a1", "--model", forcedFile, "--apply")
	if !strings.Contains(text, "layout: 4 x 1MiB -> 2 x 1MiB, predicted 2.00x") || !strings.Contains(text, "applied") {
		t.Errorf("advise --apply:\n%s", text)
	}
	for p, sum := range sums {
		l, err := setup.GetLayout(ctx, p)
		if err != nil || l.StripeCount != 2 || l.Data == 0 {
			t.Errorf("%s after --apply: %+v, %v; want stripe count 2, migrated", p, l, err)
		}
		if b, err := readFile(setup, p); err != nil || sha256.Sum256(b) != sum {
			t.Errorf("%s changed by the migration (%v)", p, err)
		}
	}
	if l, err := setup.GetLayout(ctx, "/ds"); err != nil || l.StripeCount != 2 {
		t.Errorf("/ds after --apply: %+v, %v", l, err)
	}
	// Applied: nothing more to advise.
	if text := s.mustCLI("advise", "a1", "--model", forcedFile, "--apply"); !strings.Contains(text, "keep 2 x 1MiB") || strings.Contains(text, "applied") {
		t.Errorf("advise --apply a second time:\n%s", text)
	}

	s.failCLI("no recording", "advise", "nope")
	s.failCLI("--dir", "advise", "a1", "--model", forcedFile, "--apply", "--dir", "/")
	bad := filepath.Join(tmp, "bad.json")
	os.WriteFile(bad, []byte("{"), 0o644)
	s.failCLI("model", "advise", "a1", "--model", bad)
	s.failCLI("--out", "advise", "calibrate")
}

// TestAdvisePools calibrates two pools of a real sluice serve (targets 1-2
// and 3-4), records a job reading files in a directory of the first, and
// checks that, given a model in which the second pool is three times as
// fast, the advice is to move the files there: --apply sets the
// directory's pool and migrates its files onto the second pool's targets
// (their bytes unchanged), and --check replays the job on copies in both
// pools.
func TestAdvisePools(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	ctx := context.Background()
	setup := s.client()
	tmp := t.TempDir()
	twoPools(t, s, "a", "b")

	modelFile := filepath.Join(tmp, "model.json")
	s.mustCLI("advise", "calibrate", "--out", modelFile, "--size", "2MiB", "--cell-time", "50ms", "-q", "--runs", "1", "--pool", "a", "--pool", "b")
	m := readModel(t, modelFile)
	// Each pool: stripe counts 1 and 2 by stripe sizes 1 and 4 MiB, 32
	// cells each.
	perPool := map[string]int{}
	for _, c := range m.Cells {
		perPool[c.Pool]++
		if c.StripeCount > 2 || c.MBps <= 0 {
			t.Errorf("cell %+v: want at most the pool's 2 targets, measured", c)
		}
	}
	if len(perPool) != 2 || perPool["a"] != 4*32 || perPool["b"] != 4*32 {
		t.Errorf("cells per pool: %v; want 128 in each of a and b", perPool)
	}
	s.failCLI("no such pool", "advise", "calibrate", "--out", filepath.Join(tmp, "x.json"), "--pool", "nope")

	s.mustCLI("mkdir", "/ds")
	s.mustCLI("layout", "set", "/ds", "--stripe-count", "2", "--pool", "a")
	sums := map[string][32]byte{}
	for i := range 2 {
		data := randBytes(uint64(10+i), 8<<20)
		p := fmt.Sprintf("/ds/f%d", i)
		if err := proctest.WriteFile(ctx, setup, p, data); err != nil {
			t.Fatal(err)
		}
		sums[p] = sha256.Sum256(data)
	}
	recordReads(t, s, "advp", "p1", "/ds", slices.Collect(maps.Keys(sums)), 1)

	// Pool b three times as fast as pool a, whatever the stripe count.
	forcedFile := forcedModel(t, m, tmp, func(c advise.Cell) float64 {
		if c.Pool == "b" {
			return 300
		}
		return 100
	})
	var res cli.AdviseResult
	if err := json.Unmarshal([]byte(s.mustCLI("advise", "p1", "--model", forcedFile, "--check", "--check-bytes", "8MiB", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Layout.Pool != "a" || !res.Advice[0].Change() || res.Advice[0].Layout.Pool != "b" || res.Advice[0].Predicted != 3 {
		t.Errorf("advice on %+v: %+v; want a move from pool a to pool b, predicted 3x", res.Layout, res.Advice[0])
	}
	if chk := res.Check; chk == nil || chk.From.Layout.Pool != "a" || chk.To.Layout.Pool != "b" || chk.FromMBps <= 0 || chk.ToMBps <= 0 {
		t.Errorf("check %+v: want both pools measured", chk)
	}
	text := s.mustCLI("advise", "p1", "--model", forcedFile, "--apply")
	if !strings.Contains(text, "in pool b, predicted 3.00x") || !strings.Contains(text, "applied") {
		t.Errorf("advise --apply:\n%s", text)
	}
	if l, err := setup.GetLayout(ctx, "/ds"); err != nil || l.Pool != "b" {
		t.Errorf("/ds after --apply: %+v, %v; want pool b", l, err)
	}
	for p, sum := range sums {
		l, err := setup.GetLayout(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range l.Chains {
			if ch != 3 && ch != 4 {
				t.Errorf("%s after --apply is on chains %v; want targets 3 and 4 only", p, l.Chains)
				break
			}
		}
		if b, err := readFile(setup, p); err != nil || sha256.Sum256(b) != sum {
			t.Errorf("%s changed by the migration (%v)", p, err)
		}
	}
}

// TestAdviseSplit checks the progressive advice on a real sluice serve
// whose targets 3 and 4 (pool b) are small tmpfs mounts: given a model in
// which pool b is three times as fast as pool a, where a job's files are,
// and with room in pool b for the first 4 MiB of each file but not for
// them all, the advice is a progressive layout with each file's head in
// pool b; --apply migrates the files to it (heads on targets 3-4, the
// rest on 1-2; bytes unchanged).
func TestAdviseSplit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := tmpfsTargets(t, "28m")
	s := startServer(t, dir)
	setup := s.client()
	twoPools(t, s, "a", "b")
	s.mustCLI("mkdir", "/ds")
	s.mustCLI("layout", "set", "/ds", "--stripe-count", "2", "--pool", "a")
	// 8 files of 4 MiB and 2 of 16 MiB: 64 MiB, 40 MiB of it in the
	// first 4 MiB of each; pool b holds 56 MiB.
	sums := map[string][32]byte{}
	for i := range 10 {
		size := 4 << 20
		if i >= 8 {
			size = 16 << 20
		}
		data := randBytes(uint64(20+i), size)
		p := fmt.Sprintf("/ds/f%d", i)
		if err := proctest.WriteFile(ctx, setup, p, data); err != nil {
			t.Fatal(err)
		}
		sums[p] = sha256.Sum256(data)
	}
	recordReads(t, s, "advs", "s1", "/ds", slices.Collect(maps.Keys(sums)), 1)
	// The model: pool b three times as fast as pool a.
	m := advise.Model{Machine: "test", Targets: 4, StripeSize: 1 << 20, Noise: 0.1}
	for _, pool := range []string{"a", "b"} {
		for _, sc := range []int{1, 2} {
			for _, op := range []string{"read", "write"} {
				for _, pat := range []string{"seq", "random"} {
					for _, req := range []int64{64 << 10, 1 << 20, 4 << 20} {
						for _, st := range []int{1, 4} {
							mb := 100.0
							if pool == "b" {
								mb = 300
							}
							m.Cells = append(m.Cells, advise.Cell{Op: op, Pattern: pat, ReqSize: req, Streams: st, StripeCount: sc, Pool: pool, MBps: mb})
						}
					}
				}
			}
		}
	}
	mb, _ := json.Marshal(&m)
	model := filepath.Join(t.TempDir(), "model.json")
	if err := os.WriteFile(model, mb, 0o644); err != nil {
		t.Fatal(err)
	}
	text := s.mustCLI("advise", "s1", "--model", model, "--apply")
	if !strings.Contains(text, "first 4MiB of each file: 2 x 1MiB in pool b; the rest: 2 x 1MiB in pool a") || !strings.Contains(text, "no room for them all") || !strings.Contains(text, "applied") {
		t.Fatalf("advise --apply:\n%s", text)
	}
	for p, sum := range sums {
		l, err := setup.GetLayout(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Components) != 2 || l.Components[0].End != 4<<20 || l.Components[0].Pool != "b" {
			t.Errorf("%s after --apply: %+v; want a head of 4 MiB in pool b", p, l)
		}
		// The head's chains on targets 3-4, the rest's on 1-2.
		head := l.Components[0].StripeCount
		for i, ch := range l.Chains {
			if onB := ch == 3 || ch == 4; onB != (i < head) {
				t.Errorf("%s: chain %d of %v: want the first %d on pool b, the rest on pool a", p, i, l.Chains, head)
				break
			}
		}
		if b, err := readFile(setup, p); err != nil || sha256.Sum256(b) != sum {
			t.Errorf("%s changed by the migration (%v)", p, err)
		}
	}
}

// recordReads records (sluice profile record) job's reads of the files at
// paths under dir, each read whole in 1 MiB requests, rounds times, by a
// client of the job, as recording name.
func recordReads(t *testing.T, s *server, job, name, dir string, paths []string, rounds int) {
	t.Helper()
	ctx := context.Background()
	s.mustCLI("profile", "record", "--job", job, "--name", name, "--dir", dir, "--duration", "1h", "--detach")
	c := jobClient(t, s.addr, job)
	waitClients(t, s.client(), name, 1)
	buf := make([]byte, 1<<20)
	for range rounds {
		for _, p := range paths {
			f, err := c.Open(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			for off := int64(0); ; off += 1 << 20 {
				if _, err := f.ReadAt(buf, off); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
		}
	}
	s.mustCLI("profile", "stop", name)
	c.Close()
}

// TestAdviseNames: a program that looks its files up by path again and
// again (stats before each read, every epoch) gets the name-cache advice
// to open them once, with a predicted gain from the time its repeated
// lookups took in the recording; one that reads each file once does not.
func TestAdviseNames(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	ctx := context.Background()
	setup := s.client()
	s.mustCLI("mkdir", "/names")
	var paths []string
	for i := range 50 {
		p := fmt.Sprintf("/names/f%02d", i)
		if err := proctest.WriteFile(ctx, setup, p, randBytes(uint64(i), 4096)); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	advice := func(name string, epochs, stats int) (advise.Workload, advise.Advice) {
		t.Helper()
		s.mustCLI("profile", "record", "--job", "names-"+name, "--name", name, "--dir", "/names", "--duration", "1h", "--detach")
		c := jobClient(t, s.addr, "names-"+name)
		waitClients(t, setup, name, 1)
		buf := make([]byte, 8192)
		for range epochs {
			for _, p := range paths {
				for range stats {
					if _, err := c.Stat(ctx, p); err != nil {
						t.Fatal(err)
					}
				}
				f, err := c.Open(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				if n, err := f.ReadAt(buf, 0); n != 4096 || (err != nil && err != io.EOF) {
					t.Fatalf("read %s: %d bytes, %v", p, n, err)
				}
				f.Close()
			}
		}
		s.mustCLI("profile", "stop", name)
		c.Close()
		var res cli.AdviseResult
		if err := json.Unmarshal([]byte(s.mustCLI("advise", name, "--json")), &res); err != nil {
			t.Fatal(err)
		}
		for _, a := range res.Advice {
			if a.Setting == "name-cache" {
				return res.Workload, a
			}
		}
		t.Fatalf("%s: no name-cache advice in %+v", name, res.Advice)
		return advise.Workload{}, advise.Advice{}
	}

	w, a := advice("n1", 4, 3)
	if w.Via != "library" || w.Repeats < 50*(4*3-1) {
		t.Errorf("workload: via %q, %d repeated lookups and stats; want the library's, at least %d", w.Via, w.Repeats, 50*(4*3-1))
	}
	if a.To != "open each file once" || a.Predicted <= 1 || !strings.Contains(a.Reason, "asked again") {
		t.Errorf("name-cache advice for repeated stats: %+v", a)
	}
	// Each file looked up once: nothing repeats.
	if w, a := advice("n2", 1, 0); w.Repeats != 0 || a.Change() {
		t.Errorf("name-cache advice for a single pass: %d repeats, %+v", w.Repeats, a)
	}
}

// forcedModel writes, in dir, model m with every cell's throughput set by
// mbps and a noise of 5%: a model that makes the advice predictable, for
// the tests of what the commands do with it. It returns the file's path.
func forcedModel(t *testing.T, m advise.Model, dir string, mbps func(advise.Cell) float64) string {
	t.Helper()
	m.Noise = 0.05
	cells := make([]advise.Cell, len(m.Cells))
	for i, c := range m.Cells {
		c.MBps = mbps(c)
		cells[i] = c
	}
	m.Cells = cells
	b, err := json.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "forced.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// readModel reads an advisor model written by advise calibrate.
func readModel(t *testing.T, path string) advise.Model {
	t.Helper()
	var m advise.Model
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// twoPools makes pool a of targets 1 and 2 and pool b of targets 3 and 4
// (the tmpfs ones of tmpfsTargets).
func twoPools(tb testing.TB, s *server, a, b string) {
	tb.Helper()
	s.mustCLI("pool", "create", a, "1", "2")
	s.mustCLI("pool", "create", b, "3", "4")
}
