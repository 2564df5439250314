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
	"maps"
	"math"
	"slices"
	"time"

	"github.com/sluice-fs/sluice/internal/profile"
)

// Cell is one measurement of the model: Op ("read" or "write") with
// Pattern ("seq" or "random") requests of ReqSize bytes from Streams
// streams at once, each on its own file of StripeCount targets and
// stripes of StripeSize bytes (0: the model's StripeSize), on the targets
// of Pool ("": any target), read by a client with ReadAhead bytes of
// read-ahead (0: the client's default, 16 MiB; -1: none): MBps (10^6
// bytes per second, all streams together).
type Cell struct {
	Op          string `json:"op"`
	Pattern     string `json:"pattern"`
	ReqSize     int64  `json:"req_size"`
	Streams     int    `json:"streams"`
	StripeCount int    `json:"stripe_count"`
	StripeSize  int64  `json:"stripe_size,omitempty"`
	Pool        string `json:"pool,omitempty"`
	ReadAhead   int64  `json:"read_ahead,omitempty"`
	// WritebackCache: a cell of Model.MountCells measured through a mount
	// with the kernel's write-back cache (sluice mount --writeback-cache).
	WritebackCache bool    `json:"writeback_cache,omitempty"`
	MBps           float64 `json:"mbps"`
}

// Model is what a cluster's layouts deliver, as measured by a calibration.
type Model struct {
	// Provenance: where and how it was measured.
	Machine    string `json:"machine"`
	Date       string `json:"date"`
	Command    string `json:"command"`
	Targets    int    `json:"targets"`
	StripeSize int64  `json:"stripe_size"` // the stripe size of cells that name none
	Cells      []Cell `json:"cells"`
	// Noise is the relative difference between two measurements of the
	// same cell that the calibration saw at its 90th percentile: a
	// predicted gain below it is not told from noise.
	Noise float64 `json:"noise"`
	// MountCells were measured through FUSE mounts of the file system
	// (sequential writes, with and without the kernel's write-back cache;
	// `sluice advise calibrate --mount`), by MountCommand, with
	// MountNoise as Noise is for Cells. None: the advisor says nothing
	// about a mount's write-back cache.
	MountCells   []Cell  `json:"mount_cells,omitempty"`
	MountCommand string  `json:"mount_command,omitempty"`
	MountNoise   float64 `json:"mount_noise,omitempty"`
}

// Workload is what the model needs to know of a workload.
type Workload struct {
	Op       string // "read" or "write": the direction with the most bytes
	Pattern  string // "seq" or "random"
	ReqSize  int64
	Streams  float64 // data requests in flight
	FileSpan int64   // bytes a file spans, median
	FileSize int64   // a file's size at open, median
	Kind     string  // profile.Report.Kind

	// Via is "mount" when every recorded client served a FUSE mount, "s3"
	// when every one served the S3 gateway, "library" when they all were
	// programs using the library, "mixed" otherwise (profile.ClientVia).
	Via string
	// WaitSeconds is the time inside every recorded operation; Repeats
	// the lookups and stats of files their client had looked up before,
	// with the time inside them and the time since the previous one
	// (profile.Report.Repeats).
	WaitSeconds   float64
	Repeats       int
	RepeatSeconds float64
	RepeatGaps    []profile.GapBucket
	RepeatGapP90  time.Duration
}

// WorkloadOf reads a Workload from a report.
func WorkloadOf(r *profile.Report) Workload {
	w := Workload{Op: "read", Kind: r.Kind, FileSpan: r.FileSpanP50, FileSize: r.FileSizeP50, Streams: max(1, r.DataInFlight)}
	io := r.Read
	if r.Write.Bytes > r.Read.Bytes {
		w.Op, io = "write", r.Write
	}
	w.ReqSize = io.SizeP50
	switch lib := r.Clients - r.MountClients - r.S3Clients; {
	case r.Clients > 0 && r.MountClients == r.Clients:
		w.Via = "mount"
	case r.Clients > 0 && r.S3Clients == r.Clients:
		w.Via = "s3"
	case lib == r.Clients:
		w.Via = "library"
	default:
		w.Via = "mixed"
	}
	w.WaitSeconds, w.Repeats, w.RepeatSeconds = r.WaitSeconds, r.Repeats, r.RepeatSeconds
	w.RepeatGaps, w.RepeatGapP90 = r.RepeatGaps, time.Duration(r.RepeatGapP90)
	w.Pattern = "seq"
	if io.Sequential < 0.5 {
		// Strided requests with gaps read like random ones: the gaps
		// defeat read-ahead and whole-chunk transfers alike.
		w.Pattern = "random"
	}
	return w
}

