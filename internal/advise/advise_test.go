package advise

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/profile"
)

// grid builds a model whose throughput is f(op, pattern, req, streams,
// stripe count) over the calibration's grid (one stripe size).
func grid(noise float64, f func(op, pat string, req int64, streams, sc int) float64) *Model {
	m := &Model{Targets: 4, StripeSize: 1 << 20, Noise: noise}
	for _, sc := range []int{1, 2, 4} {
		for _, op := range []string{"read", "write"} {
			for _, pat := range []string{"seq", "random"} {
				for _, req := range []int64{4 << 10, 64 << 10, 1 << 20, 4 << 20} {
					for _, st := range []int{1, 4} {
						m.Cells = append(m.Cells, Cell{Op: op, Pattern: pat, ReqSize: req, Streams: st, StripeCount: sc, MBps: f(op, pat, req, st, sc)})
					}
				}
			}
		}
	}
	return m
}

func TestPredictInterpolates(t *testing.T) {
	// Throughput proportional to log2(req) and to streams.
	m := grid(0.05, func(_, _ string, req int64, st, sc int) float64 {
		return math.Log2(float64(req)) * float64(st) * float64(sc)
	})
	for _, c := range []struct {
		req     int64
		streams float64
		sc      int
		want    float64
	}{
		{64 << 10, 1, 1, 16},
		{256 << 10, 1, 1, 18},        // between 64 KiB (16) and 1 MiB (20): halfway on a log scale
		{1 << 30, 1, 2, 2 * 22},      // clamped at 4 MiB
		{1 << 10, 4, 1, 4 * 12},      // clamped at 4 KiB
		{1 << 20, 2, 1, 20 + 0.5*60}, // streams 2: halfway between 1 and 4 on a log scale
		{1 << 20, 16, 4, 4 * 20 * 4}, // clamped at 4 streams
	} {
		got, ok := m.Predict(Workload{Op: "read", Pattern: "seq", ReqSize: c.req, Streams: c.streams}, Layout{StripeCount: c.sc})
		if !ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Predict(req %d, streams %v, sc %d) = %v, %v; want %v", c.req, c.streams, c.sc, got, ok, c.want)
		}
	}
	if _, ok := m.Predict(Workload{Op: "read", Pattern: "seq", ReqSize: 1 << 20, Streams: 1}, Layout{StripeCount: 3}); ok {
		t.Error("a stripe count the model did not measure was predicted")
	}
	if _, ok := m.Predict(Workload{Op: "read", Pattern: "seq", ReqSize: 1 << 20, Streams: 1}, Layout{StripeCount: 2, StripeSize: 4 << 20}); ok {
		t.Error("a stripe size the model did not measure was predicted")
	}
}

func TestAdviseStripeCount(t *testing.T) {
	// Sequential reads scale with the stripe count up to 2 and no further;
	// random reads do not scale.
	m := grid(0.10, func(op, pat string, req int64, st, sc int) float64 {
		if pat == "random" {
			return 50
		}
		return 100 * float64(min(sc, 2))
	})
	seq := Workload{Op: "read", Pattern: "seq", ReqSize: 1 << 20, Streams: 1, FileSpan: 1 << 30}
	cases := []struct {
		name   string
		w      Workload
		cur    Layout
		f      Facts
		to     string
		reason string
	}{
		{"scales: the smallest best count", seq, Layout{StripeCount: 1}, Facts{Targets: 4}, "2 x 1MiB", "predicted at 200 MB/s"},
		{"already best", seq, Layout{StripeCount: 2}, Facts{Targets: 4}, "", "no change"},
		{"one target only", seq, Layout{StripeCount: 1}, Facts{Targets: 1}, "", "no change"},
		{"random does not scale", Workload{Op: "read", Pattern: "random", ReqSize: 4096, Streams: 4, FileSpan: 1 << 30}, Layout{StripeCount: 1}, Facts{Targets: 4}, "", "within the model's noise"},
		{"small files", Workload{Op: "read", Pattern: "seq", ReqSize: 150 << 10, Streams: 8, FileSpan: 150 << 10}, Layout{StripeCount: 1}, Facts{Targets: 4}, "", "one stripe"},
		{"a file of two stripes", Workload{Op: "read", Pattern: "seq", ReqSize: 1 << 20, Streams: 1, FileSpan: 2 << 20}, Layout{StripeCount: 1}, Facts{Targets: 4}, "2 x 1MiB", ""},
		{"unmeasured current layout", seq, Layout{StripeCount: 3}, Facts{Targets: 4}, "", "no measurement"},
		{"no data", Workload{}, Layout{StripeCount: 1}, Facts{Targets: 4}, "", "no reads or writes"},
	}
	for _, c := range cases {
		a := Advise(c.w, c.cur, c.f, m)
		if len(a) != 5 || a[0].Setting != "layout" || a[4].Setting != "writeback-cache" {
			t.Fatalf("%s: advice %+v", c.name, a)
		}
		s := a[0]
		if s.To != c.to || !strings.Contains(s.Reason, c.reason) {
			t.Errorf("%s: to %q (%s); want %q and a reason with %q", c.name, s.To, s.Reason, c.to, c.reason)
		}
		if s.Change() && (s.Predicted <= 1+m.Noise || s.ToMBps <= s.FromMBps || s.Layout == nil || s.Layout.String() != s.To) {
			t.Errorf("%s: a change predicted at %v (%v -> %v MB/s) to %+v", c.name, s.Predicted, s.FromMBps, s.ToMBps, s.Layout)
		}
	}
	// A gain inside the noise is no advice.
	noisy := grid(0.5, func(_, pat string, _ int64, _, sc int) float64 { return 100 + 20*float64(sc) })
	if a := Advise(seq, Layout{StripeCount: 1}, Facts{Targets: 4}, noisy); a[0].Change() {
		t.Errorf("a 1.33x gain advised under 50%% noise: %+v", a[0])
	}
}

