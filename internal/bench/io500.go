package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The IO500 phases, in the order IO500 runs them: all writes, find, then
// reads, stats and deletes.
var Phases = []string{
	"ior-easy-write", "mdtest-easy-write", "ior-hard-write", "mdtest-hard-write", "find",
	"ior-easy-read", "mdtest-easy-stat", "ior-hard-read", "mdtest-hard-stat",
	"mdtest-easy-delete", "mdtest-hard-read", "mdtest-hard-delete",
}

// needs maps a phase to the phase whose files it uses.
var needs = map[string]string{
	"ior-easy-read": "ior-easy-write", "ior-hard-read": "ior-hard-write",
	"mdtest-easy-stat": "mdtest-easy-write", "mdtest-easy-delete": "mdtest-easy-write",
	"mdtest-hard-stat": "mdtest-hard-write", "mdtest-hard-read": "mdtest-hard-write",
	"mdtest-hard-delete": "mdtest-hard-write",
}

// Config configures Run. Zero values take the defaults in DefaultConfig.
type Config struct {
	// Workers is the number of parallel workers (goroutines).
	Workers int
	// Dir is the directory, relative to the FS root, under which each run
	// makes its own run-<time> directory.
	Dir string
	// Phases selects phases by name or prefix ("ior-easy" selects its
	// write and read); empty: all of Phases. A phase that reads files
	// needs the phase that writes them.
	Phases []string
	// EasyTransfer and EasyBytes: ior-easy transfer size and bytes each
	// worker writes to its own file.
	EasyTransfer, EasyBytes int64
	// HardRecord and HardRecords: ior-hard record size and records each
	// worker writes, interleaved, into the one shared file.
	HardRecord  int64
	HardRecords int
	// MDEasyFiles: empty files each worker creates in its own directory.
	MDEasyFiles int
	// MDHardFiles and MDHardSize: files of MDHardSize bytes each worker
	// creates in the one shared directory.
	MDHardFiles int
	MDHardSize  int64
	// Keep leaves the run directory in place (for inspection).
	Keep bool
	// Progress, if set, is called about 5 times a second while a phase
	// runs, and once when it ends, with the units done (bytes or
	// operations) out of total (0 when unknown).
	Progress func(phase string, done, total int64) `json:"-"`
	// Pool, if set, runs the workers elsewhere (in other processes:
	// sluice bench --procs) instead of as goroutines. Run calls it once,
	// with its run directory, and closes the pool at the end. Setup,
	// timing and the find phase stay in the calling process.
	Pool func(ctx context.Context, runDir string) (WorkerPool, error) `json:"-"`
}

// WorkerPool runs the workers of each phase somewhere else.
type WorkerPool interface {
	// RunPhase runs phase's work for all workers and returns when every
	// one has finished; an error from any worker fails the phase.
	RunPhase(ctx context.Context, phase string) error
	// PIDs names the processes the workers run in.
	PIDs() []int
	Close() error
}

// DefaultConfig returns the defaults of the CLI, sized for real systems.
func DefaultConfig() Config {
	return Config{
		Workers: 4, Dir: "sluice-bench",
		EasyTransfer: 1 << 20, EasyBytes: 256 << 20,
		HardRecord: 47008, HardRecords: 2000,
		MDEasyFiles: 2000, MDHardFiles: 2000, MDHardSize: 3901,
	}
}

func (c *Config) setDefaults() {
	d := DefaultConfig()
	set := func(v *int64, dv int64) {
		if *v == 0 {
			*v = dv
		}
	}
	seti := func(v *int, dv int) {
		if *v == 0 {
			*v = dv
		}
	}
	seti(&c.Workers, d.Workers)
	seti(&c.HardRecords, d.HardRecords)
	seti(&c.MDEasyFiles, d.MDEasyFiles)
	seti(&c.MDHardFiles, d.MDHardFiles)
	set(&c.EasyTransfer, d.EasyTransfer)
	set(&c.EasyBytes, d.EasyBytes)
	set(&c.HardRecord, d.HardRecord)
	set(&c.MDHardSize, d.MDHardSize)
	if c.Dir == "" {
		c.Dir = d.Dir
	}
}