func (m *Model) stripeSize(c Cell) int64 {
	if c.StripeSize == 0 {
		return m.StripeSize
	}
	return c.StripeSize
}

// Pooled reports whether the model measured pools (cells with a Pool). A
// model without pools describes every pool alike: its cells match a
// layout whatever its pool.
func (m *Model) Pooled() bool {
	return slices.ContainsFunc(m.Cells, func(c Cell) bool { return c.Pool != "" })
}

// matches reports whether cell c measured layout l (stripe count, size
// and, in a model with pools, pool).
func (m *Model) matches(c Cell, l Layout, pooled bool) bool {
	return c.StripeCount == l.StripeCount && m.stripeSize(c) == l.StripeSize && (!pooled || c.Pool == l.Pool)
}

// Predict returns the model's throughput (MB/s) for w on files of layout
// l read with the default read-ahead: interpolated between the measured
// request sizes and stream counts on logarithmic scales, clamped at the
// grid's edges. ok is false when the model has no cell of w's kind and
// l's stripe count and size.
func (m *Model) Predict(w Workload, l Layout) (float64, bool) { return m.PredictWith(w, l, 0) }

// PredictWith is Predict with a client read-ahead of readAhead bytes (0:
// the default, -1: none).
func (m *Model) PredictWith(w Workload, l Layout, readAhead int64) (float64, bool) {
	if l.StripeSize == 0 {
		l.StripeSize = m.StripeSize
	}
	var cells []Cell
	pooled := m.Pooled()
	for _, c := range m.Cells {
		if c.Op == w.Op && c.Pattern == w.Pattern && m.matches(c, l, pooled) && c.ReadAhead == readAhead {
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
		pts = append(pts, s)
		at = append(at, sizeCurve(row, w.ReqSize))
	}
	return interp(pts, at, w.Streams), true
}

// sizeCurve is the MB/s of cells (of one number of streams) at requests of
// size bytes: each measured size's mean, interpolated on a log scale of
// the size.
func sizeCurve(cells []Cell, size int64) float64 {
	sizes := uniq(cells, func(c Cell) float64 { return float64(c.ReqSize) })
	vals := make([]float64, len(sizes))
	for i, z := range sizes {
		vals[i] = mean(cells, func(c Cell) bool { return float64(c.ReqSize) == z })
	}
	return interp(sizes, vals, float64(max(size, 1)))
}

// Layouts returns the layouts (stripe count, size and pool) the model
// measured, by pool, then count, then size.
func (m *Model) Layouts() []Layout {
	var out []Layout
	for _, c := range m.Cells {
		l := Layout{StripeCount: c.StripeCount, StripeSize: m.stripeSize(c), Pool: c.Pool}
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b Layout) int {
		return cmp.Or(cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.StripeCount, b.StripeCount), cmp.Compare(a.StripeSize, b.StripeSize))
	})
	return out
}

// ReadAheads returns the read-aheads other than the default the model
// measured for w's kind on layout l.
func (m *Model) ReadAheads(w Workload, l Layout) []int64 {
	if l.StripeSize == 0 {
		l.StripeSize = m.StripeSize
	}
	var out []int64
	pooled := m.Pooled()
	for _, c := range m.Cells {
		if c.ReadAhead != 0 && c.Op == w.Op && c.Pattern == w.Pattern && m.matches(c, l, pooled) && !slices.Contains(out, c.ReadAhead) {
			out = append(out, c.ReadAhead)
		}
	}
	slices.Sort(out)
	return out
}

