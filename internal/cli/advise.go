package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/advise"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/profile"
)

// CalibrateOptions are the flags of `sluice advise calibrate`.
type CalibrateOptions struct {
	Scratch  string        // a directory for the measurement files (created, then removed)
	Size     int64         // bytes each stream writes and reads in a sequential cell
	CellTime time.Duration // how long a random cell runs
	Runs     int           // measurements of each cell (the noise is their spread)
	Out      string        // where the model goes (JSON)
	Quiet    bool
	// Pools, if any, are measured each (cells of their names, stripe
	// counts up to their targets) instead of the targets as a whole.
	Pools []string
	// Mount also measures sequential writes through two FUSE mounts of
	// the file system made by this process, one with the kernel's
	// write-back cache (the model's mount cells). Needs FUSE (root).
	Mount bool
	// Base, if set, is a model whose cells are kept instead of measured
	// again (with Mount: add mount cells to an existing model).
	Base string
}

// The calibration's grid: sequential requests of these sizes, random ones
// of those, each from 1 and 4 streams, on files of stripe counts 1, 2, 4,
// 8, ... up to the targets and of these stripe sizes; sequential reads
// also by clients with these read-aheads besides the default.
var (
	calSeqSizes    = []int64{64 << 10, 1 << 20, 4 << 20}
	calRandomSizes = []int64{4 << 10, 64 << 10}
	calStreams     = []int{1, 4}
	calStripeSizes = []int64{1 << 20, 4 << 20}
	calReadAheads  = []int64{-1, 64 << 20}
)

// Calibrate measures what the cluster's stripe counts deliver for the
// calibration's grid of workloads and writes the model advise uses.
func (e *Env) Calibrate(ctx context.Context, o CalibrateOptions) error {
	if o.Scratch == "" {
		o.Scratch = "/.sluice-calibrate"
	}
	if o.Size <= 0 {
		o.Size = 32 << 20
	}
	if o.CellTime <= 0 {
		o.CellTime = 500 * time.Millisecond
	}
	if o.Runs <= 0 {
		o.Runs = 2
	}
	if o.Out == "" {
		return errs.New(errs.Invalid, "advise calibrate needs --out FILE")
	}
	var model advise.Model
	if o.Base != "" {
		base, _, err := LoadModel(o.Base)
		if err != nil {
			return err
		}
		model = *base
	} else {
		var err error
		if model, err = e.calibrateLayouts(ctx, o); err != nil {
			return err
		}
	}
	if o.Mount {
		cells, noise, err := e.calibrateMount(ctx, o)
		if err != nil {
			return err
		}
		model.MountCells, model.MountNoise = cells, noise
		model.MountCommand = "sluice " + strings.Join(os.Args[1:], " ")
	}
	b, err := json.MarshalIndent(&model, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.Out, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "model of %d cells (noise %.0f%%) and %d mount cells (noise %.0f%%) written to %s\n",
		len(model.Cells), 100*model.Noise, len(model.MountCells), 100*model.MountNoise, o.Out)
	return nil
}

