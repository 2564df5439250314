package tier

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/bench"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// BenchmarkStageEpochs measures a training job's read rate over a released
// data set (issue 14, "Staging for training"), every case in one run
// against the same backend (a second `sluice serve --s3`; versitygw with
// SLUICE_STAGE_BENCH_BACKEND=versitygw):
//
//	go test -run '^$' -bench StageEpochs -benchtime 1x ./test/tier
//
// The data set is SLUICE_STAGE_BENCH_FILES files (default 2000) of 150
// KiB. An epoch reads every file whole, in a shuffled order, with 16
// readers (one client, restore on read on, as a training job's loader
// would); its rate is files per second. The cases:
//
//	a. a copy never released (read at the start and at the end; the
//	   ratios are to the mean of the two);
//	b. released, epoch 1 alone: every first read goes to the bucket and
//	   starts a restore (b0: the same with restore on read off, a client
//	   that only reads the bucket);
//	c. released, epoch 1 with `sluice stage --from-file LIST -P 8` started
//	   with the readers (LIST in the epoch's order);
//	d. released, epoch 2 with `stage --from-profile e1 --follow train`,
//	   e1 the profiler's recording of an epoch 1 in the same order (a
//	   loader with a fixed seed), the data set released again in between;
//	e. as d, epoch 2 in another shuffled order than epoch 1 (a loader that
//	   reshuffles each epoch); d0: as d, the readers' restore on read off
//	   (the stager alone restores; misses read the bucket);
//	f. released, `stage --from-profile e1 -P 8` run to the end first (its
//	   time reported apart), then epoch 2: staging with a head start.
//
// Every released case starts cold: the files are released and their chunks
// gone from the targets before it starts. No case is timed against a goal
// here: the figures go to docs/tier.md.
func BenchmarkStageEpochs(b *testing.B) {
	for range b.N {
		benchStageEpochs(b)
	}
}

// stageBenchFS starts the file system of a staging benchmark with its
// backend (a second `sluice serve --s3`; versitygw with
// SLUICE_STAGE_BENCH_BACKEND=versitygw) registered under prefix, and
// returns it with a client and the number of files to use
// (SLUICE_STAGE_BENCH_FILES, default 2000).
func stageBenchFS(b *testing.B, prefix string) (*fsServer, *client.Client, *backend, int) {
	var be *backend
	if os.Getenv("SLUICE_STAGE_BENCH_BACKEND") == "versitygw" {
		be = startVersity(b)
	} else {
		be = startSluiceBackend(b)
	}
	fs := startFS(b)
	addBackend(b, fs, be, prefix)
	return fs, newClient(b, fs.addr, 0), be, envInt("SLUICE_STAGE_BENCH_FILES", 2000)
}

