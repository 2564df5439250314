package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func small() Config {
	return Config{
		Workers: 3, Dir: "b", EasyTransfer: 4096, EasyBytes: 10000,
		HardRecord: 47008, HardRecords: 5, MDEasyFiles: 12, MDHardFiles: 11, MDHardSize: 3901, Keep: true,
	}
}

// TestWritePhasesLayout checks that the write phases leave the files they
// claim: counts, sizes, and who wrote which ior-hard record.
func TestWritePhasesLayout(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cfg := small()
	cfg.Phases = []string{"ior-easy-write", "ior-hard-write", "mdtest-easy-write", "mdtest-hard-write", "find"}
	res, err := Run(context.Background(), DirFS{root}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Phases) != 5 {
		t.Fatalf("ran %d phases, want 5", len(res.Phases))
	}
	dir := filepath.Join(root, res.Workdir)
	for w := range 3 {
		fi, err := os.Stat(filepath.Join(dir, "ior-easy", "file.000"+string(rune('0'+w))))
		if err != nil || fi.Size() != 10000 {
			t.Fatalf("ior-easy file of worker %d: %v, %v", w, fi, err)
		}
		ents, err := os.ReadDir(filepath.Join(dir, "mdtest-easy", "dir.000"+string(rune('0'+w))))
		if err != nil || len(ents) != 12 {
			t.Fatalf("mdtest-easy dir of worker %d: %d entries, %v", w, len(ents), err)
		}
	}
	hard, err := os.ReadFile(filepath.Join(dir, "ior-hard", "file"))
	if err != nil {
		t.Fatal(err)
	}
	if len(hard) != 3*5*47008 {
		t.Fatalf("ior-hard file has %d bytes, want %d", len(hard), 3*5*47008)
	}
	for rec := range 15 {
		off := rec * 47008
		if w := binary.LittleEndian.Uint64(hard[off:]); w != uint64(rec%3) {
			t.Fatalf("ior-hard record %d written by worker %d, want %d (interleaved)", rec, w, rec%3)
		}
	}
	ents, err := os.ReadDir(filepath.Join(dir, "mdtest-hard"))
	if err != nil || len(ents) != 33 {
		t.Fatalf("mdtest-hard: %d files in the shared dir, want 33 (%v)", len(ents), err)
	}
	wantFound := 0
	for _, e := range ents {
		fi, _ := e.Info()
		if fi.Size() != 3901 {
			t.Fatalf("%s has %d bytes", e.Name(), fi.Size())
		}
		if strings.Contains(e.Name(), "01") {
			wantFound++
		}
	}
	find := res.Phases[4]
	// Visited: 3 easy files + 1 hard file + 3 easy dirs + 36 easy files +
	// 33 hard files + the 4 phase directories.
	if find.Name != "find" || find.Found != int64(wantFound) || find.Ops != 3+1+3+36+33+4 {
		t.Fatalf("find: %+v, want found %d visited %d", find, wantFound, 3+1+3+36+33+4)
	}
}

func TestFullRunAndCleanup(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cfg := small()
	cfg.Keep = false
	var progressed []string
	cfg.Progress = func(phase string, done, total int64) {
		if done == total && (len(progressed) == 0 || progressed[len(progressed)-1] != phase) {
			progressed = append(progressed, phase)
		}
	}
	res, err := Run(context.Background(), DirFS{root}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Phases) != len(Phases) {
		t.Fatalf("%d phases, want %d", len(res.Phases), len(Phases))
	}
	for i, p := range res.Phases {
		if p.Name != Phases[i] || p.Value <= 0 || p.Seconds <= 0 {
			t.Errorf("phase %d: %+v", i, p)
		}
	}
	if s := res.Score; s == nil || s.Partial || s.BW <= 0 || s.MD <= 0 || s.Total <= 0 {
		t.Fatalf("score %+v", res.Score)
	}
	if len(progressed) != len(Phases) {
		t.Errorf("progress reported completion of %v", progressed)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "b"))
	if len(ents) != 0 {
		t.Fatalf("run directory left behind: %v", ents)
	}
	var sb strings.Builder
	if err := WriteTable(&sb, res); err != nil || !strings.Contains(sb.String(), "mdtest-hard-read") || !strings.Contains(sb.String(), "SCORE") {
		t.Fatalf("table: %v\n%s", err, sb.String())
	}
}