// Layout is a file layout: the one in force for the workload's files, or
// one the model measured.
type Layout struct {
	StripeCount int    `json:"stripe_count"`
	StripeSize  int64  `json:"stripe_size"`
	Pool        string `json:"pool,omitempty"`
	// HeadEnd, if positive, makes the layout progressive (ADR 0021): each
	// file's bytes below HeadEnd on HeadStripeCount targets of pool
	// HeadPool, the rest as StripeCount, StripeSize and Pool say.
	HeadEnd         int64  `json:"head_end,omitempty"`
	HeadPool        string `json:"head_pool,omitempty"`
	HeadStripeCount int    `json:"head_stripe_count,omitempty"`
}

func (l Layout) String() string {
	s := fmt.Sprintf("%d x %s", l.StripeCount, profile.Size(l.StripeSize))
	if l.Pool != "" {
		s += " in pool " + l.Pool
	}
	if l.HeadEnd > 0 {
		s = fmt.Sprintf("first %s of each file: %d x %s in %s; the rest: %s", profile.Size(l.HeadEnd), l.HeadStripeCount, profile.Size(l.StripeSize), poolName(l.HeadPool), s)
	}
	return s
}

// Facts are what the advice must respect.
type Facts struct {
	Targets int // targets new files may use (the pool's, or all)
	// AllTargets are the file system's targets (a layout of no pool may
	// use each); 0: Targets.
	AllTargets int
	// Pools are the pools that exist, by name: a layout may move the
	// files to one only if its targets allow the stripe count and its
	// free space holds Bytes.
	Pools map[string]PoolFacts
	// Bytes are the bytes of the files a layout change migrates, and
	// Sizes their sizes, one per file.
	Bytes int64
	Sizes []int64
}

// PoolFacts are a pool's targets and free bytes.
type PoolFacts struct {
	Targets int
	Free    int64
}

// Allows reports whether the layout l may be advised for files now in
// pool cur: its stripe count within the targets it would use, and, for
// another pool, one that exists with room for the files.
func (f Facts) Allows(l Layout, cur string) bool {
	switch {
	case l.Pool == cur:
		return l.StripeCount <= f.Targets
	case l.Pool == "":
		return l.StripeCount <= cmp.Or(f.AllTargets, f.Targets)
	}
	p, ok := f.Pools[l.Pool]
	return ok && l.StripeCount <= p.Targets && f.Bytes <= p.Free
}

// Advice is one recommendation.
type Advice struct {
	Setting string `json:"setting"` // "layout", "client-read-ahead", "qos-class", "name-cache" or "writeback-cache"
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"` // "" when no change is advised
	// Layout is the advised layout (Setting "layout", a change); ReadAhead
	// the advised read-ahead in bytes (-1: none).
	Layout    *Layout `json:"layout,omitempty"`
	ReadAhead int64   `json:"read_ahead,omitempty"`
	Reason    string  `json:"reason"`
	// Predicted is the throughput the model predicts with To over that
	// with From (1: no change; 0: not predicted).
	Predicted float64 `json:"predicted,omitempty"`
	// PredictedMBps are the model's figures for From and To.
	FromMBps float64 `json:"from_mbps,omitempty"`
	ToMBps   float64 `json:"to_mbps,omitempty"`
}

// Change reports whether a advises a change.
func (a *Advice) Change() bool { return a.To != "" && a.To != a.From }

// Advise recommends a layout for w's files (only one the model measured
// and the targets allow, and only if the model predicts a gain beyond its
// noise), a client read-ahead for sequential readers (likewise), and a
// QoS class for its job.
func Advise(w Workload, cur Layout, f Facts, m *Model) []Advice {
	if cur.StripeSize == 0 {
		cur.StripeSize = m.StripeSize
	}
	lay := adviseLayout(w, cur, f, m)
	on := cur
	if lay.Layout != nil {
		on = *lay.Layout
	}
	return []Advice{lay, adviseReadAhead(w, on, m), adviseClass(w), adviseNames(w, m.Noise), adviseWriteback(w, m)}
}