func benchStageEpochs(b *testing.B) {
	ctx := context.Background()
	fs, c, be, n := stageBenchFS(b, "ep/")
	const size = 150 << 10
	const readers = 16
	paths := func(dir string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s/s%05d", dir, i)
		}
		return out
	}
	ds, plain := paths("/ds"), paths("/plain")
	for _, dir := range []string{"/ds", "/plain"} {
		if err := c.MkdirAll(ctx, dir, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	t0 := time.Now()
	{
		var g sync.WaitGroup
		var failed atomic.Value
		next := atomic.Int64{}
		for range 8 {
			g.Go(func() {
				for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
					d := randomData(uint64(i), size)
					for _, p := range []string{ds[i], plain[i]} {
						if err := writeSluice(ctx, c, p, d); err != nil {
							failed.Store(err)
							return
						}
					}
				}
			})
		}
		g.Wait()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
	}
	wrote := time.Since(t0)
	t0 = time.Now()
	fs.mustCLI("hsm", "archive", "-r", "-P", "8", "/ds")
	// A benchmark's log is cut after 10 lines: keep to 10.
	b.Logf("backend %s; wrote 2 x %d files of 150 KiB in %v, archived %d in %v", be.name, n, wrote.Round(time.Millisecond), n, time.Since(t0).Round(time.Millisecond))
	order1 := shuffled(ds, 1)
	order2 := shuffled(ds, 2)
	dsBytes := int64(n) * size

	release := func() { releaseCold(b, fs, "/ds", dsBytes) }
	// epochOpts reads order with a new client of job "train" (with o's
	// options; joined to recording join, if not "") and returns files per
	// second; epoch does so with the default options.
	epochOpts := func(order []string, join string, o client.Options) float64 {
		o.Server, o.Job, o.ProfilePoll = fs.addr, "train", 50*time.Millisecond
		r := newClientOpts(b, o)
		defer r.Close()
		if join != "" {
			proctest.WaitProfileClients(b, c, join, 1)
		}
		rate, err := readEpoch(ctx, r, order, readers)
		if err != nil {
			b.Fatal(err)
		}
		return rate
	}
	epoch := func(order []string, join string) float64 { return epochOpts(order, join, client.Options{}) }

	plainOrder := shuffled(plain, 1)
	a1 := epoch(plainOrder, "")

	release()
	rb0 := epochOpts(order1, "", client.Options{TierNoRestoreOnRead: true})
	// Still cold: b0 restored nothing.
	rb := epoch(order1, "")

	release()
	list := b.TempDir() + "/list"
	if err := os.WriteFile(list, []byte(strings.Join(order1, "\n")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	// The stager prints nothing until it is done: start it, not waiting
	// for a line, and the readers at once.
	stager := exec.Command(binary, "stage", "--from-file", list, "-P", "8")
	stager.Env = append(os.Environ(), "SLUICE_SERVER="+fs.addr)
	var stagerOut strings.Builder
	stager.Stdout, stager.Stderr = &stagerOut, &stagerOut
	if err := stager.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stager.Process.Kill(); stager.Wait() }) // by PID; a no-op once it exited
	rc := epoch(order1, "")
	if err := stager.Wait(); err != nil {
		b.Fatalf("stage --from-file: %v: %s", err, stagerOut.String())
	}

	// Epoch 1, recorded (restore on read, as in b; not timed).
	release()
	fs.mustCLI("profile", "record", "--job", "train", "--name", "e1", "--dir", "/ds", "--duration", "1h", "--detach")
	epoch(order1, "e1")
	fs.mustCLI("profile", "stop", "e1")

	follow := func(order []string, o client.Options) (rate float64, summary string) {
		release()
		st, _ := startCLI(b, fs, "following job train", "stage", "--from-profile", "e1", "--follow", "train", "--follow-idle", "5s")
		name := stagerRecording(b, c)
		rate = epochOpts(order, name, o)
		<-st.Exited()
		if code := st.Cmd.ProcessState.ExitCode(); code != 0 {
			b.Fatalf("stage --follow: exit %d: %s", code, st.Logs())
		}
		m := regexp.MustCompile(`readers' first reads: .*`).FindString(st.Logs())
		return rate, m
	}
	rd, sumD := follow(order1, client.Options{})
	re, sumE := follow(order2, client.Options{})
	rd0, sumD0 := follow(order1, client.Options{TierNoRestoreOnRead: true})

	release()
	t0 = time.Now()
	fs.mustCLI("stage", "--from-profile", "e1", "-P", "8")
	stageTook := time.Since(t0)
	rf := epoch(order1, "")

	a2 := epoch(plainOrder, "")
	a := (a1 + a2) / 2
	b.ReportMetric(a, "a-never-released-files/s")
	for _, m := range []struct {
		name string
		v    float64
	}{{"b0-epoch1-no-restore-on-read", rb0}, {"b-epoch1", rb}, {"c-epoch1-stage", rc}, {"d-epoch2-follow", rd}, {"e-epoch2-reshuffled-follow", re}, {"d0-epoch2-follow-no-restore-on-read", rd0}, {"f-epoch2-staged-first", rf}} {
		b.ReportMetric(m.v, m.name+"-files/s")
		b.ReportMetric(m.v/a, m.name+"/a")
	}
	b.Logf("%d files of 150 KiB, %d readers: never released %.0f files/s (start %.0f, end %.0f)", n, readers, a, a1, a2)
	b.Logf("released, epoch 1, restore on read off (bucket reads only): %.0f files/s (%.2f of never released)", rb0, rb0/a)
	b.Logf("released, epoch 1 (restore on read): %.0f files/s (%.2f)", rb, rb/a)
	b.Logf("released, epoch 1 with stage --from-file -P 8: %.0f files/s (%.2f)", rc, rc/a)
	b.Logf("released, epoch 2 with stage --follow, same order as the recorded epoch: %.0f files/s (%.2f); %s", rd, rd/a, sumD)
	b.Logf("released, epoch 2 with stage --follow, reshuffled: %.0f files/s (%.2f); %s", re, re/a, sumE)
	b.Logf("released, epoch 2 with stage --follow, same order, readers' restore on read off: %.0f files/s (%.2f); %s", rd0, rd0/a, sumD0)
	b.Logf("released, stage --from-profile -P 8 to the end first (%v, %.0f files/s), then epoch 2: %.0f files/s (%.2f)",
		stageTook.Round(time.Millisecond), float64(n)/stageTook.Seconds(), rf, rf/a)
	b.ReportMetric(float64(n)/stageTook.Seconds(), "f-staging-files/s")
}