func TestAdviseClass(t *testing.T) {
	for _, c := range []struct {
		w    Workload
		want string
	}{
		{Workload{Op: "write", Pattern: "seq", ReqSize: 8 << 20}, "checkpoint"},
		{Workload{Op: "read", Pattern: "random", ReqSize: 4096, Streams: 1}, "interactive"},
		{Workload{Op: "read", Pattern: "random", ReqSize: 4096, Streams: 32}, "training"},
		{Workload{Op: "read", Pattern: "seq", ReqSize: 150 << 10}, "training"},
		{Workload{Op: "write", Pattern: "random", ReqSize: 4096}, "training"},
	} {
		if got := adviseClass(c.w); got.To != c.want || got.Reason == "" {
			t.Errorf("%+v: class %q, want %q", c.w, got.To, c.want)
		}
	}
}

func TestWorkloadOf(t *testing.T) {
	r := profile.Report{
		Kind:         "sequential write",
		Read:         profile.IOStats{Bytes: 10, SizeP50: 4096, Sequential: 0},
		Write:        profile.IOStats{Bytes: 100, SizeP50: 1 << 20, Sequential: 0.9},
		DataInFlight: 3.5, FileSpanP50: 1 << 30,
	}
	w := WorkloadOf(&r)
	if want := (Workload{Op: "write", Pattern: "seq", ReqSize: 1 << 20, Streams: 3.5, FileSpan: 1 << 30, Kind: "sequential write", Via: "library"}); !reflect.DeepEqual(w, want) {
		t.Errorf("workload %+v", w)
	}
	r.Write.Bytes, r.DataInFlight = 1, 0
	if w := WorkloadOf(&r); w.Op != "read" || w.Pattern != "random" || w.Streams != 1 {
		t.Errorf("workload %+v", w)
	}
}

func TestNoiseAndAverage(t *testing.T) {
	a := []Cell{{MBps: 100}, {MBps: 100}, {MBps: 100}}
	b := []Cell{{MBps: 100}, {MBps: 110}, {MBps: 300}}
	// Differences 0, 10/105 and 1: the 90th percentile (the lower of the
	// two around it) is 10/105.
	if got := MeasuredNoise(a, b); math.Abs(got-10.0/105) > 1e-9 {
		t.Errorf("noise %v", got)
	}
	avg := Average(a, b)
	if avg[2].MBps != 200 || a[2].MBps != 100 {
		t.Errorf("average %+v (input changed: %+v)", avg, a)
	}
}