func adviseLayout(w Workload, cur Layout, f Facts, m *Model) Advice {
	a := Advice{Setting: "layout", From: cur.String()}
	if w.Op == "" || w.ReqSize == 0 {
		a.Reason = "the recording has no reads or writes"
		return a
	}
	pooled := m.Pooled()
	if w.FileSpan > 0 && w.FileSpan <= cur.StripeSize {
		// Each file lives on one target whatever the stripe count: only
		// another pool can change what its reads and writes get.
		a.Reason = fmt.Sprintf("the files span %s (median), no more than one stripe of %s: each lives on one target whatever the stripe count",
			profile.Size(w.FileSpan), profile.Size(cur.StripeSize))
		if !pooled {
			a.Reason += ", so no change"
			return a
		}
		return advisePool(a, w, cur, f, m)
	}
	curMB, ok := m.Predict(w, cur)
	if !ok {
		a.Reason = fmt.Sprintf("the model has no measurement of %s %s requests on %s (run sluice advise calibrate)", w.Pattern, w.Op, cur)
		return a
	}
	a.FromMBps = curMB
	best, bestMB := cur, curMB
	for _, l := range m.Layouts() {
		if !pooled {
			l.Pool = cur.Pool // the model describes every pool alike
		}
		if !f.Allows(l, cur.Pool) || w.FileSpan > 0 && int64(l.StripeCount-1)*l.StripeSize >= w.FileSpan {
			continue // more targets than there are (or room), or than a file has stripes
		}
		if p, ok := m.Predict(w, l); ok && p > bestMB {
			best, bestMB = l, p
		}
	}
	return orSplit(decide(a, w, cur, curMB, best, bestMB, m), w, cur, curMB, f, m)
}

// orSplit returns a when it advises a change; otherwise the split that
// adviseSplit finds, if any.
func orSplit(a Advice, w Workload, cur Layout, curMB float64, f Facts, m *Model) Advice {
	if a.Change() {
		return a
	}
	if s, ok := adviseSplit(w, cur, curMB, f, m); ok {
		s.From, s.FromMBps = a.From, a.FromMBps
		return s
	}
	return a
}

// adviseSplit looks for a pool the model predicts faster than the current
// one for w that has no room for all the files (Facts.Bytes) but has room
// for the first bytes of each, up to the median file size rounded up to
// the stripe size: a progressive layout with that head in the faster pool
// and the rest where it is. Its prediction mixes the two pools' by the
// share of the bytes each holds (the time per byte adds up): 1 / (h/head
// + (1-h)/rest), with h the head's share of Facts.Sizes' bytes; advised
// only beyond the model's noise.
func adviseSplit(w Workload, cur Layout, curMB float64, f Facts, m *Model) (Advice, bool) {
	if !m.Pooled() || f.Bytes <= 0 || len(f.Sizes) == 0 || cur.HeadEnd > 0 {
		return Advice{}, false
	}
	end := (max(w.FileSize, 1) + cur.StripeSize - 1) / cur.StripeSize * cur.StripeSize
	head := HeadBytes(f.Sizes, end)
	if head >= f.Bytes {
		return Advice{}, false // every file fits in its head: a move of the whole files
	}
	share := float64(head) / float64(f.Bytes)
	var best Advice
	bestMB := curMB
	for _, name := range slices.Sorted(maps.Keys(f.Pools)) {
		p := f.Pools[name]
		if name == cur.Pool || f.Bytes <= p.Free || head > p.Free {
			continue // the current pool; room for all (a plain move); no room for the heads
		}
		hc := min(cur.StripeCount, p.Targets, int(end/cur.StripeSize))
		headMB, ok := m.Predict(w, Layout{StripeCount: hc, StripeSize: cur.StripeSize, Pool: name})
		if !ok || headMB <= 0 {
			continue
		}
		mix := 1 / (share/headMB + (1-share)/curMB)
		if mix > bestMB {
			l := cur
			l.HeadEnd, l.HeadPool, l.HeadStripeCount = end, name, hc
			best, bestMB = Advice{Setting: "layout", To: l.String(), Layout: &l, ToMBps: mix, Predicted: mix / curMB}, mix
			best.Reason = fmt.Sprintf("the model predicts %.0f MB/s for %s %s requests of %s in %s against %.0f MB/s where the files are, but %s has no room for them all (%s, %s free); the first %s of each file (%s of %s, %.0f%% of the bytes) fit: mixing the two by bytes gives %.0f MB/s (%.2fx; the model's noise is %.0f%%)",
				headMB, w.Pattern, w.Op, profile.Size(w.ReqSize), poolName(name), curMB, poolName(name), profile.Size(f.Bytes), profile.Size(p.Free),
				profile.Size(end), profile.Size(head), profile.Size(f.Bytes), 100*share, mix, mix/curMB, 100*m.Noise)
		}
	}
	if best.Layout == nil || best.Predicted <= 1+m.Noise {
		return Advice{}, false
	}
	return best, true
}