// Validate checks the configuration (after defaults).
func (c *Config) Validate() error {
	if c.Workers < 1 || c.EasyTransfer < 1 || c.EasyBytes < 1 || c.HardRecord < stampSize ||
		c.HardRecords < 1 || c.MDEasyFiles < 1 || c.MDHardFiles < 1 || c.MDHardSize < stampSize {
		return fmt.Errorf("bench: sizes and counts must be positive (records and md files at least %d bytes)", stampSize)
	}
	sel, err := c.selected()
	if err != nil {
		return err
	}
	for _, p := range sel {
		if w, ok := needs[p]; ok && !slices.Contains(sel, w) {
			return fmt.Errorf("bench: phase %s needs phase %s", p, w)
		}
	}
	return nil
}

// selected returns the selected phases in run order.
func (c *Config) selected() ([]string, error) {
	if len(c.Phases) == 0 {
		return Phases, nil
	}
	var out []string
	for _, want := range c.Phases {
		found := false
		for _, p := range Phases {
			if p == want || strings.HasPrefix(p, want+"-") {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("bench: unknown phase %q (phases: %s)", want, strings.Join(Phases, ", "))
		}
	}
	for _, p := range Phases {
		for _, want := range c.Phases {
			if p == want || strings.HasPrefix(p, want+"-") {
				out = append(out, p)
				break
			}
		}
	}
	return out, nil
}

// PhaseResult is the outcome of one phase.
type PhaseResult struct {
	Name string `json:"name"`
	// Unit is "GiB/s" for bandwidth phases and "kIOPS" for metadata phases.
	Unit    string  `json:"unit"`
	Value   float64 `json:"value"`
	Seconds float64 `json:"seconds"`
	Bytes   int64   `json:"bytes,omitempty"`
	Ops     int64   `json:"ops"`
	// Found is the number of files find matched.
	Found  int64  `json:"found,omitempty"`
	Params string `json:"params"`
}

// Score is computed like IO500's: the geometric mean of the bandwidth
// phases (GiB/s), of the metadata phases (kIOPS), and of those two.
type Score struct {
	BW    float64 `json:"bw_gibs"`
	MD    float64 `json:"md_kiops"`
	Total float64 `json:"total"`
	// Partial is set when not every IO500 phase ran.
	Partial bool `json:"partial,omitempty"`
}

// Result is the outcome of a run.
type Result struct {
	FS      string `json:"fs"`
	Workers int    `json:"workers"`
	Workdir string `json:"workdir"`
	// WorkerPIDs are the processes the IO500 workers ran in (--procs);
	// empty when they were goroutines of this process.
	WorkerPIDs []int             `json:"worker_pids,omitempty"`
	Phases     []PhaseResult     `json:"phases,omitempty"`
	Score      *Score            `json:"score,omitempty"`
	Training   *TrainingResult   `json:"training,omitempty"`
	Checkpoint *CheckpointResult `json:"checkpoint,omitempty"`
}

// Run runs the selected IO500 phases on fsys.
func Run(ctx context.Context, fsys FS, cfg Config) (*Result, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sel, _ := cfg.selected()
	r := &runner{fs: fsys, cfg: cfg, dir: path.Join(cfg.Dir, fmt.Sprintf("run-%d", time.Now().UnixNano()))}
	res := &Result{FS: fsys.Name(), Workers: cfg.Workers, Workdir: r.dir}
	if err := fsys.MkdirAll(ctx, r.dir); err != nil {
		return nil, fmt.Errorf("bench: create %s: %w", r.dir, err)
	}
	if cfg.Pool != nil {
		pool, err := cfg.Pool(ctx, r.dir)
		if err != nil {
			return nil, fmt.Errorf("bench: start workers: %w", err)
		}
		defer pool.Close()
		r.pool = pool
		res.WorkerPIDs = pool.PIDs()
	}
	var err error
	for _, p := range sel {
		var pr PhaseResult
		pr, err = r.phase(ctx, p)
		if err != nil {
			err = fmt.Errorf("bench: phase %s: %w", p, err)
			break
		}
		res.Phases = append(res.Phases, pr)
	}
	if !cfg.Keep {
		if rerr := fsys.RemoveAll(context.WithoutCancel(ctx), r.dir); rerr != nil && err == nil {
			err = fmt.Errorf("bench: remove %s: %w", r.dir, rerr)
		}
	}
	if err != nil {
		return res, err
	}
	res.Score = ComputeScore(res.Phases)
	return res, nil
}

// ComputeScore computes the IO500-style score of the phases; nil if there
// are none.
func ComputeScore(phases []PhaseResult) *Score {
	var bw, md []float64
	for _, p := range phases {
		if p.Unit == "GiB/s" {
			bw = append(bw, p.Value)
		} else {
			md = append(md, p.Value)
		}
	}
	if len(bw)+len(md) == 0 {
		return nil
	}
	s := &Score{BW: geomean(bw), MD: geomean(md), Partial: len(phases) != len(Phases)}
	switch {
	case len(bw) == 0:
		s.Total = s.MD
	case len(md) == 0:
		s.Total = s.BW
	default:
		s.Total = math.Sqrt(s.BW * s.MD)
	}
	return s
}

func geomean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range v {
		sum += math.Log(max(x, 1e-12))
	}
	return math.Exp(sum / float64(len(v)))
}

