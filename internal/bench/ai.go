package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/internal/pause"
)

// TrainingConfig configures Train: an emulation of a training job in the
// spirit of MLPerf Storage. Each simulated accelerator has a data loader
// with ReaderThreads threads that read whole samples (files) into batches
// of BatchSize, at most Prefetch batches ahead; the accelerator takes a
// batch, "computes" for Compute (a sleep) and takes the next. It is busy
// (utilized) only while computing.
type TrainingConfig struct {
	Accelerators  int
	Samples       int // files in the data set
	SampleSize    SizeDist
	BatchSize     int
	ReaderThreads int // per accelerator
	Prefetch      int // batches a loader may have ready ahead
	Compute       time.Duration
	Steps         int // batches each accelerator trains on
	// FindMax searches for the largest number of accelerators whose
	// utilization stays at least MinUtilization (default 0.9).
	FindMax        bool
	MinUtilization float64
	// MaxAccelerators bounds the search (default 256).
	MaxAccelerators int
	Dir             string
	Keep            bool
	// Dataset, when set, is an existing directory whose regular files
	// (sorted by name; Samples and SampleSize are ignored) are the data
	// set: nothing is written or removed, and the samples are read
	// without the stamp checks (they are someone else's files). It is how
	// a data set released to the object tier is trained on.
	Dataset string
	// Epochs, when set, replaces Steps: each trial reads every sample
	// of the data set Epochs times (each accelerator takes the batches
	// of its share, rounded up).
	Epochs int
	// Progress as in Config: the phase is "train" (samples read).
	Progress func(phase string, done, total int64)
}

// DefaultTrainingConfig returns the CLI defaults: 150 KiB images (like
// ResNet-50 on ImageNet).
func DefaultTrainingConfig() TrainingConfig {
	return TrainingConfig{
		Accelerators: 4, Samples: 4096, SampleSize: SizeDist{150 << 10, 150 << 10},
		BatchSize: 32, ReaderThreads: 4, Prefetch: 2, Compute: 20 * time.Millisecond, Steps: 50,
		MinUtilization: 0.9, MaxAccelerators: 256, Dir: "sluice-bench",
	}
}

func (c *TrainingConfig) setDefaults() {
	d := DefaultTrainingConfig()
	for _, p := range []struct{ v, d *int }{
		{&c.Accelerators, &d.Accelerators}, {&c.Samples, &d.Samples}, {&c.BatchSize, &d.BatchSize},
		{&c.ReaderThreads, &d.ReaderThreads}, {&c.Prefetch, &d.Prefetch}, {&c.Steps, &d.Steps},
		{&c.MaxAccelerators, &d.MaxAccelerators},
	} {
		if *p.v == 0 {
			*p.v = *p.d
		}
	}
	if c.SampleSize.Max == 0 {
		c.SampleSize = d.SampleSize
	}
	if c.Compute == 0 {
		c.Compute = d.Compute
	}
	if c.MinUtilization == 0 {
		c.MinUtilization = d.MinUtilization
	}
	if c.Dir == "" {
		c.Dir = d.Dir
	}
}

// TrainingTrial is one run with a number of accelerators.
type TrainingTrial struct {
	Accelerators int     `json:"accelerators"`
	Utilization  float64 `json:"utilization"`
	Seconds      float64 `json:"seconds"`
	// SamplesPerSec and GiBps are the loaders' read rate.
	SamplesPerSec float64 `json:"samples_per_sec"`
	GiBps         float64 `json:"gibs"`
}

// TrainingResult is the outcome of Train.
type TrainingResult struct {
	Params         string  `json:"params"`
	DatasetSeconds float64 `json:"dataset_seconds"`
	TrainingTrial
	// Trials are the runs of a --find-max search, in order.
	Trials []TrainingTrial `json:"trials,omitempty"`
	// MaxAccelerators is the largest number of accelerators kept at
	// MinUtilization or better (FindMax only; 0: not even one).
	MaxAccelerators int `json:"max_accelerators,omitempty"`
}