// HeadBytes returns how many of the bytes of files of the given sizes lie
// below end: what the head extent of a progressive layout ending there
// holds.
func HeadBytes(sizes []int64, end int64) int64 {
	var n int64
	for _, s := range sizes {
		n += min(s, end)
	}
	return n
}

// advisePool compares, for files that each live on one target, the pools
// the model measured: each predicted on files of one stripe (what such a
// file is); the advised layout keeps the stripe count and size.
func advisePool(a Advice, w Workload, cur Layout, f Facts, m *Model) Advice {
	one := func(pool string) Layout { return Layout{StripeCount: 1, StripeSize: cur.StripeSize, Pool: pool} }
	curMB, ok := m.Predict(w, one(cur.Pool))
	if !ok {
		a.Reason += fmt.Sprintf("; the model has no measurement of %s %s requests on one target of %s (run sluice advise calibrate --pool)", w.Pattern, w.Op, poolName(cur.Pool))
		return a
	}
	a.FromMBps = curMB
	best, bestMB := cur, curMB
	for _, l := range m.Layouts() {
		if l.Pool == cur.Pool || l.StripeCount != 1 || l.StripeSize != cur.StripeSize {
			continue
		}
		to := Layout{StripeCount: cur.StripeCount, StripeSize: cur.StripeSize, Pool: l.Pool}
		if !f.Allows(to, cur.Pool) {
			continue
		}
		if p, ok := m.Predict(w, l); ok && p > bestMB {
			best, bestMB = to, p
		}
	}
	a.Reason += "; "
	return decide(a, w, cur, curMB, best, bestMB, m)
}

// decide advises best over cur if the model's gain exceeds its noise.
func decide(a Advice, w Workload, cur Layout, curMB float64, best Layout, bestMB float64, m *Model) Advice {
	gain := bestMB / curMB
	desc := fmt.Sprintf("%s %s requests of %s, %.1f in flight", w.Pattern, w.Op, profile.Size(w.ReqSize), w.Streams)
	if best == cur || gain <= 1+m.Noise {
		a.Predicted = 1
		a.Reason += fmt.Sprintf("%s: the best layout measured (%s, %.0f MB/s) is predicted %.2fx of the current %s (%.0f MB/s), within the model's noise (%.0f%%): no change",
			desc, best, bestMB, gain, cur, curMB, 100*m.Noise)
		return a
	}
	a.To, a.Layout, a.ToMBps, a.Predicted = best.String(), &best, bestMB, gain
	a.Reason += fmt.Sprintf("%s: %s is predicted at %.0f MB/s against %.0f MB/s for %s (%.2fx; the model's noise is %.0f%%)",
		desc, best, bestMB, curMB, cur, gain, 100*m.Noise)
	return a
}

func poolName(p string) string {
	if p == "" {
		return "any target"
	}
	return "pool " + p
}

// adviseReadAhead compares the read-aheads the model measured for
// sequential readers on layout l with the default.
func adviseReadAhead(w Workload, l Layout, m *Model) Advice {
	a := Advice{Setting: "client-read-ahead", From: "default (16MiB)"}
	if w.Op != "read" || w.Pattern != "seq" {
		a.Reason = "not a sequential reader: read-ahead does not start"
		return a
	}
	def, ok := m.Predict(w, l)
	ras := m.ReadAheads(w, l)
	if !ok || len(ras) == 0 {
		a.Reason = fmt.Sprintf("the model has no read-ahead measurements on %s", l)
		return a
	}
	a.FromMBps = def
	best, bestMB := int64(0), def
	for _, ra := range ras {
		if p, ok := m.PredictWith(w, l, ra); ok && p > bestMB {
			best, bestMB = ra, p
		}
	}
	gain := bestMB / def
	if best == 0 || gain <= 1+m.Noise {
		a.Predicted = 1
		a.Reason = fmt.Sprintf("the default is predicted within the model's noise (%.0f%%) of the best measured (%s: %.2fx): no change", 100*m.Noise, raName(best), gain)
		return a
	}
	a.To, a.ReadAhead, a.ToMBps, a.Predicted = raName(best), best, bestMB, gain
	a.Reason = fmt.Sprintf("sequential reads of %s: a read-ahead of %s is predicted at %.0f MB/s against %.0f MB/s (%.2fx)", profile.Size(w.ReqSize), raName(best), bestMB, def, gain)
	return a
}