// TestAdviseStripeSizeAndReadAhead: a model measured at two stripe sizes
// and three read-aheads: the advised layout may change the size alone, and
// a sequential reader gets the read-ahead the model ranks best.
func TestAdviseStripeSizeAndReadAhead(t *testing.T) {
	m := &Model{Targets: 4, StripeSize: 1 << 20, Noise: 0.1}
	for _, sc := range []int{1, 2} {
		for _, ss := range []int64{1 << 20, 4 << 20} {
			for _, ra := range []int64{0, -1, 64 << 20} {
				for _, req := range []int64{64 << 10, 4 << 20} {
					mb := 100.0
					if ss == 4<<20 {
						mb = 150 // bigger stripes, whatever the count
					}
					switch ra {
					case -1:
						mb /= 2
					case 64 << 20:
						mb *= 1.5
					}
					m.Cells = append(m.Cells, Cell{Op: "read", Pattern: "seq", ReqSize: req, Streams: 1, StripeCount: sc, StripeSize: ss, ReadAhead: ra, MBps: mb})
				}
			}
		}
	}
	if got := m.Layouts(); len(got) != 4 || got[1] != (Layout{StripeCount: 1, StripeSize: 4 << 20}) {
		t.Errorf("layouts %v", got)
	}
	w := Workload{Op: "read", Pattern: "seq", ReqSize: 1 << 20, Streams: 1, FileSpan: 1 << 30}
	a := Advise(w, Layout{StripeCount: 1, StripeSize: 1 << 20, Pool: "nvme"}, Facts{Targets: 4}, m)
	if a[0].Layout == nil || *a[0].Layout != (Layout{StripeCount: 1, StripeSize: 4 << 20, Pool: "nvme"}) || a[0].Predicted != 1.5 {
		t.Errorf("layout advice %+v (%+v)", a[0], a[0].Layout)
	}
	if a[1].Setting != "client-read-ahead" || a[1].ReadAhead != 64<<20 || a[1].To != "64MiB" || a[1].Predicted != 1.5 {
		t.Errorf("read-ahead advice %+v", a[1])
	}
	// Random readers: read-ahead does not start; no change.
	if a := Advise(Workload{Op: "read", Pattern: "random", ReqSize: 4096, Streams: 1, FileSpan: 1 << 30}, Layout{StripeCount: 1}, Facts{Targets: 4}, m); a[1].Change() {
		t.Errorf("read-ahead advised for random reads: %+v", a[1])
	}
}

// pooledGrid is grid measured on two pools, "slow" and "fast", whose
// throughput is f's times 1 and speedup.
func pooledGrid(noise, speedup float64, f func(op, pat string, req int64, streams, sc int) float64) *Model {
	base := grid(noise, f)
	m := &Model{Targets: base.Targets, StripeSize: base.StripeSize, Noise: noise}
	for _, p := range []struct {
		name string
		x    float64
	}{{"slow", 1}, {"fast", speedup}} {
		for _, c := range base.Cells {
			c.Pool, c.MBps = p.name, c.MBps*p.x
			m.Cells = append(m.Cells, c)
		}
	}
	return m
}