func TestReadDetectsWrongData(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cfg := small()
	cfg.Phases = []string{"ior-hard-write"}
	res, err := Run(context.Background(), DirFS{root}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Swap two records: the read phase must notice.
	p := filepath.Join(root, res.Workdir, "ior-hard", "file")
	b, _ := os.ReadFile(p)
	copy(b[47008:], b[:47008])
	os.WriteFile(p, b, 0o644)
	r := &runner{fs: DirFS{root}, cfg: cfg, dir: res.Workdir}
	r.cfg.setDefaults()
	if err := parallel(context.Background(), 3, r.iorHardRead); err == nil || !strings.Contains(err.Error(), "written by worker") {
		t.Fatalf("read of a corrupted shared file: %v", err)
	}
}

func TestScore(t *testing.T) {
	t.Parallel()
	s := ComputeScore([]PhaseResult{{Unit: "GiB/s", Value: 2}, {Unit: "GiB/s", Value: 8}, {Unit: "kIOPS", Value: 9}})
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(s.BW, 4) || !near(s.MD, 9) || !near(s.Total, 6) || !s.Partial {
		t.Fatalf("%+v", s)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		phases []string
		ok     bool
	}{
		{nil, true}, {[]string{"ior-easy"}, true}, {[]string{"mdtest-hard", "find"}, true},
		{[]string{"ior-easy-read"}, false}, {[]string{"nope"}, false}, {[]string{"mdtest-easy-stat"}, false},
	} {
		c := Config{Phases: tc.phases}
		c.setDefaults()
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("phases %v: %v", tc.phases, err)
		}
	}
}

func TestSizes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"150KiB": 150 << 10, "1M": 1 << 20, "47008": 47008, "2GB": 2e9, "140MiB": 140 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v", in, got, err)
		}
	}
	if _, err := ParseSize("3 parsecs"); err == nil {
		t.Error("bad unit accepted")
	}
	d, err := ParseSizeDist("100KiB-200KiB")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if s := d.Of(i); s < 100<<10 || s > 200<<10 {
			t.Fatalf("sample %d size %d out of range", i, s)
		}
	}
	if Size(150<<10).String() != "150KiB" || Size(47008).String() != "47008" {
		t.Fatal("Size.String")
	}
}

func TestTraining(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cfg := TrainingConfig{Accelerators: 2, Samples: 64, SampleSize: SizeDist{1000, 3000}, BatchSize: 4,
		ReaderThreads: 2, Compute: 5 * time.Millisecond, Steps: 10, Dir: "t"}
	res, err := Train(context.Background(), DirFS{root}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Accelerators != 2 || res.Utilization <= 0 || res.Utilization > 1 {
		t.Fatalf("%+v", res)
	}
	// 2 accelerators x 10 steps x 4 samples of 1000-3000 bytes.
	if got := res.SamplesPerSec * res.Seconds; got < 79.5 || got > 80.5 {
		t.Fatalf("read %.1f samples, want 80", got)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "t"))
	if len(ents) != 0 {
		t.Fatalf("data set left behind: %v", ents)
	}
}

// countFS counts the opens of each path.
type countFS struct {
	DirFS
	mu    sync.Mutex
	opens map[string]int
}

func (c *countFS) Open(ctx context.Context, p string) (File, error) {
	c.mu.Lock()
	c.opens[p]++
	c.mu.Unlock()
	return c.DirFS.Open(ctx, p)
}