func raName(ra int64) string {
	switch {
	case ra < 0:
		return "off"
	case ra == 0:
		return "default (16MiB)"
	}
	return profile.Size(ra)
}

// DefaultWatchTimeout is how long a mount's kernel keeps names and
// attributes while the mount follows the change feed (sluice mount
// --watch-timeout's default, fusefs.DefaultWatchTimeout, which this pure
// package does not import); MaxWatchTimeout bounds the advice.
const (
	DefaultWatchTimeout = 30 * time.Second
	MaxWatchTimeout     = time.Hour
)

// adviseNames looks at the lookups and stats the recorded clients asked
// again for files they had looked up before: the time a cache of names
// and attributes in the client would have saved. Through a mount, the
// kernel's cache answered every repeat that came within its timeout, so
// what reached Sluice came later (or after a change dropped the entry):
// a longer --watch-timeout keeps the names for the time between the
// repeats (other clients' changes still reach the kernel through the
// change feed); a program using the library caches nothing and should
// keep its files open. The predicted effect is the time inside Sluice's
// calls without the repeats that the advice removes, against with them;
// advised only beyond the model's noise.
func adviseNames(w Workload, noise float64) Advice {
	a := Advice{Setting: "name-cache", From: "a lookup for each access"}
	if w.Via == "mount" {
		a.From = "--watch-timeout " + DefaultWatchTimeout.String()
	}
	if w.Repeats == 0 || w.WaitSeconds <= 0 {
		a.Reason = "no client looked up or statted a file it had looked up before: nothing for a cache of names to answer"
		return a
	}
	if w.Via != "mount" && w.Via != "library" {
		a.Reason = fmt.Sprintf("%d lookups and stats were asked again, by clients of the S3 gateway or of several kinds (%s): no one setting removes them", w.Repeats, w.Via)
		return a
	}
	saved, to := w.RepeatSeconds, "open each file once"
	how := "keep the files open (client.File; in Python a FileSet or FileDataset) instead of looking their paths up again"
	if w.Via == "mount" {
		// The buckets of gaps past the default timeout, up to the one
		// that holds the 90th percentile, within the bound: their
		// repeats are what a longer timeout keeps. (Repeats within the
		// default came after a change dropped the name: no timeout
		// keeps those.)
		d := time.Duration(0)
		saved = 0
		for _, b := range w.RepeatGaps {
			g := time.Duration(b.MaxGap)
			if g/2 < DefaultWatchTimeout {
				continue
			}
			if g > MaxWatchTimeout {
				break
			}
			saved, d = saved+b.Seconds, g
			if g >= w.RepeatGapP90 {
				break
			}
		}
		if d == 0 {
			a.Reason = fmt.Sprintf("%d lookups and stats reached Sluice again, none between %v and %v after the previous (90%% within %v): changes dropped the names from the kernel (or the mount does not follow the change feed), and a longer timeout would not keep them",
				w.Repeats, DefaultWatchTimeout, MaxWatchTimeout, w.RepeatGapP90.Round(time.Millisecond))
			return a
		}
		to = "--watch-timeout " + d.String()
		how = fmt.Sprintf("sluice mount --watch-timeout %v keeps names and attributes that long in the kernel; other clients' changes still drop them at once through the change feed", d)
	}
	share := saved / w.WaitSeconds
	if share <= noise || saved >= w.WaitSeconds {
		a.Predicted = 1
		a.Reason = fmt.Sprintf("%d lookups and stats were asked again; the advice would remove %.1f%% of the time inside Sluice's calls, within the model's noise (%.0f%%): no change", w.Repeats, 100*share, 100*noise)
		return a
	}
	a.To, a.Predicted = to, w.WaitSeconds/(w.WaitSeconds-saved)
	a.Reason = fmt.Sprintf("%d lookups and stats (%.0f%% of the time inside Sluice's calls) asked again for files their client had looked up, 90%% within %v of the previous: %s",
		w.Repeats, 100*share, w.RepeatGapP90.Round(time.Millisecond), how)
	return a
}