// calibrateLayouts measures the model's cells: the layouts' grid through
// the client library.
func (e *Env) calibrateLayouts(ctx context.Context, o CalibrateOptions) (advise.Model, error) {
	st, err := e.Client.Statfs(ctx)
	if err != nil {
		return advise.Model{}, err
	}
	// Where to measure: the targets as a whole, or each pool named.
	spans := map[string]int{"": st.Targets}
	if len(o.Pools) > 0 {
		spans = map[string]int{}
		pools, err := e.Client.Pools(ctx)
		if err != nil {
			return advise.Model{}, err
		}
		for _, name := range o.Pools {
			i := slices.IndexFunc(pools, func(p client.PoolInfo) bool { return p.Name == name })
			if i < 0 || len(pools[i].Targets) == 0 {
				return advise.Model{}, errs.New(errs.Invalid, "advise calibrate --pool %q: no such pool, or it has no targets (sluice pool ls)", name)
			}
			spans[name] = len(pools[i].Targets)
		}
	}
	var layouts []advise.Layout
	for _, pool := range slices.Sorted(maps.Keys(spans)) {
		for sc := 1; sc <= spans[pool]; sc *= 2 {
			for _, ss := range calStripeSizes {
				layouts = append(layouts, advise.Layout{StripeCount: sc, StripeSize: ss, Pool: pool})
			}
		}
	}
	// Clients with the other read-aheads.
	raClients := map[int64]*client.Client{}
	for _, ra := range calReadAheads {
		opts := e.Client.Options()
		opts.ReadAhead = int(ra)
		c, err := client.New(ctx, opts)
		if err != nil {
			return advise.Model{}, err
		}
		defer c.Close()
		raClients[ra] = c
	}
	if err := e.Client.MkdirAll(ctx, o.Scratch, 0o700); err != nil {
		return advise.Model{}, err
	}
	defer e.Client.RemoveAll(context.WithoutCancel(ctx), o.Scratch)
	var runs [][]advise.Cell
	for run := range o.Runs {
		var cells []advise.Cell
		for _, lay := range layouts {
			sc, ss, pool := lay.StripeCount, lay.StripeSize, lay.Pool
			dir := fmt.Sprintf("%s/r%d-sc%d-ss%d-p%s", o.Scratch, run, sc, ss, pool)
			if err := e.Client.Mkdir(ctx, dir, 0o700); err != nil {
				return advise.Model{}, err
			}
			if err := e.Client.SetLayout(ctx, dir, client.Layout{StripeCount: sc, StripeSize: ss}); err != nil {
				return advise.Model{}, err
			}
			if err := e.Client.SetPool(ctx, dir, pool); err != nil {
				return advise.Model{}, err
			}
			first := len(cells)
			m := measurer{c: e.Client, dir: dir, size: o.Size, cellTime: o.CellTime}
			for _, streams := range calStreams {
				for _, req := range calSeqSizes {
					w, err := m.seqWrite(ctx, streams, req)
					if err != nil {
						return advise.Model{}, err
					}
					r, err := m.seqRead(ctx, streams, req)
					if err != nil {
						return advise.Model{}, err
					}
					cells = append(cells,
						advise.Cell{Op: "write", Pattern: "seq", ReqSize: req, Streams: streams, StripeCount: sc, StripeSize: ss, MBps: w},
						advise.Cell{Op: "read", Pattern: "seq", ReqSize: req, Streams: streams, StripeCount: sc, StripeSize: ss, MBps: r})
					for _, ra := range calReadAheads {
						mr := m
						mr.c = raClients[ra]
						r, err := mr.seqRead(ctx, streams, req)
						if err != nil {
							return advise.Model{}, err
						}
						cells = append(cells, advise.Cell{Op: "read", Pattern: "seq", ReqSize: req, Streams: streams, StripeCount: sc, StripeSize: ss, ReadAhead: ra, MBps: r})
					}
				}
				for _, req := range calRandomSizes {
					r, err := m.random(ctx, streams, req, false)
					if err != nil {
						return advise.Model{}, err
					}
					w, err := m.random(ctx, streams, req, true)
					if err != nil {
						return advise.Model{}, err
					}
					cells = append(cells,
						advise.Cell{Op: "read", Pattern: "random", ReqSize: req, Streams: streams, StripeCount: sc, StripeSize: ss, MBps: r},
						advise.Cell{Op: "write", Pattern: "random", ReqSize: req, Streams: streams, StripeCount: sc, StripeSize: ss, MBps: w})
				}
			}
			for i := first; i < len(cells); i++ {
				cells[i].Pool = pool
			}
			if !o.Quiet {
				fmt.Fprintf(e.Stderr, "run %d, layout %s: %d cells measured\n", run+1, lay, len(cells))
			}
			if err := e.Client.RemoveAll(ctx, dir); err != nil {
				return advise.Model{}, err
			}
		}
		runs = append(runs, cells)
	}
	host, _ := os.Hostname()
	model := advise.Model{
		Machine:    fmt.Sprintf("%s, %d CPUs", host, runtime.NumCPU()),
		Date:       time.Now().UTC().Format(time.RFC3339),
		Command:    "sluice " + strings.Join(os.Args[1:], " "),
		Targets:    st.Targets,
		StripeSize: 1 << 20,
		Cells:      advise.Average(runs...),
	}
	for i := 1; i < len(runs); i++ {
		model.Noise = max(model.Noise, advise.MeasuredNoise(runs[0], runs[i]))
	}
	return model, nil
}