// TestTrainingDataset trains on an existing directory (--dataset) for two
// epochs: every file is read at least twice, whole, files of a
// subdirectory are not samples, nothing is written or removed, and an
// empty or missing data set is an error.
func TestTrainingDataset(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "ds", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for i := range 10 {
		b := make([]byte, 500+i*700)
		for k := range b {
			b[k] = byte(i + k)
		}
		name := fmt.Sprintf("img-%02d.jpg", i)
		want[name] = b
		if err := os.WriteFile(filepath.Join(root, "ds", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "ds", "sub", "not-a-sample"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsys := &countFS{DirFS: DirFS{root}, opens: map[string]int{}}
	cfg := TrainingConfig{Accelerators: 2, BatchSize: 3, ReaderThreads: 2, Compute: time.Millisecond, Epochs: 2, Dataset: "ds"}
	res, err := Train(context.Background(), fsys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 2 epochs of 10 files: ceil(20 / (2 accelerators x 3)) = 4 batches
	// each, 24 samples.
	if got := res.SamplesPerSec * res.Seconds; got < 23.5 || got > 24.5 {
		t.Errorf("read %.1f samples, want 24", got)
	}
	for name := range want {
		if n := fsys.opens[path.Join("ds", name)]; n < 2 {
			t.Errorf("%s opened %d times in 2 epochs", name, n)
		}
	}
	if n := fsys.opens["ds/sub/not-a-sample"]; n != 0 {
		t.Errorf("a file of a subdirectory was read %d times", n)
	}
	if !strings.Contains(res.Params, "dataset=ds (10 files") {
		t.Errorf("params %q do not name the data set", res.Params)
	}
	for name, b := range want {
		if got, err := os.ReadFile(filepath.Join(root, "ds", name)); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s changed or gone: %v", name, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"empty", "missing"} {
		cfg.Dataset = dir
		if _, err := Train(context.Background(), DirFS{root}, cfg); err == nil {
			t.Errorf("data set %q: no error", dir)
		}
	}
}

func TestEpochSteps(t *testing.T) {
	for _, tc := range []struct{ epochs, samples, n, batch, want int }{
		{1, 2000, 4, 32, 16}, // 2000 / 128 = 15.6
		{2, 10, 2, 3, 4},
		{1, 128, 4, 32, 1},
		{1, 1, 8, 32, 1},
	} {
		if got := epochSteps(tc.epochs, tc.samples, tc.n, tc.batch); got != tc.want {
			t.Errorf("epochSteps(%d, %d, %d, %d) = %d, want %d", tc.epochs, tc.samples, tc.n, tc.batch, got, tc.want)
		}
	}
}

// slowFS makes every Open take d, so a loader with one reader thread can
// feed only so many accelerators.
type slowFS struct {
	DirFS
	d time.Duration
}

func (s slowFS) Open(ctx context.Context, p string) (File, error) {
	time.Sleep(s.d)
	return s.DirFS.Open(ctx, p)
}

// TestSearchMax checks the --find-max search on made-up utilizations: which
// counts it tries, in which order, and what it finds.
func TestSearchMax(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	// upTo keeps utilization at 95% up to n accelerators, 50% above.
	upTo := func(n int) func(int) (TrainingTrial, error) {
		return func(k int) (TrainingTrial, error) {
			u := 0.95
			if k > n {
				u = 0.5
			}
			return TrainingTrial{Accelerators: k, Utilization: u}, nil
		}
	}
	for _, tc := range []struct {
		name  string
		maxN  int
		trial func(int) (TrainingTrial, error)
		tried []int
		best  int
		err   error
	}{
		{"the bound is reached", 4, upTo(100), []int{1, 2, 4}, 4, nil},
		{"a bound that is not a power of two", 6, upTo(100), []int{1, 2, 4}, 4, nil},
		{"bisect down to 5", 16, upTo(5), []int{1, 2, 4, 8, 6, 5}, 5, nil},
		{"bisect up to 7", 16, upTo(7), []int{1, 2, 4, 8, 6, 7}, 7, nil},
		{"two but not three", 256, upTo(2), []int{1, 2, 4, 3}, 2, nil},
		{"a starved loader: not even one", 8, upTo(0), []int{1}, 0, nil},
		{"an exact threshold counts", 2, func(k int) (TrainingTrial, error) {
			return TrainingTrial{Accelerators: k, Utilization: 0.9}, nil
		}, []int{1, 2}, 2, nil},
		{"a failing trial stops the search", 16, func(k int) (TrainingTrial, error) {
			if k == 4 {
				return TrainingTrial{}, errBoom
			}
			return TrainingTrial{Accelerators: k, Utilization: 1}, nil
		}, nil, 0, errBoom},
	} {
		trials, best, err := searchMax(tc.maxN, 0.9, tc.trial)
		var tried []int
		for _, tr := range trials {
			tried = append(tried, tr.Accelerators)
		}
		if !errors.Is(err, tc.err) || best != tc.best || !slices.Equal(tried, tc.tried) {
			t.Errorf("%s: tried %v, best %d, error %v; want %v, %d, %v", tc.name, tried, best, err, tc.tried, tc.best, tc.err)
		}
	}
}

// TestTrainingFindMax runs the search for real. Utilization is measured
// with the wall clock, so the result depends on the machine's load: the
// test checks what holds whatever was measured (the search itself is
// TestSearchMax's).
func TestTrainingFindMax(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		compute time.Duration
		open    time.Duration
		maxN    int
	}{
		// A loader (1 thread) that reads a batch of 2 in ~4 ms for 40 ms of
		// compute: it keeps up, at least on an idle machine.
		{"loader keeps up", 40 * time.Millisecond, 2 * time.Millisecond, 4},
		// A loader too slow for the compute time.
		{"starved loader", time.Millisecond, 10 * time.Millisecond, 8},
	} {
		cfg := TrainingConfig{Samples: 16, SampleSize: SizeDist{100, 100}, BatchSize: 2, ReaderThreads: 1,
			Compute: tc.compute, Steps: 4, FindMax: true, MaxAccelerators: tc.maxN, Dir: "t"}
		res, err := Train(context.Background(), slowFS{DirFS{t.TempDir()}, tc.open}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: trials %+v", tc.name, res.Trials)
		if len(res.Trials) == 0 || res.Trials[0].Accelerators != 1 {
			t.Fatalf("%s: the search does not start with 1 accelerator: %+v", tc.name, res.Trials)
		}
		best, seen := 0, map[int]bool{}
		for _, tr := range res.Trials {
			if tr.Utilization <= 0 || tr.Utilization > 1 || tr.Seconds <= 0 || tr.Accelerators < 1 || tr.Accelerators > tc.maxN || seen[tr.Accelerators] {
				t.Fatalf("%s: trial %+v (of %+v)", tc.name, tr, res.Trials)
			}
			seen[tr.Accelerators] = true
			if tr.Utilization >= 0.9 {
				best = max(best, tr.Accelerators)
			}
		}
		if res.MaxAccelerators != best {
			t.Errorf("%s: MaxAccelerators %d, but the best trial at >= 90%% had %d: %+v", tc.name, res.MaxAccelerators, best, res.Trials)
		}
		if want := max(best, 1); res.Accelerators != want {
			t.Errorf("%s: the result is the trial of %d accelerators, want %d", tc.name, res.Accelerators, want)
		}
	}
}

func TestCheckpoint(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	res, err := Checkpoint(context.Background(), DirFS{root}, CheckpointConfig{Writers: 3, TotalSize: 300000, Transfer: 8192, Dir: "c", Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != 300000 || res.StallSeconds <= 0 || res.DurableSeconds < res.StallSeconds || res.RestoreSeconds <= 0 {
		t.Fatalf("%+v", res)
	}
	dir := filepath.Join(root, filepath.FromSlash(res.Path))
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 4 {
		t.Fatalf("checkpoint dir: %v %v", ents, err)
	}
	// DCP's shape: the shards and the commit marker, no temporary left.
	for _, e := range ents {
		fi, _ := e.Info()
		switch {
		case e.Name() == ".metadata":
		case strings.HasSuffix(e.Name(), "_0.distcp") && fi.Size() == 100000:
		default:
			t.Fatalf("%s: %d bytes", e.Name(), fi.Size())
		}
	}
}