// Train writes the data set, then runs the training emulation (or, with
// FindMax, a search over the number of accelerators).
func Train(ctx context.Context, fsys FS, cfg TrainingConfig) (*TrainingResult, error) {
	cfg.setDefaults()
	if cfg.Accelerators < 1 || cfg.Samples < 1 || cfg.BatchSize < 1 || cfg.ReaderThreads < 1 ||
		cfg.Prefetch < 1 || cfg.Steps < 1 || cfg.SampleSize.Min < 1 {
		return nil, fmt.Errorf("bench: training: counts and sizes must be positive")
	}
	if cfg.Epochs < 0 {
		return nil, fmt.Errorf("bench: training: epochs must not be negative")
	}
	var ds *dataset
	if cfg.Dataset != "" {
		var err error
		if ds, err = openDataset(ctx, fsys, cfg.Dataset); err != nil {
			return nil, err
		}
		cfg.Samples = len(ds.names)
	}
	steps := fmt.Sprintf("steps=%d", cfg.Steps)
	if cfg.Epochs > 0 {
		steps = fmt.Sprintf("epochs=%d", cfg.Epochs)
	}
	res := &TrainingResult{Params: fmt.Sprintf("samples=%d size=%s batch=%d readers=%d prefetch=%d compute=%v %s",
		cfg.Samples, cfg.SampleSize, cfg.BatchSize, cfg.ReaderThreads, cfg.Prefetch, cfg.Compute, steps)}
	dir := cfg.Dataset
	if ds != nil {
		res.Params = fmt.Sprintf("dataset=%s (%d files, %s) batch=%d readers=%d prefetch=%d compute=%v %s",
			cfg.Dataset, len(ds.names), Size(ds.bytes), cfg.BatchSize, cfg.ReaderThreads, cfg.Prefetch, cfg.Compute, steps)
	} else {
		dir = path.Join(cfg.Dir, fmt.Sprintf("train-%d", time.Now().UnixNano()))
		start := time.Now()
		if err := writeDataset(ctx, fsys, dir, cfg); err != nil {
			fsys.RemoveAll(context.WithoutCancel(ctx), dir)
			return nil, err
		}
		res.DatasetSeconds = time.Since(start).Seconds()
		defer func() {
			if !cfg.Keep {
				fsys.RemoveAll(context.WithoutCancel(ctx), dir)
			}
		}()
	}
	if !cfg.FindMax {
		t, err := trainOnce(ctx, fsys, dir, ds, cfg, cfg.Accelerators)
		if err != nil {
			return nil, err
		}
		res.TrainingTrial = t
		return res, nil
	}
	trials, best, err := searchMax(cfg.MaxAccelerators, cfg.MinUtilization, func(n int) (TrainingTrial, error) {
		return trainOnce(ctx, fsys, dir, ds, cfg, n)
	})
	if err != nil {
		return nil, err
	}
	res.Trials, res.MaxAccelerators = trials, best
	for i, t := range trials { // the best trial, or the first if none was good
		if i == 0 || t.Accelerators == best {
			res.TrainingTrial = t
		}
	}
	return res, nil
}

// searchMax finds the largest number of accelerators, at most maxN, whose
// trial keeps utilization at minUtil or better: it doubles from 1 until a
// trial falls short, then bisects between the last good and the first bad
// count. It returns the trials in the order run and the largest good count
// (0: not even one). The search is a pure function of the trials' results
// (it assumes utilization does not grow with the count), so it is tested
// on made-up ones.
func searchMax(maxN int, minUtil float64, trial func(n int) (TrainingTrial, error)) (trials []TrainingTrial, best int, err error) {
	try := func(n int) (bool, error) {
		t, err := trial(n)
		if err != nil {
			return false, err
		}
		trials = append(trials, t)
		ok := t.Utilization >= minUtil
		if ok && n > best {
			best = n
		}
		return ok, nil
	}
	good, bad := 0, 0
	for n := 1; n <= maxN; n *= 2 {
		ok, err := try(n)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			bad = n
			break
		}
		good = n
	}
	if bad == 0 {
		return trials, best, nil // the bound was reached
	}
	for bad-good > 1 {
		mid := (good + bad) / 2
		ok, err := try(mid)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			good = mid
		} else {
			bad = mid
		}
	}
	return trials, best, nil
}

func samplePath(dir string, i int) string { return path.Join(dir, fmt.Sprintf("sample.%07d", i)) }

// dataset is an existing data set (TrainingConfig.Dataset): its files'
// names, in name order, and sizes.
type dataset struct {
	names []string
	sizes []int64
	bytes int64
}