// releaseCold makes the archived tree dir (bytes in all) cold: every file
// restored first (a restore on read may still run), then released, and its
// chunks gone from the targets.
func releaseCold(b *testing.B, fs *fsServer, dir string, bytes int64) {
	b.Helper()
	fs.mustCLI("hsm", "restore", "-r", "-P", "8", dir)
	before := fs.chunkBytes()
	fs.mustCLI("hsm", "release", "-r", dir)
	waitFor(b, "the release's chunk removal", func() bool { return fs.chunkBytes() <= before-bytes*9/10 })
}

// shuffled returns a permutation of paths from seed.
func shuffled(paths []string, seed uint64) []string {
	out := append([]string(nil), paths...)
	r := rand.New(rand.NewPCG(seed, seed+1))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// readEpoch reads every file of order whole with workers readers taking
// the next file in order, and returns files per second.
func readEpoch(ctx context.Context, c *client.Client, order []string, workers int) (float64, error) {
	var next atomic.Int64
	var g sync.WaitGroup
	var mu sync.Mutex
	var first error
	t0 := time.Now()
	for range workers {
		g.Go(func() {
			buf := make([]byte, 1<<20)
			for i := int(next.Add(1) - 1); i < len(order); i = int(next.Add(1) - 1) {
				if err := readWhole(ctx, c, order[i], buf); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	g.Wait()
	if first != nil {
		return 0, first
	}
	return float64(len(order)) / time.Since(t0).Seconds(), nil
}

func readWhole(ctx context.Context, c *client.Client, p string, buf []byte) error {
	f, err := c.Open(ctx, p)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		_, err := f.Read(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
	}
}

// stagerRecording returns the name of the recording a `stage --follow
// train` runs.
func stagerRecording(b *testing.B, c *client.Client) string {
	var name string
	waitFor(b, "the stager's recording", func() bool {
		l, err := c.Profiles(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range l {
			if strings.HasPrefix(s.Name, "stage-train-") && s.Until.After(time.Now()) {
				name = s.Name
			}
		}
		return name != ""
	})
	return name
}

// BenchmarkStageTraining runs `sluice bench`'s training emulation (the
// issue's "sluice bench training phase over a released dataset") on a data
// set released to the object tier, beside the same files never released,
// in one run against the same backend:
//
//	go test -run '^$' -bench StageTraining -benchtime 1x ./test/tier
//
// The data set is SLUICE_STAGE_BENCH_FILES files (default 2000) of 150
// KiB; each case trains one epoch (`--epochs 1 --dataset DIR`), for each
// rate of SLUICE_STAGE_TRAIN_RATES (accelerators:compute per batch of 32,
// default "2:160ms,4:80ms,4:20ms": jobs that consume at most about 400,
// 1600 and 6400 samples a second). Reported per rate: the accelerators'
// utilization and the epoch's time in each case,
//
//	a. never released (mean of a run at the start and one at the end);
//	b. released, epoch 1, restore on read only;
//	d. released, epoch 2 with `stage --from-profile e1 --follow train`
//	   started 1 s before the job (e1: epoch 1 recorded);
//	f. released, `stage --from-profile e1 -P 8` run to the end first;
//
// and the ratios of b, d and f's utilization to a's.
func BenchmarkStageTraining(b *testing.B) {
	for range b.N {
		benchStageTraining(b)
	}
}

func benchStageTraining(b *testing.B) {
	ctx := context.Background()
	fs, c, _, n := stageBenchFS(b, "tr/")
	const size = 150 << 10
	for _, dir := range []string{"/ds", "/plain"} {
		if err := c.MkdirAll(ctx, dir, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			d := randomData(uint64(i), size)
			for _, dir := range []string{"/ds", "/plain"} {
				if err := writeSluice(ctx, c, fmt.Sprintf("%s/s%05d", dir, i), d); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	fs.mustCLI("hsm", "archive", "-r", "-P", "8", "/ds")
	dsBytes := int64(n) * size
	release := func() { releaseCold(b, fs, "/ds", dsBytes) }
	rates := cmp.Or(os.Getenv("SLUICE_STAGE_TRAIN_RATES"), "2:160ms,4:80ms,4:20ms")
	for _, rate := range strings.Split(rates, ",") {
		acc, compute, ok := strings.Cut(rate, ":")
		if !ok {
			b.Fatalf("SLUICE_STAGE_TRAIN_RATES: %q is not accelerators:compute", rate)
		}
		// train runs one epoch of `sluice bench` over dir as job.
		train := func(dir, job string) bench.TrainingTrial {
			cmd := exec.Command(binary, "bench", "--no-io500", "--no-checkpoint", "--json", "--accelerators", acc,
				"--compute", compute, "--epochs", "1", "--dataset", dir)
			cmd.Env = append(os.Environ(), "SLUICE_SERVER="+fs.addr, "SLUICE_QOS_JOB="+job)
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("sluice bench --dataset %s: %v: %s", dir, err, out)
			}
			var res bench.Result
			if err := json.Unmarshal(out, &res); err != nil || res.Training == nil {
				b.Fatalf("sluice bench --json: %v: %s", err, out)
			}
			return res.Training.TrainingTrial
		}
		a1 := train("/plain", "plain")
		release()
		tb := train("/ds", "cold")
		release()
		fs.mustCLI("profile", "record", "--job", "train", "--name", "e1", "--dir", "/ds", "--duration", "1h", "--detach")
		train("/ds", "train")
		fs.mustCLI("profile", "stop", "e1")
		release()
		st, _ := startCLI(b, fs, "following job train", "stage", "--from-profile", "e1", "--follow", "train", "--follow-idle", "3s")
		time.Sleep(time.Second)
		td := train("/ds", "train")
		<-st.Exited()
		if code := st.Cmd.ProcessState.ExitCode(); code != 0 {
			b.Fatalf("stage --follow: exit %d: %s", code, st.Logs())
		}
		hits := regexp.MustCompile(`readers' first reads: \d+ hits, \d+ misses`).FindString(st.Logs())
		release()
		t0 := time.Now()
		fs.mustCLI("stage", "--from-profile", "e1", "-P", "8")
		staging := time.Since(t0)
		tf := train("/ds", "staged")
		a2 := train("/plain", "plain")
		fs.mustCLI("profile", "rm", "e1")
		a := (a1.Utilization + a2.Utilization) / 2
		name := strings.ReplaceAll(rate, ":", "x")
		b.ReportMetric(a, name+"-a-util")
		b.ReportMetric(tb.Utilization/a, name+"-b/a")
		b.ReportMetric(td.Utilization/a, name+"-d/a")
		b.ReportMetric(tf.Utilization/a, name+"-f/a")
		b.Logf("%s accelerators x compute, %d files: utilization (epoch s) a %.1f%% (%.2fs, %.2fs), b %.1f%% (%.2fs) %.2f, d %.1f%% (%.2fs) %.2f [%s], f %.1f%% (%.2fs) %.2f after %v staging",
			rate, n, 100*a1.Utilization, a1.Seconds, a2.Seconds, 100*tb.Utilization, tb.Seconds, tb.Utilization/a,
			100*td.Utilization, td.Seconds, td.Utilization/a, hits, 100*tf.Utilization, tf.Seconds, tf.Utilization/a, staging.Round(time.Millisecond))
	}
}