// TestAdvisePool checks pool advice: a model that measured two pools
// advises moving files to the faster one when the gain beats the noise,
// the pool exists with enough targets and room for the files; small files
// (one target each) keep their stripe count; a model without pools never
// advises a pool.
func TestAdvisePool(t *testing.T) {
	flat := func(_, _ string, _ int64, _, _ int) float64 { return 100 }
	seq := Workload{Op: "write", Pattern: "seq", ReqSize: 4 << 20, Streams: 4, FileSpan: 1 << 30}
	small := Workload{Op: "read", Pattern: "random", ReqSize: 64 << 10, Streams: 4, FileSpan: 150 << 10}
	pools := map[string]PoolFacts{"slow": {Targets: 4, Free: 1 << 40}, "fast": {Targets: 2, Free: 10 << 30}}
	cases := []struct {
		name   string
		m      *Model
		w      Workload
		cur    Layout
		f      Facts
		to     string
		reason string
	}{
		{"the faster pool", pooledGrid(0.1, 3, flat), seq, Layout{StripeCount: 1, Pool: "slow"},
			Facts{Targets: 4, Pools: pools, Bytes: 1 << 30}, "1 x 1MiB in pool fast", "predicted at 300 MB/s"},
		{"gain within the noise", pooledGrid(0.3, 1.2, flat), seq, Layout{StripeCount: 1, Pool: "slow"},
			Facts{Targets: 4, Pools: pools, Bytes: 1 << 30}, "", "within the model's noise"},
		{"no room in the faster pool", pooledGrid(0.1, 3, flat), seq, Layout{StripeCount: 1, Pool: "slow"},
			Facts{Targets: 4, Pools: pools, Bytes: 20 << 30}, "", "no change"},
		{"the faster pool does not exist", pooledGrid(0.1, 3, flat), seq, Layout{StripeCount: 1, Pool: "slow"},
			Facts{Targets: 4, Pools: map[string]PoolFacts{"slow": pools["slow"]}, Bytes: 1 << 30}, "", "no change"},
		{"at most the faster pool's targets", pooledGrid(0.1, 3, func(_, _ string, _ int64, _, sc int) float64 { return 100 * float64(sc) }), seq, Layout{StripeCount: 4, Pool: "slow"},
			Facts{Targets: 4, Pools: pools, Bytes: 1 << 30}, "2 x 1MiB in pool fast", "predicted at 600 MB/s against 400 MB/s"},
		{"small files keep their stripe count", pooledGrid(0.1, 3, flat), small, Layout{StripeCount: 4, Pool: "slow"},
			Facts{Targets: 4, Pools: map[string]PoolFacts{"slow": pools["slow"], "fast": {Targets: 4, Free: 1 << 40}}, Bytes: 1 << 30}, "4 x 1MiB in pool fast", "each lives on one target"},
		{"small files, no pool with enough targets", pooledGrid(0.1, 3, flat), small, Layout{StripeCount: 4, Pool: "slow"},
			Facts{Targets: 4, Pools: pools, Bytes: 1 << 30}, "", "no change"},
		{"a model without pools advises none", grid(0.1, flat), small, Layout{StripeCount: 4, Pool: "slow"},
			Facts{Targets: 4, Pools: pools, Bytes: 1 << 30}, "", "so no change"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cur.StripeSize = 1 << 20
			a := adviseLayout(c.w, c.cur, c.f, c.m)
			if a.To != c.to || !strings.Contains(a.Reason, c.reason) {
				t.Errorf("advice: to %q (%s), want %q with %q", a.To, a.Reason, c.to, c.reason)
			}
			if c.to != "" && (a.Layout == nil || a.Layout.String() != c.to) {
				t.Errorf("advised layout %+v, want %s", a.Layout, c.to)
			}
		})
	}
}

// TestAdviseSplit checks the progressive advice: when the faster pool has
// no room for all the files but has room for the first bytes of each (up
// to the median file size), the heads go there and the rest stays, with a
// prediction that mixes the pools by bytes; not when the mix gains less
// than the noise, when even the heads do not fit, or when the whole files
// fit (then they move whole).
func TestAdviseSplit(t *testing.T) {
	const M = 1 << 20
	flat := func(_, _ string, _ int64, _, _ int) float64 { return 100 }
	w := Workload{Op: "read", Pattern: "seq", ReqSize: M, Streams: 4, FileSpan: 4 * M, FileSize: 4 * M}
	cur := Layout{StripeCount: 4, StripeSize: M, Pool: "slow"}
	// 8 files of 4 MiB and 2 of 16 MiB: 64 MiB, of which 40 in heads of 4 MiB.
	sizes := []int64{4 * M, 4 * M, 4 * M, 4 * M, 4 * M, 4 * M, 4 * M, 4 * M, 16 * M, 16 * M}
	facts := func(fastFree int64, sz []int64) Facts {
		var n int64
		for _, s := range sz {
			n += s
		}
		return Facts{Targets: 4, Pools: map[string]PoolFacts{"slow": {Targets: 4, Free: 1 << 40}, "fast": {Targets: 2, Free: fastFree}}, Bytes: n, Sizes: sz}
	}
	t.Run("heads in the faster pool", func(t *testing.T) {
		a := Advise(w, cur, facts(40*M, sizes), pooledGrid(0.1, 3, flat))[0]
		want := Layout{StripeCount: 4, StripeSize: M, Pool: "slow", HeadEnd: 4 * M, HeadPool: "fast", HeadStripeCount: 2}
		mix := 1 / (40.0/64/300 + 24.0/64/100)
		if a.Layout == nil || *a.Layout != want || math.Abs(a.Predicted-mix/100) > 1e-9 || !strings.Contains(a.Reason, "no room for them all") {
			t.Fatalf("advice %+v (%v); want %+v predicted %.3fx", a, a.Layout, want, mix/100)
		}
		if a.To != "first 4MiB of each file: 2 x 1MiB in pool fast; the rest: 4 x 1MiB in pool slow" {
			t.Errorf("To = %q", a.To)
		}
	})
	t.Run("the mix gains less than the noise", func(t *testing.T) {
		big := append(append([]int64{}, sizes...), 400*M)
		if a := Advise(w, cur, facts(44*M, big), pooledGrid(0.1, 3, flat))[0]; a.Change() {
			t.Errorf("advice %+v; want no change", a)
		}
	})
	t.Run("no room for the heads", func(t *testing.T) {
		if a := Advise(w, cur, facts(30*M, sizes), pooledGrid(0.1, 3, flat))[0]; a.Change() {
			t.Errorf("advice %+v; want no change", a)
		}
	})
	t.Run("room for everything: a whole move", func(t *testing.T) {
		a := Advise(w, cur, facts(1<<30, sizes), pooledGrid(0.1, 3, flat))[0]
		if a.Layout == nil || a.Layout.HeadEnd != 0 || a.Layout.Pool != "fast" {
			t.Errorf("advice %+v; want the files moved whole to pool fast", a)
		}
	})
	t.Run("a model without pools", func(t *testing.T) {
		if a := Advise(w, cur, facts(40*M, sizes), grid(0.1, flat))[0]; a.Change() {
			t.Errorf("advice %+v; want no change", a)
		}
	})
}