// openDataset lists the regular files of directory dir (not its
// subdirectories) and their sizes.
func openDataset(ctx context.Context, fsys FS, dir string) (*dataset, error) {
	ents, err := fsys.ReadDir(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("bench: training: data set %s: %w", dir, err)
	}
	ds := &dataset{}
	for _, e := range ents {
		if !e.IsDir {
			ds.names = append(ds.names, path.Join(dir, e.Name))
		}
	}
	if len(ds.names) == 0 {
		return nil, fmt.Errorf("bench: training: data set %s has no files", dir)
	}
	slices.Sort(ds.names)
	ds.sizes = make([]int64, len(ds.names))
	const lookups = 16
	err = parallel(ctx, lookups, func(ctx context.Context, w int) error {
		for i := w; i < len(ds.names); i += lookups {
			n, err := fsys.Stat(ctx, ds.names[i])
			if err != nil {
				return fmt.Errorf("bench: training: data set: %w", err)
			}
			ds.sizes[i] = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, n := range ds.sizes {
		ds.bytes += n
	}
	return ds, nil
}

// readWhole reads a file of size bytes whole in reads of len(buf) bytes,
// handing each to check (when not nil) with its offset.
func readWhole(ctx context.Context, fsys FS, name string, size int64, buf []byte, check func(p []byte, off int64) error) error {
	f, err := fsys.Open(ctx, name)
	if err != nil {
		return err
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		if ctx.Err() != nil {
			return closeErr(f, ctx.Err())
		}
		n := min(int64(len(buf)), size-off)
		if err := readFull(f, buf[:n], off); err != nil {
			return closeErr(f, fmt.Errorf("%s: %w", name, err))
		}
		if check != nil {
			if err := check(buf[:n], off); err != nil {
				return closeErr(f, err)
			}
		}
	}
	return f.Close()
}

func writeDataset(ctx context.Context, fsys FS, dir string, cfg TrainingConfig) error {
	if err := fsys.MkdirAll(ctx, dir); err != nil {
		return fmt.Errorf("bench: training: create %s: %w", dir, err)
	}
	const writers = 8
	return parallel(ctx, writers, func(ctx context.Context, w int) error {
		buf := fill(min(cfg.SampleSize.Max, 4<<20))
		for i := w; i < cfg.Samples; i += writers {
			if err := writeStamped(ctx, fsys, samplePath(dir, i), i, cfg.SampleSize.Of(i), buf, false); err != nil {
				return fmt.Errorf("bench: training: write data set: %w", err)
			}
		}
		return nil
	})
}

// writeStamped writes size bytes to a new file in transfers of len(buf),
// each stamped with the writer w and its offset.
func writeStamped(ctx context.Context, fsys FS, name string, w int, size int64, buf []byte, sync bool) error {
	f, err := fsys.Create(ctx, name)
	if err != nil {
		return err
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		if ctx.Err() != nil {
			return closeErr(f, ctx.Err())
		}
		n := min(int64(len(buf)), size-off)
		if n >= stampSize {
			stamp(buf, w, off)
		}
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return closeErr(f, fmt.Errorf("write %s at %d: %w", name, off, err))
		}
	}
	if sync {
		return closeErr(f, f.Sync())
	}
	return f.Close()
}

// readStamped reads a file written by writeStamped and checks its stamps.
func readStamped(ctx context.Context, fsys FS, name string, w int, size int64, buf []byte) error {
	return readWhole(ctx, fsys, name, size, buf, func(p []byte, off int64) error {
		if len(p) < stampSize {
			return nil
		}
		return checkStamp(p, name, w, off)
	})
}

// trainOnce runs n accelerators for cfg.Steps batches each (or the
// batches of cfg.Epochs epochs), reading the data set written to dir or,
// when ds is not nil, ds.
func trainOnce(ctx context.Context, fsys FS, dir string, ds *dataset, cfg TrainingConfig, n int) (TrainingTrial, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	perm := rand.New(rand.NewPCG(uint64(n), 7)).Perm(cfg.Samples)
	if cfg.Epochs > 0 {
		cfg.Steps = epochSteps(cfg.Epochs, cfg.Samples, n, cfg.BatchSize)
	}
	perAcc := int64(cfg.Steps * cfg.BatchSize)
	read := func(i int, buf []byte) (int64, error) {
		if ds != nil {
			return ds.sizes[i], readWhole(ctx, fsys, ds.names[i], ds.sizes[i], buf, nil)
		}
		size := cfg.SampleSize.Of(i)
		return size, readStamped(ctx, fsys, samplePath(dir, i), i, size, buf)
	}
	bufSize := min(cfg.SampleSize.Max, 4<<20)
	if ds != nil {
		bufSize = 4 << 20
		if m := slices.Max(ds.sizes); m < bufSize {
			bufSize = max(m, 1)
		}
	}
	var (
		mu    sync.Mutex
		bytes int64
		first error
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
			cancel()
		}
		mu.Unlock()
	}
	var compute time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for a := range n {
		wg.Go(func() {
			batches := make(chan struct{}, cfg.Prefetch)
			jobs := make(chan int)
			doneSample := make(chan int64)
			var loaders sync.WaitGroup
			// Feed the sample indices of this accelerator's shard.
			loaders.Go(func() {
				defer close(jobs)
				for k := range perAcc {
					i := perm[(int64(a)+k*int64(n))%int64(len(perm))]
					select {
					case jobs <- i:
					case <-ctx.Done():
						return
					}
				}
			})
			var readers sync.WaitGroup
			for range cfg.ReaderThreads {
				readers.Go(func() {
					buf := make([]byte, bufSize)
					for i := range jobs {
						size, err := read(i, buf)
						if err != nil {
							fail(fmt.Errorf("bench: training: %w", err))
							return
						}
						select {
						case doneSample <- size:
						case <-ctx.Done():
							return
						}
					}
				})
			}
			loaders.Go(func() { readers.Wait(); close(doneSample) })
			// Assemble batches: one per BatchSize samples read.
			loaders.Go(func() {
				defer close(batches)
				var got int
				var nbytes int64
				for size := range doneSample {
					got++
					nbytes += size
					if got%cfg.BatchSize == 0 {
						select {
						case batches <- struct{}{}:
						case <-ctx.Done():
						}
					}
				}
				mu.Lock()
				bytes += nbytes
				mu.Unlock()
			})
			var busy time.Duration
			for range cfg.Steps {
				if _, ok := <-batches; !ok {
					break
				}
				t := time.Now()
				_ = pause.For(ctx, cfg.Compute) // ctx's end shows below
				busy += time.Since(t)
			}
			for range batches {
			}
			loaders.Wait()
			mu.Lock()
			compute += busy
			mu.Unlock()
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if first != nil {
		return TrainingTrial{}, first
	}
	if err := ctx.Err(); err != nil {
		return TrainingTrial{}, err
	}
	samples := float64(perAcc) * float64(n)
	if cfg.Progress != nil {
		cfg.Progress(fmt.Sprintf("train n=%d", n), int64(samples), int64(samples))
	}
	return TrainingTrial{
		Accelerators:  n,
		Utilization:   compute.Seconds() / (wall.Seconds() * float64(n)),
		Seconds:       wall.Seconds(),
		SamplesPerSec: samples / wall.Seconds(),
		GiBps:         float64(bytes) / wall.Seconds() / (1 << 30),
	}, nil
}

// epochSteps is the batches each of n accelerators takes for the data set
// of samples to be read epochs times, rounded up.
func epochSteps(epochs, samples, n, batch int) int {
	per := n * batch
	return max((epochs*samples+per-1)/per, 1)
}

// CheckpointConfig configures Checkpoint, shaped as a PyTorch DCP save:
// Writers each write a shard of ShardSize bytes (in Transfer-sized
// writes) into a new directory and fsync it; then ".metadata.tmp" is
// written, fsynced and renamed to ".metadata", the commit.
type CheckpointConfig struct {
	Writers   int
	ShardSize int64
	// TotalSize, when set, overrides ShardSize: TotalSize / Writers.
	TotalSize int64
	Transfer  int64
	Dir       string
	Keep      bool
	// ColdRestore drops the machine's page cache (sync, then
	// /proc/sys/vm/drop_caches; root only) before the restore, so that
	// the restore reads from the disks, as after a restart.
	ColdRestore bool
}

// DefaultCheckpointConfig returns the CLI defaults.
func DefaultCheckpointConfig() CheckpointConfig {
	return CheckpointConfig{Writers: 8, ShardSize: 128 << 20, Transfer: 4 << 20, Dir: "sluice-bench"}
}

// CheckpointResult is the outcome of Checkpoint.
type CheckpointResult struct {
	Params string `json:"params"`
	Bytes  int64  `json:"bytes"`
	// StallSeconds is the time from the first write until the writers
	// may go on: every shard's fsync and close and the commit's rename
	// returned (the training stall of a synchronous save).
	StallSeconds float64 `json:"stall_seconds"`
	// DurableSeconds is the time from the first write until the committed
	// checkpoint is durable: on a local directory when the fsyncs return,
	// under Sluice's absorb policy when the drain to the targets ends.
	DurableSeconds float64 `json:"durable_seconds"`
	WriteGiBps     float64 `json:"write_gibs"`
	// RestoreSeconds is the time to read every shard back (in parallel).
	RestoreSeconds float64 `json:"restore_seconds"`
	RestoreGiBps   float64 `json:"restore_gibs"`
	// Path is the checkpoint directory (removed unless Keep).
	Path string `json:"path"`
}

// DropCaches writes back dirty pages and drops the page cache, dentries
// and inodes of the whole machine (root only).
func DropCaches() error {
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		return fmt.Errorf("drop the page cache (needs root): %w", err)
	}
	return nil
}

// Checkpoint writes a checkpoint, makes it durable, and restores it.
func Checkpoint(ctx context.Context, fsys FS, cfg CheckpointConfig) (*CheckpointResult, error) {
	d := DefaultCheckpointConfig()
	if cfg.Writers == 0 {
		cfg.Writers = d.Writers
	}
	if cfg.ShardSize == 0 {
		cfg.ShardSize = d.ShardSize
	}
	if cfg.Transfer == 0 {
		cfg.Transfer = d.Transfer
	}
	if cfg.Dir == "" {
		cfg.Dir = d.Dir
	}
	if cfg.TotalSize > 0 && cfg.Writers > 0 {
		cfg.ShardSize = cfg.TotalSize / int64(cfg.Writers)
	}
	if cfg.Writers < 1 || cfg.ShardSize < 1 || cfg.Transfer < 1 {
		return nil, fmt.Errorf("bench: checkpoint: counts and sizes must be positive")
	}
	parent := path.Join(cfg.Dir, fmt.Sprintf("ckpt-%d", time.Now().UnixNano()))
	final := path.Join(parent, "step")
	res := &CheckpointResult{
		Params: fmt.Sprintf("writers=%d shard=%s transfer=%s", cfg.Writers, Size(cfg.ShardSize), Size(cfg.Transfer)),
		Bytes:  int64(cfg.Writers) * cfg.ShardSize, Path: final,
	}
	if err := fsys.MkdirAll(ctx, parent); err != nil {
		return nil, fmt.Errorf("bench: checkpoint: create %s: %w", parent, err)
	}
	defer func() {
		if !cfg.Keep {
			fsys.RemoveAll(context.WithoutCancel(ctx), parent)
		}
	}()
	shard := func(dir string, i int) string { return path.Join(dir, fmt.Sprintf("__%d_0.distcp", i)) }
	start := time.Now()
	if err := fsys.MkdirAll(ctx, final); err != nil {
		return nil, fmt.Errorf("bench: checkpoint: %w", err)
	}
	err := parallel(ctx, cfg.Writers, func(ctx context.Context, w int) error {
		return writeStamped(ctx, fsys, shard(final, w), w, cfg.ShardSize, fill(cfg.Transfer), true)
	})
	if err == nil {
		err = writeStamped(ctx, fsys, path.Join(final, ".metadata.tmp"), 0, 4096, fill(4096), true)
	}
	if err == nil {
		err = fsys.Rename(ctx, path.Join(final, ".metadata.tmp"), path.Join(final, ".metadata"))
	}
	if err == nil {
		err = fsys.SyncDir(ctx, final)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: checkpoint: %w", err)
	}
	res.StallSeconds = time.Since(start).Seconds()
	if d, ok := fsys.(Drainer); ok {
		if err := d.WaitDrained(ctx); err != nil {
			return nil, fmt.Errorf("bench: checkpoint: drain: %w", err)
		}
	}
	res.DurableSeconds = time.Since(start).Seconds()
	res.WriteGiBps = float64(res.Bytes) / res.DurableSeconds / (1 << 30)
	if cfg.ColdRestore {
		if err := DropCaches(); err != nil {
			return nil, fmt.Errorf("bench: checkpoint: cold restore: %w", err)
		}
		res.Params += " restore=cold"
	}
	start = time.Now()
	err = parallel(ctx, cfg.Writers, func(ctx context.Context, w int) error {
		return readStamped(ctx, fsys, shard(final, w), w, cfg.ShardSize, make([]byte, cfg.Transfer))
	})
	if err != nil {
		return nil, fmt.Errorf("bench: checkpoint restore: %w", err)
	}
	res.RestoreSeconds = time.Since(start).Seconds()
	res.RestoreGiBps = float64(res.Bytes) / res.RestoreSeconds / (1 << 30)
	return res, nil
}
