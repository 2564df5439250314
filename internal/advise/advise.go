// Package advise is Sluice's layout advisor (docs/profile.md, issue 18):
// from the summary of a recorded workload (package profile) and a model
// of what the cluster's layouts deliver, measured on the cluster by
// `sluice advise calibrate`, it recommends a stripe count and a QoS
// class, each with its reason and predicted effect. Everything here is a
// pure function; the calibration, the replay and applying advice are done
// by package cli through the client library.
package advise

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/sluice-fs/sluice/internal/profile"
)

// Cell is one measurement of the model: Op ("read" or "write") with
// Pattern ("seq" or "random") requests of ReqSize bytes from Streams
// streams at once, each on its own file of StripeCount targets: MBps
// (10^6 bytes per second, all streams together).
type Cell struct {
	Op          string  `json:"op"`
	Pattern     string  `json:"pattern"`
	ReqSize     int64   `json:"req_size"`
	Streams     int     `json:"streams"`
	StripeCount int     `json:"stripe_count"`
	MBps        float64 `json:"mbps"`
}

// Model is what a cluster's layouts deliver, as measured by a calibration.
type Model struct {
	// Provenance: where and how it was measured.
	Machine    string `json:"machine"`
	Date       string `json:"date"`
	Command    string `json:"command"`
	Targets    int    `json:"targets"`
	StripeSize int64  `json:"stripe_size"` // the stripe size of every cell
	Cells      []Cell `json:"cells"`
	// Noise is the relative difference between two measurements of the
	// same cell that the calibration saw at its 90th percentile: a
	// predicted gain below it is not told from noise.
	Noise float64 `json:"noise"`
}

// Workload is what the model needs to know of a workload.
type Workload struct {
	Op       string // "read" or "write": the direction with the most bytes
	Pattern  string // "seq" or "random"
	ReqSize  int64
	Streams  float64 // data requests in flight
	FileSpan int64   // bytes a file spans, median
	Kind     string  // profile.Report.Kind
}

// WorkloadOf reads a Workload from a report.
func WorkloadOf(r *profile.Report) Workload {
	w := Workload{Op: "read", Kind: r.Kind, FileSpan: r.FileSpanP50, Streams: max(1, r.DataInFlight)}
	io := r.Read
	if r.Write.Bytes > r.Read.Bytes {
		w.Op, io = "write", r.Write
	}
	w.ReqSize = io.SizeP50
	w.Pattern = "seq"
	if io.Sequential < 0.5 {
		// Strided requests with gaps read like random ones: the gaps
		// defeat read-ahead and whole-chunk transfers alike.
		w.Pattern = "random"
	}
	return w
}

// Predict returns the model's throughput (MB/s) for w on files of
// stripeCount targets: interpolated between the measured request sizes
// and stream counts on logarithmic scales, clamped at the grid's edges.
// ok is false when the model has no cell of w's kind and stripe count.
func (m *Model) Predict(w Workload, stripeCount int) (float64, bool) {
	var cells []Cell
	for _, c := range m.Cells {
		if c.Op == w.Op && c.Pattern == w.Pattern && c.StripeCount == stripeCount {
			cells = append(cells, c)
		}
	}
	if len(cells) == 0 {
		return 0, false
	}
	streams := uniq(cells, func(c Cell) float64 { return float64(c.Streams) })
	var pts []float64
	var at []float64
	for _, s := range streams {
		var row []Cell
		for _, c := range cells {
			if float64(c.Streams) == s {
				row = append(row, c)
			}
		}
		sizes := uniq(row, func(c Cell) float64 { return float64(c.ReqSize) })
		vals := make([]float64, len(sizes))
		for i, z := range sizes {
			vals[i] = mean(row, func(c Cell) bool { return float64(c.ReqSize) == z })
		}
		pts = append(pts, s)
		at = append(at, interp(sizes, vals, float64(max(w.ReqSize, 1))))
	}
	return interp(pts, at, w.Streams), true
}

// StripeCounts returns the stripe counts the model measured.
func (m *Model) StripeCounts() []int {
	var out []int
	for _, c := range m.Cells {
		if !slices.Contains(out, c.StripeCount) {
			out = append(out, c.StripeCount)
		}
	}
	slices.Sort(out)
	return out
}

// Layout is the layout in force for the workload's files.
type Layout struct {
	StripeCount int
	StripeSize  int64
	Pool        string
}

// Facts are what the advice must respect.
type Facts struct {
	Targets int // targets new files may use (the pool's, or all)
}

// Advice is one recommendation.
type Advice struct {
	Setting string `json:"setting"` // "stripe-count" or "qos-class"
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"` // "" when no change is advised
	Reason  string `json:"reason"`
	// Predicted is the throughput the model predicts with To over that
	// with From (1: no change; 0: not predicted).
	Predicted float64 `json:"predicted,omitempty"`
	// PredictedMBps are the model's figures for From and To.
	FromMBps float64 `json:"from_mbps,omitempty"`
	ToMBps   float64 `json:"to_mbps,omitempty"`
}

// Change reports whether a advises a change.
func (a *Advice) Change() bool { return a.To != "" && a.To != a.From }

// Advise recommends a stripe count for w's files (only one the model
// measured and the targets allow, and only if the model predicts a gain
// beyond its noise) and a QoS class for its job.
func Advise(w Workload, cur Layout, f Facts, m *Model) []Advice {
	out := []Advice{adviseStripes(w, cur, f, m)}
	return append(out, adviseClass(w))
}