// measurer runs the calibration's cells in one directory: each stream
// has its own file there.
type measurer struct {
	c        *client.Client
	dir      string
	size     int64
	cellTime time.Duration
}

func (m *measurer) file(i int) string { return fmt.Sprintf("%s/s%d", m.dir, i) }

// parallel runs fn for each of n streams at once and returns the MB/s of
// the bytes they report over the time they took together.
func parallel(n int, fn func(i int) (int64, error)) (float64, error) {
	var total atomic.Int64
	var g errgroup.Group
	start := time.Now()
	for i := range n {
		g.Go(func() error {
			b, err := fn(i)
			total.Add(b)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return float64(total.Load()) / time.Since(start).Seconds() / 1e6, nil
}

// seqWrite writes each stream's file whole in req-sized writes and closes
// it (durable).
func (m *measurer) seqWrite(ctx context.Context, streams int, req int64) (float64, error) {
	buf := make([]byte, req)
	fillRandom(buf, uint64(req))
	return parallel(streams, func(i int) (int64, error) {
		f, err := m.c.Create(ctx, m.file(i))
		if err != nil {
			return 0, err
		}
		for off := int64(0); off < m.size; off += req {
			if _, err := f.WriteAt(buf[:min(req, m.size-off)], off); err != nil {
				f.Close()
				return 0, err
			}
		}
		return m.size, f.Close()
	})
}

// seqRead reads each stream's file whole in req-sized reads.
func (m *measurer) seqRead(ctx context.Context, streams int, req int64) (float64, error) {
	return parallel(streams, func(i int) (int64, error) {
		f, err := m.c.Open(ctx, m.file(i))
		if err != nil {
			return 0, err
		}
		defer f.Close()
		buf := make([]byte, req)
		var n int64
		for off := int64(0); off < m.size; off += req {
			k, err := f.ReadAt(buf, off)
			n += int64(k)
			if err != nil && err != io.EOF {
				return n, err
			}
		}
		return n, nil
	})
}

// random reads or writes req-sized blocks at random aligned offsets of
// each stream's file for the cell's time (writes then close: durable).
func (m *measurer) random(ctx context.Context, streams int, req int64, write bool) (float64, error) {
	return parallel(streams, func(i int) (int64, error) {
		flag := client.O_RDONLY
		if write {
			flag = client.O_RDWR
		}
		f, err := m.c.OpenFile(ctx, m.file(i), flag, 0)
		if err != nil {
			return 0, err
		}
		buf := make([]byte, req)
		fillRandom(buf, uint64(i))
		rng := rand.New(rand.NewPCG(uint64(i), uint64(req)))
		blocks := max(1, m.size/req)
		var n int64
		start := time.Now()
		for time.Since(start) < m.cellTime {
			off := rng.Int64N(blocks) * req
			var k int
			if write {
				k, err = f.WriteAt(buf, off)
			} else {
				k, err = f.ReadAt(buf, off)
			}
			n += int64(k)
			if err != nil && err != io.EOF {
				f.Close()
				return n, err
			}
		}
		return n, f.Close()
	})
}

func fillRandom(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

// AdviseOptions are the flags of `sluice advise`.
type AdviseOptions struct {
	Dir   string // the workload's directory (default: the recording's)
	Model string // a model file from calibrate ("": the built-in one)
	Apply bool
	Check bool
	JSON  bool
	// CheckBytes bounds the bytes a replay moves; Scratch is where its
	// files go (created, then removed).
	CheckBytes int64
	Scratch    string
}

// AdviseResult is what `sluice advise --json` prints.
type AdviseResult struct {
	Recording string          `json:"recording"`
	Dir       string          `json:"dir"`
	Workload  advise.Workload `json:"workload"`
	Layout    advise.Layout   `json:"layout"`
	Model     string          `json:"model"`
	Advice    []advise.Advice `json:"advice"`
	Applied   bool            `json:"applied,omitempty"`
	Check     *CheckResult    `json:"check,omitempty"`
}

// CheckResult is a replay's measurement: the recorded workload replayed on
// copies of its files with the current configuration (layout, client
// read-ahead) and with the compared one.
type CheckResult struct {
	From, To          CheckConfig
	FromMBps, ToMBps  float64 // measured
	Measured          float64 // ToMBps / FromMBps
	Predicted         float64 // the model's ratio
	Bytes             int64   // moved by each replay
	Streams, Files    int
	Workers           int
	CompareWhenNoGain bool `json:",omitempty"` // no change was advised: To is the best alternative layout
}

// CheckConfig is what a replay runs with.
type CheckConfig struct {
	Layout    advise.Layout
	ReadAhead int64 // 0: the default
	// Mount: the replay goes through a FUSE mount that the check makes,
	// with the kernel's write-back cache if WritebackCache (else through
	// the client library).
	Mount          bool `json:",omitempty"`
	WritebackCache bool `json:",omitempty"`
}

func (c CheckConfig) String() string {
	s := c.Layout.String()
	if c.ReadAhead != 0 {
		ra := "off"
		if c.ReadAhead > 0 {
			ra = profile.Size(c.ReadAhead)
		}
		s += ", read-ahead " + ra
	}
	switch {
	case c.Mount && c.WritebackCache:
		s += ", through a mount with the write-back cache"
	case c.Mount:
		s += ", through a mount"
	}
	return s
}

// LoadModel reads a model written by calibrate, or the built-in one.
func LoadModel(file string) (*advise.Model, string, error) {
	if file == "" {
		m, err := advise.DefaultModel()
		if err != nil {
			return nil, "", err
		}
		return m, "built-in (" + m.Machine + ", " + m.Date + ")", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, "", err
	}
	var m advise.Model
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, "", errs.New(errs.Invalid, "model %s: %v", file, err)
	}
	if len(m.Cells) == 0 || m.StripeSize <= 0 {
		return nil, "", errs.New(errs.Invalid, "model %s has no measurements", file)
	}
	return &m, file, nil
}

// Advise prints the advice for recording name, applies it (Apply) and
// measures it by a replay (Check).
func (e *Env) Advise(ctx context.Context, name string, o AdviseOptions) error {
	model, modelName, err := LoadModel(o.Model)
	if err != nil {
		return err
	}
	sess, rep, batches, err := e.loadProfile(ctx, name, o.Dir, 0)
	if err != nil {
		return err
	}
	dir := cmp.Or(o.Dir, sess.Dir, "/")
	if o.Apply && path.Clean("/"+dir) == "/" {
		return errs.New(errs.Invalid, "advise --apply: the recording has no directory; give --dir (the whole file system is not migrated)")
	}
	res := AdviseResult{Recording: name, Dir: dir, Workload: advise.WorkloadOf(&rep), Model: modelName}
	// The layout the workload ran on: its busiest file's, else its
	// directory's default.
	lp := dir
	if len(rep.Hot) > 0 && rep.Hot[0].Path != "" {
		lp = rep.Hot[0].Path
	}
	lay, err := e.Client.GetLayout(ctx, lp)
	if err != nil {
		return err
	}
	facts, err := e.adviseFacts(ctx, dir)
	if err != nil {
		return err
	}
	res.Layout = advise.Layout{StripeCount: lay.StripeCount, StripeSize: lay.StripeSize, Pool: lay.Pool}
	if lp != dir {
		// A file's layout names its chains, not a pool: the pool is its
		// directory's.
		dl, err := e.Client.GetLayout(ctx, dir)
		if err != nil {
			return err
		}
		res.Layout.Pool = dl.Pool
	}
	if res.Layout.StripeCount == 0 {
		res.Layout.StripeCount = facts.Targets // a directory's default: every target
	}
	if res.Layout.StripeSize == 0 {
		res.Layout.StripeSize = model.StripeSize
	}
	res.Advice = advise.Advise(res.Workload, res.Layout, facts, model)
	if len(lay.Components) > 0 {
		// The model measures plain layouts, and a progressive file
		// cannot be migrated yet (ADR 0021).
		res.Advice[0] = advise.Advice{Setting: "layout", From: "progressive", Reason: "the files have a progressive layout (extents), which the advisor does not model: no change"}
	}
	layAdv, raAdv := res.Advice[0], res.Advice[1]
	if o.Apply && layAdv.Change() {
		if err := e.applyLayout(ctx, dir, *layAdv.Layout, facts); err != nil {
			return err
		}
		res.Applied = true
	}
	if o.Check {
		from := CheckConfig{Layout: res.Layout}
		to := from
		compare := false
		if layAdv.Change() {
			to.Layout = *layAdv.Layout
		}
		if raAdv.Change() {
			to.ReadAhead = raAdv.ReadAhead
		}
		wbAdv := res.Advice[4]
		if wbAdv.Change() {
			// Both replays through mounts, as the workload ran.
			from.Mount, to.Mount, to.WritebackCache = true, true, true
		}
		if to == from {
			// No change advised: measure the alternative layout the
			// model ranks best, to show whether it would have helped.
			if l, ok := bestOther(model, res.Workload, res.Layout, facts); ok {
				to.Layout, compare = l, true
			}
		}
		if to != from {
			chk, err := e.replayCheck(ctx, batches, rep, from, to, o)
			if err != nil {
				return err
			}
			chk.CompareWhenNoGain = compare
			chk.Predicted = 1
			if from.Layout != to.Layout || from.ReadAhead != to.ReadAhead {
				chk.Predicted = 0
				if p1, ok1 := model.PredictWith(res.Workload, from.Layout, from.ReadAhead); ok1 {
					if p2, ok2 := model.PredictWith(res.Workload, to.Layout, to.ReadAhead); ok2 {
						chk.Predicted = p2 / p1
					}
				}
			}
			if wbAdv.Change() {
				chk.Predicted *= wbAdv.Predicted
			}
			res.Check = chk
		}
	}
	if o.JSON {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(&res)
	}
	w := res.Workload
	fmt.Fprintf(e.Stdout, "recording %s, directory %s: %s (%s %s, requests of %s, %.1f in flight, files of %s)\n",
		name, dir, w.Kind, w.Pattern, w.Op, profile.Size(w.ReqSize), w.Streams, profile.Size(w.FileSpan))
	fmt.Fprintf(e.Stdout, "layout: %s (stripe count x size); %d targets allowed; model: %s\n", res.Layout, facts.Targets, modelName)
	for _, a := range res.Advice {
		switch {
		case a.Setting == "qos-class":
			fmt.Fprintf(e.Stdout, "qos-class: %s (%s; SLUICE_QOS_CLASS=%s for the job's clients)\n", a.To, a.Reason, a.To)
		case a.Change() && a.Setting == "client-read-ahead":
			fmt.Fprintf(e.Stdout, "%s: %s -> %s, predicted %.2fx (%s; sluice mount --client-read-ahead %d, client.Options.ReadAhead)\n", a.Setting, a.From, a.To, a.Predicted, a.Reason, a.ReadAhead)
		case a.Change():
			fmt.Fprintf(e.Stdout, "%s: %s -> %s, predicted %.2fx (%s)\n", a.Setting, a.From, a.To, a.Predicted, a.Reason)
		default:
			fmt.Fprintf(e.Stdout, "%s: keep %s (%s)\n", a.Setting, a.From, a.Reason)
		}
	}
	if res.Applied {
		fmt.Fprintf(e.Stdout, "applied: %s's layout and its files are now %s\n", dir, layAdv.To)
	}
	if c := res.Check; c != nil {
		what := "advised"
		if c.CompareWhenNoGain {
			what = "best alternative"
		}
		fmt.Fprintf(e.Stdout, "check: replay of %s in %d streams over %d files, %d at once: %s %.0f MB/s, %s (%s) %.0f MB/s: measured %.2fx, predicted %.2fx\n",
			profile.Size(c.Bytes), c.Streams, c.Files, c.Workers, c.From, c.FromMBps, c.To, what, c.ToMBps, c.Measured, c.Predicted)
	}
	return nil
}

// adviseFacts finds the targets new files under dir may use, the pools
// there are (targets and free bytes) and the bytes of dir's files (what
// a layout change migrates).
func (e *Env) adviseFacts(ctx context.Context, dir string) (advise.Facts, error) {
	st, err := e.Client.Statfs(ctx)
	if err != nil {
		return advise.Facts{}, err
	}
	f := advise.Facts{Targets: st.Targets, AllTargets: st.Targets, Pools: map[string]advise.PoolFacts{}}
	lay, err := e.Client.GetLayout(ctx, dir)
	if err != nil {
		return f, err
	}
	pools, err := e.Client.Pools(ctx)
	if err != nil {
		return f, err
	}
	for _, p := range pools {
		f.Pools[p.Name] = advise.PoolFacts{Targets: len(p.Targets), Free: max(p.Capacity-p.Used, 0)}
		if p.Name == lay.Pool {
			f.Targets = len(p.Targets)
		}
	}
	f.Sizes, f.Bytes, err = e.treeSizes(ctx, dir)
	return f, err
}

// treeSizes returns the sizes of the regular files below dir and their
// sum.
func (e *Env) treeSizes(ctx context.Context, dir string) ([]int64, int64, error) {
	var sizes []int64
	var bytes int64
	err := e.Client.Walk(ctx, dir, func(_ string, fi *client.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			sizes = append(sizes, fi.Size())
			bytes += fi.Size()
		}
		return err
	})
	return sizes, bytes, err
}

// clientLayout is an advised layout as the client library sets it on a
// directory (with SetLayout, then SetPool for its pool): plain, or
// progressive with the head's extent first.
func clientLayout(l advise.Layout) client.Layout {
	if l.HeadEnd <= 0 {
		return client.Layout{StripeCount: l.StripeCount, StripeSize: l.StripeSize}
	}
	return client.Layout{Components: []client.LayoutComponent{
		{End: l.HeadEnd, StripeSize: l.StripeSize, StripeCount: l.HeadStripeCount, Pool: l.HeadPool},
		{StripeSize: l.StripeSize, StripeCount: l.StripeCount, Pool: l.Pool},
	}}
}

// poolFree returns the free bytes of pool name ("": the file system's).
func (e *Env) poolFree(ctx context.Context, name string) (int64, error) {
	if name == "" {
		st, err := e.Client.Statfs(ctx)
		if err != nil {
			return 0, err
		}
		return st.Free, nil
	}
	pools, err := e.Client.Pools(ctx)
	if err != nil {
		return 0, err
	}
	i := slices.IndexFunc(pools, func(p client.PoolInfo) bool { return p.Name == name })
	if i < 0 {
		return 0, errs.New(errs.NotFound, "no pool %q", name)
	}
	return max(pools[i].Capacity-pools[i].Used, 0), nil
}

// bestOther returns the layout other than cur the model predicts best for
// w among those the facts allow.
func bestOther(m *advise.Model, w advise.Workload, cur advise.Layout, f advise.Facts) (advise.Layout, bool) {
	var best advise.Layout
	bestMB := 0.0
	pooled := m.Pooled()
	for _, l := range m.Layouts() {
		if !pooled {
			l.Pool = cur.Pool
		}
		if l == cur || !f.Allows(l, cur.Pool) {
			continue
		}
		if p, ok := m.Predict(w, l); ok && p > bestMB {
			best, bestMB = l, p
		}
	}
	return best, bestMB > 0
}

// applyLayout gives dir's new files layout l (stripe count, size and
// pool, or a progressive layout) and migrates its files (sluice migrate
// -r), after checking that the copies of files of the given sizes (f's,
// read by adviseFacts) fit in the free space of the pools they go to.
func (e *Env) applyLayout(ctx context.Context, dir string, l advise.Layout, f advise.Facts) error {
	need := map[string]int64{l.Pool: f.Bytes}
	if l.HeadEnd > 0 {
		head := advise.HeadBytes(f.Sizes, l.HeadEnd)
		need[l.Pool] -= head
		need[l.HeadPool] += head
	}
	for pool, n := range need {
		free, err := e.poolFree(ctx, pool)
		if err != nil {
			return fmt.Errorf("advise --apply: %w", err)
		}
		if n > free {
			return errs.New(errs.NoSpace, "advise --apply: migrating %s needs %s free for the copies in %s, which has %s", dir, profile.Size(n), cmp.Or(pool, "the file system"), profile.Size(free))
		}
	}
	cur, err := e.Client.GetLayout(ctx, dir)
	if err != nil {
		return err
	}
	nl := clientLayout(l)
	cur.StripeCount, cur.StripeSize, cur.Components = nl.StripeCount, nl.StripeSize, nl.Components
	if err := e.Client.SetLayout(ctx, dir, cur); err != nil {
		return err
	}
	if err := e.Client.SetPool(ctx, dir, l.Pool); err != nil {
		return err
	}
	spec := client.MigrateSpec{StripeCount: nl.StripeCount, StripeSize: nl.StripeSize, Pool: l.Pool, Components: nl.Components}
	return e.Migrate(ctx, MigrateArgs{Paths: []string{dir}, Recursive: true, Spec: spec, Quiet: true})
}