// gaps buckets repeats as profile.Summarize does: count and seconds per
// power of two seconds, from a bucket of up to 1 s.
func gaps(pairs ...float64) []profile.GapBucket {
	var out []profile.GapBucket
	for i := 0; i+1 < len(pairs); i += 2 {
		gap, secs := pairs[i], pairs[i+1]
		j := 0
		for max := 1.0; gap > max; max *= 2 {
			j++
		}
		for len(out) <= j {
			out = append(out, profile.GapBucket{MaxGap: int64(1e9) << len(out)})
		}
		out[j].Count++
		out[j].Seconds += secs
	}
	return out
}

func TestAdviseNames(t *testing.T) {
	for _, c := range []struct {
		name string
		w    Workload
		to   string  // "" for no change
		pred float64 // the predicted ratio of the time inside calls, when advised
	}{
		{"no repeats", Workload{Via: "library", WaitSeconds: 10}, "", 0},
		// A program that stats its files again and again: 4 of 10 s.
		{"library", Workload{Via: "library", WaitSeconds: 10, Repeats: 1000, RepeatSeconds: 4, RepeatGaps: gaps(0.1, 4), RepeatGapP90: 100 * time.Millisecond}, "open each file once", 10.0 / 6},
		{"library, within noise", Workload{Via: "library", WaitSeconds: 10, Repeats: 10, RepeatSeconds: 0.5, RepeatGaps: gaps(0.1, 0.5)}, "", 0},
		// A mount whose names come back a few minutes later (epochs):
		// 3 s of repeats 100 s after, 1 s of them 1,000 s after; p90 in
		// the 128 s bucket: advise 128 s, which keeps the first 3 s.
		{"mount, epochs", Workload{Via: "mount", WaitSeconds: 10, Repeats: 900, RepeatSeconds: 4, RepeatGaps: gaps(100, 3, 1000, 1), RepeatGapP90: 100 * time.Second}, "--watch-timeout 2m8s", 10.0 / 7},
		// Repeats within the kernel's timeout: changes dropped them.
		{"mount, within the timeout", Workload{Via: "mount", WaitSeconds: 10, Repeats: 900, RepeatSeconds: 4, RepeatGaps: gaps(5, 4), RepeatGapP90: 5 * time.Second}, "", 0},
		// Repeats beyond the bound only.
		{"mount, beyond the bound", Workload{Via: "mount", WaitSeconds: 10, Repeats: 900, RepeatSeconds: 4, RepeatGaps: gaps(5000, 4), RepeatGapP90: 5000 * time.Second}, "", 0},
	} {
		a := adviseNames(c.w, 0.26)
		if a.To != c.to || a.Reason == "" || a.From == "" {
			t.Errorf("%s: advice %q (%s), want %q", c.name, a.To, a.Reason, c.to)
			continue
		}
		if c.to != "" && math.Abs(a.Predicted-c.pred) > 1e-9 {
			t.Errorf("%s: predicted %.3f, want %.3f", c.name, a.Predicted, c.pred)
		}
	}
}