func adviseStripes(w Workload, cur Layout, f Facts, m *Model) Advice {
	a := Advice{Setting: "stripe-count", From: fmt.Sprint(cur.StripeCount)}
	if w.Op == "" || w.ReqSize == 0 {
		a.Reason = "the recording has no reads or writes"
		return a
	}
	stripe := cur.StripeSize
	if stripe <= 0 {
		stripe = m.StripeSize
	}
	if w.FileSpan > 0 && w.FileSpan <= stripe {
		a.Reason = fmt.Sprintf("the files span %s (median), no more than one stripe of %s: each lives on one target whatever the stripe count, so no change",
			profile.Size(w.FileSpan), profile.Size(stripe))
		return a
	}
	curMB, ok := m.Predict(w, cur.StripeCount)
	if !ok {
		a.Reason = fmt.Sprintf("the model has no measurement of %s %s requests on %d targets (run sluice advise calibrate)", w.Pattern, w.Op, cur.StripeCount)
		return a
	}
	a.FromMBps = curMB
	best, bestMB := cur.StripeCount, curMB
	for _, sc := range m.StripeCounts() {
		if sc > f.Targets || w.FileSpan > 0 && int64(sc-1)*stripe >= w.FileSpan {
			continue // more targets than there are, or than a file has stripes
		}
		if p, ok := m.Predict(w, sc); ok && p > bestMB {
			best, bestMB = sc, p
		}
	}
	gain := bestMB / curMB
	desc := fmt.Sprintf("%s %s requests of %s, %.1f in flight", w.Pattern, w.Op, profile.Size(w.ReqSize), w.Streams)
	if best == cur.StripeCount || gain <= 1+m.Noise {
		a.Predicted = 1
		a.Reason = fmt.Sprintf("%s: the best stripe count measured (%d, %.0f MB/s) is predicted %.2fx of the current %d (%.0f MB/s), within the model's noise (%.0f%%): no change",
			desc, best, bestMB, gain, cur.StripeCount, curMB, 100*m.Noise)
		return a
	}
	a.To, a.ToMBps, a.Predicted = fmt.Sprint(best), bestMB, gain
	a.Reason = fmt.Sprintf("%s: stripe count %d is predicted at %.0f MB/s against %.0f MB/s for %d (%.2fx; the model's noise is %.0f%%)",
		desc, best, bestMB, curMB, cur.StripeCount, gain, 100*m.Noise)
	return a
}

// adviseClass names the QoS class whose place in the targets' schedule
// (docs/qos.md) fits the workload: bulk writes of checkpoints below
// training reads, latency-bound small reads above them.
func adviseClass(w Workload) Advice {
	a := Advice{Setting: "qos-class"}
	switch {
	case w.Op == "write" && w.Pattern == "seq":
		a.To = "checkpoint"
		a.Reason = "large sequential writes (a checkpoint or a dataset being written): scheduled below training reads, so that readers keep their share while it saturates the targets"
	case w.Op == "read" && w.Pattern == "random" && w.ReqSize <= 64<<10 && w.Streams <= 4:
		a.To = "interactive"
		a.Reason = "small random reads with few in flight (an inference service's pattern): latency-bound, scheduled first"
	case w.Op == "read":
		a.To = "training"
		a.Reason = "reads of a dataset: the default class"
	default:
		a.To = "training"
		a.Reason = "mixed I/O: the default class"
	}
	return a
}

// MeasuredNoise is the 90th percentile of the relative differences
// between pairs of measurements of the same cells.
func MeasuredNoise(a, b []Cell) float64 {
	var d []float64
	for i := range min(len(a), len(b)) {
		if m := (a[i].MBps + b[i].MBps) / 2; m > 0 {
			d = append(d, math.Abs(a[i].MBps-b[i].MBps)/m)
		}
	}
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(0.9*float64(len(d)-1))]
}

// Average returns cells with each MBps the mean of the runs' (the runs
// measured the same cells in the same order).
func Average(runs ...[]Cell) []Cell {
	if len(runs) == 0 {
		return nil
	}
	out := slices.Clone(runs[0])
	for i := range out {
		var s float64
		for _, r := range runs {
			s += r[i].MBps
		}
		out[i].MBps = s / float64(len(runs))
	}
	return out
}

func uniq(cells []Cell, key func(Cell) float64) []float64 {
	var out []float64
	for _, c := range cells {
		if k := key(c); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, cmp.Compare)
	return out
}

func mean(cells []Cell, pick func(Cell) bool) float64 {
	var s float64
	n := 0
	for _, c := range cells {
		if pick(c) {
			s += c.MBps
			n++
		}
	}
	return s / float64(n)
}

// interp interpolates ys over xs (ascending, positive) at x on a
// logarithmic x scale, clamped to the ends.
func interp(xs, ys []float64, x float64) float64 {
	if x <= xs[0] {
		return ys[0]
	}
	for i := 1; i < len(xs); i++ {
		if x <= xs[i] {
			t := (math.Log(x) - math.Log(xs[i-1])) / (math.Log(xs[i]) - math.Log(xs[i-1]))
			return ys[i-1] + t*(ys[i]-ys[i-1])
		}
	}
	return ys[len(ys)-1]
}