type runner struct {
	fs   FS
	cfg  Config
	dir  string
	done atomic.Int64 // progress of the running phase
	pool WorkerPool   // nil: workers are goroutines
}

func (r *runner) p(elem ...string) string { return path.Join(append([]string{r.dir}, elem...)...) }

// Paths of the files each phase uses.
func (r *runner) easyFile(w int) string { return r.p("ior-easy", fmt.Sprintf("file.%04d", w)) }
func (r *runner) hardFile() string      { return r.p("ior-hard", "file") }
func (r *runner) mdEasyDir(w int) string {
	return r.p("mdtest-easy", fmt.Sprintf("dir.%04d", w))
}
func (r *runner) mdEasyFile(w, i int) string {
	return path.Join(r.mdEasyDir(w), fmt.Sprintf("file.%07d", i))
}
func (r *runner) mdHardFile(w, i int) string {
	return r.p("mdtest-hard", fmt.Sprintf("file.%04d.%07d", w, i))
}

// peer is the worker whose files worker w reads back: the next one, so
// that no worker reads what it wrote itself (IO500's task shift).
func (r *runner) peer(w int) int { return (w + 1) % r.cfg.Workers }

func (r *runner) phase(ctx context.Context, name string) (PhaseResult, error) {
	c := &r.cfg
	W := int64(c.Workers)
	pr := PhaseResult{Name: name, Unit: "kIOPS"}
	var total int64
	var work func(ctx context.Context, w int) error
	var setup func(ctx context.Context) error
	switch name {
	case "ior-easy-write", "ior-easy-read":
		pr.Unit, pr.Bytes = "GiB/s", W*c.EasyBytes
		pr.Ops = W * ((c.EasyBytes + c.EasyTransfer - 1) / c.EasyTransfer)
		pr.Params = fmt.Sprintf("workers=%d transfer=%s bytes/worker=%s file per worker", W, Size(c.EasyTransfer), Size(c.EasyBytes))
		total = pr.Bytes
		if name == "ior-easy-write" {
			setup = func(ctx context.Context) error { return r.fs.MkdirAll(ctx, r.p("ior-easy")) }
			work = r.iorEasyWrite
		} else {
			work = r.iorEasyRead
		}
	case "ior-hard-write", "ior-hard-read":
		pr.Unit, pr.Ops = "GiB/s", W*int64(c.HardRecords)
		pr.Bytes = pr.Ops * c.HardRecord
		pr.Params = fmt.Sprintf("workers=%d record=%d records/worker=%d one shared file, interleaved", W, c.HardRecord, c.HardRecords)
		total = pr.Bytes
		if name == "ior-hard-write" {
			setup = func(ctx context.Context) error {
				if err := r.fs.MkdirAll(ctx, r.p("ior-hard")); err != nil {
					return err
				}
				f, err := r.fs.Create(ctx, r.hardFile())
				if err != nil {
					return err
				}
				return f.Close()
			}
			work = r.iorHardWrite
		} else {
			work = r.iorHardRead
		}
	case "mdtest-easy-write", "mdtest-easy-stat", "mdtest-easy-delete":
		pr.Ops = W * int64(c.MDEasyFiles)
		pr.Params = fmt.Sprintf("workers=%d files/worker=%d empty, directory per worker", W, c.MDEasyFiles)
		switch name {
		case "mdtest-easy-write":
			setup = func(ctx context.Context) error {
				for w := range c.Workers {
					if err := r.fs.MkdirAll(ctx, r.mdEasyDir(w)); err != nil {
						return err
					}
				}
				return nil
			}
			work = r.mdEasyWrite
		case "mdtest-easy-stat":
			work = r.mdEasyStat
		default:
			work = r.mdEasyDelete
		}
		total = pr.Ops
	case "mdtest-hard-write", "mdtest-hard-stat", "mdtest-hard-read", "mdtest-hard-delete":
		pr.Ops = W * int64(c.MDHardFiles)
		pr.Params = fmt.Sprintf("workers=%d files/worker=%d of %d bytes, one shared directory", W, c.MDHardFiles, c.MDHardSize)
		switch name {
		case "mdtest-hard-write":
			setup = func(ctx context.Context) error { return r.fs.MkdirAll(ctx, r.p("mdtest-hard")) }
			work = r.mdHardWrite
		case "mdtest-hard-stat":
			work = r.mdHardStat
		case "mdtest-hard-read":
			work = r.mdHardRead
		default:
			work = r.mdHardDelete
		}
		total = pr.Ops
	case "find":
		pr.Params = fmt.Sprintf("workers=%d -name *01* -size %dc over the whole tree", W, c.MDHardSize)
		start := time.Now()
		visited, found, err := r.find(ctx)
		if err != nil {
			return pr, err
		}
		pr.Seconds = time.Since(start).Seconds()
		pr.Ops, pr.Found = visited, found
		pr.Value = float64(visited) / pr.Seconds / 1000
		return pr, nil
	default:
		return pr, fmt.Errorf("bench: unknown phase %q", name)
	}
	if setup != nil {
		if err := setup(ctx); err != nil {
			return pr, err
		}
	}
	r.done.Store(0)
	stop := r.progress(name, total)
	start := time.Now()
	var err error
	if r.pool != nil {
		err = r.pool.RunPhase(ctx, name)
	} else {
		err = parallel(ctx, c.Workers, work)
	}
	pr.Seconds = time.Since(start).Seconds()
	stop()
	if err != nil {
		return pr, err
	}
	if pr.Unit == "GiB/s" {
		pr.Value = float64(pr.Bytes) / pr.Seconds / (1 << 30)
	} else {
		pr.Value = float64(pr.Ops) / pr.Seconds / 1000
	}
	return pr, nil
}