// WritebackCacheAdvice is the advice adviseWriteback gives.
const WritebackCacheAdvice = "sluice mount --writeback-cache"

// adviseWriteback advises a mount's write-back cache for programs writing
// files in small sequential writes through a mount: the kernel then sends
// them in large requests (docs/profile.md). The recorded writes are the
// requests that reached the mount, so a mount with the cache on already
// shows large ones and is told no change. The predicted effect is the
// ratio of the mount cells' throughput with and without the cache at the
// workload's write size and streams (interpolated on a log scale of the
// size), advised only beyond the cells' noise.
func adviseWriteback(w Workload, m *Model) Advice {
	a := Advice{Setting: "writeback-cache", From: "off"}
	switch {
	case w.Via != "mount":
		a.From = "none"
		a.Reason = fmt.Sprintf("the clients are not all FUSE mounts (%s): only a mount has a write-back cache", w.Via)
		return a
	case w.Op != "write":
		a.Reason = "the workload mostly reads: the write-back cache changes nothing for it"
		return a
	case w.Pattern != "seq":
		a.Reason = "random writes: the calibration measures sequential writes through a mount only"
		return a
	case w.ReqSize <= 0:
		a.Reason = "no write sizes recorded"
		return a
	}
	on, ok1 := m.mountWrite(w, true)
	off, ok2 := m.mountWrite(w, false)
	if !ok1 || !ok2 || off <= 0 {
		a.Reason = "the model has no cells measured through a mount (sluice advise calibrate --mount)"
		return a
	}
	a.FromMBps, a.ToMBps = off, on
	ratio := on / off
	if ratio < 1 {
		a.Predicted = 1
		a.Reason = fmt.Sprintf("sequential writes of %s reached the mount, where the model measures %.0f MB/s with the kernel's write-back cache and %.0f without (%.2fx): the cache would slow them; no change",
			profile.Size(w.ReqSize), on, off, ratio)
		return a
	}
	if ratio-1 <= m.MountNoise {
		a.Predicted = 1
		a.Reason = fmt.Sprintf("sequential writes of %s reached the mount, where the model measures %.0f MB/s with the kernel's write-back cache and %.0f without (%.2fx, within its noise of %.0f%%): no change",
			profile.Size(w.ReqSize), on, off, ratio, 100*m.MountNoise)
		return a
	}
	a.To, a.Predicted = WritebackCacheAdvice, ratio
	a.Reason = fmt.Sprintf("sequential writes of %s reached the mount one by one; with the kernel's write-back cache (sluice serve --writeback-cache for its --mount) it buffers them and sends large requests (model: %.0f against %.0f MB/s). Other mounts then see this mount's size changes only when the kernel drops the file's attributes",
		profile.Size(w.ReqSize), on, off)
	return a
}

// mountWrite predicts the MB/s of w's sequential writes through a mount
// with or without the write-back cache: the mount cells of the streams
// nearest to w's, interpolated over their request sizes.
func (m *Model) mountWrite(w Workload, wbc bool) (float64, bool) {
	var cells []Cell
	for _, c := range m.MountCells {
		if c.Op == "write" && c.Pattern == "seq" && c.WritebackCache == wbc && c.MBps > 0 {
			cells = append(cells, c)
		}
	}
	if len(cells) == 0 {
		return 0, false
	}
	streams := uniq(cells, func(c Cell) float64 { return float64(c.Streams) })
	best := streams[0]
	for _, s := range streams {
		if math.Abs(math.Log(s)-math.Log(w.Streams)) < math.Abs(math.Log(best)-math.Log(w.Streams)) {
			best = s
		}
	}
	cells = slices.DeleteFunc(cells, func(c Cell) bool { return float64(c.Streams) != best })
	return sizeCurve(cells, w.ReqSize), true
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