func TestAdviseNamesVia(t *testing.T) {
	w := Workload{WaitSeconds: 10, Repeats: 1000, RepeatSeconds: 4, RepeatGaps: gaps(0.1, 4), RepeatGapP90: 100 * time.Millisecond}
	for via, to := range map[string]string{"library": "open each file once", "s3": "", "mixed": ""} {
		w.Via = via
		if a := adviseNames(w, 0.26); a.To != to || a.Reason == "" {
			t.Errorf("via %s: advice %q (%s), want %q", via, a.To, a.Reason, to)
		}
	}
	r := profile.Report{Clients: 3, MountClients: 1, S3Clients: 2}
	for _, c := range []struct {
		mount, s3 int
		want      string
	}{{3, 0, "mount"}, {0, 3, "s3"}, {0, 0, "library"}, {1, 2, "mixed"}, {1, 0, "mixed"}} {
		r.MountClients, r.S3Clients = c.mount, c.s3
		if got := WorkloadOf(&r).Via; got != c.want {
			t.Errorf("%d clients of mounts and %d of the gateway of 3: via %q, want %q", c.mount, c.s3, got, c.want)
		}
	}
}

// mountModel has mount cells shaped like a calibration of the development
// VM: the write-back cache triples 4 KiB writes, gains little at 64 KiB
// and nothing at 1 MiB; 4 streams gain less than 1.
func mountModel(noise float64) *Model {
	m := &Model{MountNoise: noise}
	for _, c := range []struct {
		streams  int
		req      int64
		off, wbc float64
	}{
		{1, 4 << 10, 150, 450}, {1, 64 << 10, 430, 540}, {1, 1 << 20, 640, 620},
		{4, 4 << 10, 300, 600}, {4, 64 << 10, 700, 720}, {4, 1 << 20, 900, 880},
	} {
		m.MountCells = append(m.MountCells,
			Cell{Op: "write", Pattern: "seq", ReqSize: c.req, Streams: c.streams, MBps: c.off},
			Cell{Op: "write", Pattern: "seq", ReqSize: c.req, Streams: c.streams, WritebackCache: true, MBps: c.wbc})
	}
	return m
}

func TestAdviseWriteback(t *testing.T) {
	small := Workload{Op: "write", Pattern: "seq", ReqSize: 4 << 10, Streams: 1, Via: "mount"}
	with := func(f func(w *Workload)) Workload { w := small; f(&w); return w }
	for _, c := range []struct {
		name      string
		w         Workload
		m         *Model
		predicted float64 // 0: no change advised
		reason    string
	}{
		{"4 KiB writes, 1 stream", small, mountModel(0.1), 3, "write-back cache"},
		{"4 KiB writes, 3 streams (the 4-stream cells)", with(func(w *Workload) { w.Streams = 3 }), mountModel(0.1), 2, "write-back cache"},
		{"16 KiB writes: between the cells (each interpolated)", with(func(w *Workload) { w.ReqSize = 16 << 10 }), mountModel(0.1), (450 + 0.5*(540-450)) / (150 + 0.5*(430-150)), "write-back cache"},
		{"64 KiB writes: gain within the noise", with(func(w *Workload) { w.ReqSize = 64 << 10 }), mountModel(0.3), 0, "within its noise"},
		{"1 MiB writes: a loss", with(func(w *Workload) { w.ReqSize = 1 << 20 }), mountModel(0.1), 0, "would slow them"},
		{"a library program", with(func(w *Workload) { w.Via = "library" }), mountModel(0.1), 0, "only a mount"},
		{"gateway clients", with(func(w *Workload) { w.Via = "s3" }), mountModel(0.1), 0, "only a mount"},
		{"reads", with(func(w *Workload) { w.Op = "read" }), mountModel(0.1), 0, "mostly reads"},
		{"random writes", with(func(w *Workload) { w.Pattern = "random" }), mountModel(0.1), 0, "sequential writes through a mount only"},
		{"no mount cells", small, &Model{}, 0, "calibrate --mount"},
	} {
		a := adviseWriteback(c.w, c.m)
		if a.Setting != "writeback-cache" || !strings.Contains(a.Reason, c.reason) {
			t.Errorf("%s: advice %+v; want a reason with %q", c.name, a, c.reason)
			continue
		}
		if c.predicted == 0 {
			if a.Change() {
				t.Errorf("%s: advised %q (%s), want no change", c.name, a.To, a.Reason)
			}
			continue
		}
		if a.To != WritebackCacheAdvice || math.Abs(a.Predicted-c.predicted) > 1e-9 || a.ToMBps <= a.FromMBps {
			t.Errorf("%s: advice %q predicted %v (%v -> %v MB/s), want %q at %v", c.name, a.To, a.Predicted, a.FromMBps, a.ToMBps, WritebackCacheAdvice, c.predicted)
		}
	}
}