func (r *runner) report(name string, done, total int64) {
	if r.cfg.Progress != nil {
		r.cfg.Progress(name, done, total)
	}
}

// progress reports r.done until the returned stop is called.
func (r *runner) progress(name string, total int64) (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				r.report(name, r.done.Load(), total)
			case <-quit:
				return
			}
		}
	})
	return func() {
		close(quit)
		wg.Wait()
		done := r.done.Load()
		if total == 0 {
			total = done // now known
		}
		r.report(name, done, total)
	}
}

// parallel runs fn for workers 0..n-1 at once and returns the first error;
// an error cancels the others' context.
func parallel(ctx context.Context, n int, fn func(ctx context.Context, w int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for w := range n {
		wg.Go(func() {
			if err := fn(ctx, w); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		})
	}
	wg.Wait()
	return first
}

// stampSize is the size of the stamp at the start of every transfer,
// record and small file: the writer and the offset (or index).
const stampSize = 16

func stamp(buf []byte, w int, off int64) {
	binary.LittleEndian.PutUint64(buf[0:], uint64(w))
	binary.LittleEndian.PutUint64(buf[8:], uint64(off))
}

func checkStamp(buf []byte, file string, w int, off int64) error {
	if len(buf) < stampSize {
		return fmt.Errorf("bench: %s: short read at %d", file, off)
	}
	gw, goff := binary.LittleEndian.Uint64(buf[0:]), binary.LittleEndian.Uint64(buf[8:])
	if gw != uint64(w) || goff != uint64(off) {
		return fmt.Errorf("bench: %s: data at %d was written by worker %d for offset %d, want worker %d offset %d", file, off, gw, goff, w, off)
	}
	return nil
}

// fill returns a buffer of n bytes of a fixed, not-all-zero pattern.
func fill(n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	return b
}

// readFull reads len(buf) bytes at off; io.EOF with a full buffer is fine.
func readFull(f File, buf []byte, off int64) error {
	n, err := f.ReadAt(buf, off)
	if n == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read %d bytes at %d: got %d: %w", len(buf), off, n, err)
}

func closeErr(f File, err error) error {
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (r *runner) iorEasyWrite(ctx context.Context, w int) error {
	c := &r.cfg
	f, err := r.fs.Create(ctx, r.easyFile(w))
	if err != nil {
		return err
	}
	buf := fill(c.EasyTransfer)
	for off := int64(0); off < c.EasyBytes; off += c.EasyTransfer {
		if ctx.Err() != nil {
			return closeErr(f, ctx.Err())
		}
		n := min(c.EasyTransfer, c.EasyBytes-off)
		stamp(buf, w, off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return closeErr(f, fmt.Errorf("write %s at %d: %w", r.easyFile(w), off, err))
		}
		r.done.Add(n)
	}
	return closeErr(f, f.Sync())
}

func (r *runner) iorEasyRead(ctx context.Context, w int) error {
	c := &r.cfg
	owner := r.peer(w)
	name := r.easyFile(owner)
	f, err := r.fs.Open(ctx, name)
	if err != nil {
		return err
	}
	buf := make([]byte, c.EasyTransfer)
	for off := int64(0); off < c.EasyBytes; off += c.EasyTransfer {
		if ctx.Err() != nil {
			return closeErr(f, ctx.Err())
		}
		n := min(c.EasyTransfer, c.EasyBytes-off)
		if err := readFull(f, buf[:n], off); err != nil {
			return closeErr(f, fmt.Errorf("%s: %w", name, err))
		}
		if n >= stampSize {
			if err := checkStamp(buf, name, owner, off); err != nil {
				return closeErr(f, err)
			}
		}
		r.done.Add(n)
	}
	return f.Close()
}

func (r *runner) hardOff(w, rec int) int64 {
	return (int64(rec)*int64(r.cfg.Workers) + int64(w)) * r.cfg.HardRecord
}

func (r *runner) iorHardWrite(ctx context.Context, w int) error {
	c := &r.cfg
	f, err := r.fs.OpenWrite(ctx, r.hardFile())
	if err != nil {
		return err
	}
	buf := fill(c.HardRecord)
	for rec := range c.HardRecords {
		if ctx.Err() != nil {
			return closeErr(f, ctx.Err())
		}
		off := r.hardOff(w, rec)
		stamp(buf, w, off)
		if _, err := f.WriteAt(buf, off); err != nil {
			return closeErr(f, fmt.Errorf("write %s at %d: %w", r.hardFile(), off, err))
		}
		r.done.Add(c.HardRecord)
	}
	return closeErr(f, f.Sync())
}

func (r *runner) iorHardRead(ctx context.Context, w int) error {
	c := &r.cfg
	owner := r.peer(w)
	f, err := r.fs.Open(ctx, r.hardFile())
	if err != nil {
		return err
	}
	buf := make([]byte, c.HardRecord)
	for rec := range c.HardRecords {
		if ctx.Err() != nil {
			return closeErr(f, ctx.Err())
		}
		off := r.hardOff(owner, rec)
		if err := readFull(f, buf, off); err != nil {
			return closeErr(f, fmt.Errorf("%s: %w", r.hardFile(), err))
		}
		if err := checkStamp(buf, r.hardFile(), owner, off); err != nil {
			return closeErr(f, err)
		}
		r.done.Add(c.HardRecord)
	}
	return f.Close()
}

// each runs fn for i in 0..n-1, counting progress, until an error.
func (r *runner) each(ctx context.Context, n int, fn func(i int) error) error {
	for i := range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(i); err != nil {
			return err
		}
		r.done.Add(1)
	}
	return nil
}

func (r *runner) mdEasyWrite(ctx context.Context, w int) error {
	return r.each(ctx, r.cfg.MDEasyFiles, func(i int) error {
		f, err := r.fs.Create(ctx, r.mdEasyFile(w, i))
		if err != nil {
			return err
		}
		return f.Close()
	})
}

func (r *runner) mdEasyStat(ctx context.Context, w int) error {
	owner := r.peer(w)
	return r.each(ctx, r.cfg.MDEasyFiles, func(i int) error {
		size, err := r.fs.Stat(ctx, r.mdEasyFile(owner, i))
		if err == nil && size != 0 {
			err = fmt.Errorf("bench: %s has %d bytes, want 0", r.mdEasyFile(owner, i), size)
		}
		return err
	})
}

func (r *runner) mdEasyDelete(ctx context.Context, w int) error {
	return r.each(ctx, r.cfg.MDEasyFiles, func(i int) error { return r.fs.Remove(ctx, r.mdEasyFile(w, i)) })
}

func (r *runner) mdHardWrite(ctx context.Context, w int) error {
	buf := fill(r.cfg.MDHardSize)
	return r.each(ctx, r.cfg.MDHardFiles, func(i int) error {
		name := r.mdHardFile(w, i)
		f, err := r.fs.Create(ctx, name)
		if err != nil {
			return err
		}
		stamp(buf, w, int64(i))
		if _, err := f.WriteAt(buf, 0); err != nil {
			return closeErr(f, fmt.Errorf("write %s: %w", name, err))
		}
		return f.Close()
	})
}

func (r *runner) mdHardStat(ctx context.Context, w int) error {
	owner := r.peer(w)
	return r.each(ctx, r.cfg.MDHardFiles, func(i int) error {
		size, err := r.fs.Stat(ctx, r.mdHardFile(owner, i))
		if err == nil && size != r.cfg.MDHardSize {
			err = fmt.Errorf("bench: %s has %d bytes, want %d", r.mdHardFile(owner, i), size, r.cfg.MDHardSize)
		}
		return err
	})
}

func (r *runner) mdHardRead(ctx context.Context, w int) error {
	owner := r.peer(w)
	buf := make([]byte, r.cfg.MDHardSize)
	return r.each(ctx, r.cfg.MDHardFiles, func(i int) error {
		name := r.mdHardFile(owner, i)
		f, err := r.fs.Open(ctx, name)
		if err != nil {
			return err
		}
		if err := readFull(f, buf, 0); err != nil {
			return closeErr(f, fmt.Errorf("%s: %w", name, err))
		}
		return closeErr(f, checkStamp(buf, name, owner, int64(i)))
	})
}

func (r *runner) mdHardDelete(ctx context.Context, w int) error {
	return r.each(ctx, r.cfg.MDHardFiles, func(i int) error { return r.fs.Remove(ctx, r.mdHardFile(w, i)) })
}

// find walks the run directory with Workers goroutines sharing a queue of
// directories, and counts the files whose name contains "01" and whose
// size is MDHardSize (IO500's find: -name *01* -size 3901c). It returns
// the entries visited and the files matched.
func (r *runner) find(ctx context.Context) (visited, found int64, err error) {
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		queue   = []string{r.dir}
		busy    int
		first   error
		nvisit  atomic.Int64
		nfound  atomic.Int64
		workers = r.cfg.Workers
	)
	visit := func(dir string) ([]string, error) {
		ents, err := r.fs.ReadDir(ctx, dir)
		if err != nil {
			return nil, err
		}
		var sub []string
		for _, e := range ents {
			nvisit.Add(1)
			r.done.Add(1)
			p := path.Join(dir, e.Name)
			if e.IsDir {
				sub = append(sub, p)
				continue
			}
			if !strings.Contains(e.Name, "01") {
				continue
			}
			size, err := r.fs.Stat(ctx, p)
			if err != nil {
				return nil, err
			}
			if size == r.cfg.MDHardSize {
				nfound.Add(1)
			}
		}
		return sub, nil
	}
	r.done.Store(0)
	stop := r.progress("find", 0)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			mu.Lock()
			defer mu.Unlock()
			for {
				for len(queue) == 0 && busy > 0 && first == nil {
					cond.Wait()
				}
				if len(queue) == 0 || first != nil {
					cond.Broadcast()
					return
				}
				dir := queue[len(queue)-1]
				queue = queue[:len(queue)-1]
				busy++
				mu.Unlock()
				sub, err := visit(dir)
				mu.Lock()
				busy--
				if err != nil && first == nil {
					first = fmt.Errorf("find in %s: %w", dir, err)
				}
				queue = append(queue, sub...)
				cond.Broadcast()
			}
		})
	}
	wg.Wait()
	stop()
	return nvisit.Load(), nfound.Load(), first
}
