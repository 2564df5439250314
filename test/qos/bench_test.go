package qos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// BenchmarkInference is the demonstration issue 18 asks for: an
// inference-like reader (class interactive; random reads of 4 KiB to
// 1 MiB, sizes log-uniform, read-ahead off) measures its latency idle,
// then while 8 checkpoint-class writers (1 MiB writes, 32 MiB files,
// rewritten) saturate the same targets. It runs against a server with QoS
// on (at several bounds on the requests in service) and with QoS off
// (--qos-off: every request served as it comes, as before QoS), and
// reports p50 and p99 of both phases, the p99 ratio loaded/idle and the
// writers' throughput. Run it once: go test -run XXX -bench Inference
// -benchtime 1x ./test/qos.
//
// The reader runs in a process of its own (this test binary again,
// TestReaderProcess), as an inference server runs on another machine than
// the training job's writers: sharing one Go runtime with 8 busy writers
// on 2 CPUs, its goroutine waits for the runtime's 10 ms time slices,
// which says nothing about the storage. The "shared-process" rows keep
// the reader beside the writers, as the first measurements did.
// SLUICE_QOS_TRACE=FILE writes a 1 s Go execution trace of the server
// taken while the loaded phase runs (go tool trace -pprof=sched FILE shows
// where its goroutines waited for a CPU).
func BenchmarkInference(b *testing.B) {
	if testing.Short() {
		b.Skip("starts servers")
	}
	for _, mode := range []struct {
		name   string
		args   []string
		shared bool
	}{
		{"qos=off", []string{"--qos-off"}, false},
		{"qos=on/in-service=8", nil, false},
		{"qos=on/in-service=8/cpu-reserve=0", []string{"--qos-cpu-reserve", "0"}, false},
		{"qos=on/in-service=2", []string{"--qos-in-service", "2"}, false},
		{"qos=on/in-service=32", []string{"--qos-in-service", "32"}, false},
		{"qos=off/shared-process", []string{"--qos-off"}, true},
		{"qos=on/in-service=8/shared-process", nil, true},
	} {
		b.Run(mode.name, func(b *testing.B) { benchInference(b, mode.args, mode.shared) })
	}
}

// envReader names the server a TestReaderProcess child reads from;
// envReaderOp is "stat" for BenchmarkMetaStorm's stats, else reads.
const (
	envReader   = "SLUICE_QOS_READER_ADDR"
	envReaderOp = "SLUICE_QOS_READER_OP"
)

// TestReaderProcess is BenchmarkInference's reader when it runs as a
// child process (envReader set; otherwise it skips at once): each line
// on its standard input asks for one run of measurements, answered with
// a line of the latencies in nanoseconds.
func TestReaderProcess(t *testing.T) {
	addr := os.Getenv(envReader)
	if addr == "" {
		t.Skip("the reader process of BenchmarkInference")
	}
	reader := newClient(t, addr, "infer", "interactive", -1)
	measure := readerOf(t, reader)
	if os.Getenv(envReaderOp) == "stat" {
		measure = statterOf(t, reader)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var line strings.Builder
		for i, d := range measure() {
			if i > 0 {
				line.WriteByte(' ')
			}
			line.WriteString(strconv.FormatInt(int64(d), 10))
		}
		fmt.Println(line.String())
	}
}

// readerOf opens /model through c and returns a function that makes
// readsPerRun random reads of it and returns their latencies, sorted.
func readerOf(tb testing.TB, c *client.Client) func() []time.Duration {
	f, err := c.Open(context.Background(), "/model")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20)
	return func() []time.Duration {
		lat := make([]time.Duration, 0, readsPerRun)
		for range readsPerRun {
			n := int(math.Exp(rng.Float64()*math.Log(256))) * 4096 // 4 KiB .. 1 MiB, log-uniform
			off := rng.Int64N((modelSize-int64(n))/4096) * 4096
			start := time.Now()
			if _, err := f.ReadAt(buf[:n], off); err != nil {
				tb.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		return lat
	}
}

// statterOf returns a function that stats /model through c readsPerRun
// times and returns the latencies, sorted.
func statterOf(tb testing.TB, c *client.Client) func() []time.Duration {
	return func() []time.Duration {
		lat := make([]time.Duration, 0, readsPerRun)
		for range readsPerRun {
			start := time.Now()
			if _, err := c.Stat(context.Background(), "/model"); err != nil {
				tb.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		return lat
	}
}

// readerProcess starts TestReaderProcess against addr (doing op: "read"
// or "stat") and returns a function that runs one measurement in it.
func readerProcess(b *testing.B, addr, op string) func() []time.Duration {
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaderProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), envReader+"="+addr, envReaderOp+"="+op)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close() // the child's loop ends
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill() // by PID
			<-done
		}
	})
	out := bufio.NewScanner(stdout)
	out.Buffer(nil, 1<<20)
	return func() []time.Duration {
		if _, err := io.WriteString(stdin, "measure\n"); err != nil {
			b.Fatal(err)
		}
		if !out.Scan() {
			b.Fatalf("the reader process answered nothing: %v", out.Err())
		}
		var lat []time.Duration
		for _, f := range strings.Fields(out.Text()) {
			ns, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				b.Fatalf("the reader process answered %q", out.Text())
			}
			lat = append(lat, time.Duration(ns))
		}
		if len(lat) != readsPerRun {
			b.Fatalf("the reader process measured %d reads, want %d", len(lat), readsPerRun)
		}
		return lat
	}
}

const (
	modelSize   = 64 << 20
	readsPerRun = 1000
	writers     = 8
	ckptFile    = 32 << 20
	ckptPiece   = 1 << 20
)

func benchInference(b *testing.B, args []string, shared bool) {
	s := startServer(b, args...)
	setup := newClient(b, s.addr, "", "", 0)
	writeFile(b, setup, "/model", modelSize)
	if err := setup.Mkdir(context.Background(), "/ckpt", 0o755); err != nil {
		b.Fatal(err)
	}
	// measure returns the latencies of readsPerRun random reads.
	var measure func() []time.Duration
	if shared {
		measure = readerOf(b, newClient(b, s.addr, "infer", "interactive", -1))
	} else {
		measure = readerProcess(b, s.addr, "read")
	}
	var idle, loaded []time.Duration
	var ckptRate float64
	// The p99 of the chunk reads' time in the server's handler and of
	// their wait between being read off the connection and the handler
	// (bucket upper bounds): what of the reader's tail is the server's.
	var serverP99, waitP99 float64
	b.ResetTimer()
	for range b.N {
		measure() // warm connections and caches
		idle = measure()

		ctx, stop := context.WithCancel(context.Background())
		var written atomic.Int64
		var wg sync.WaitGroup
		for w := range writers {
			c := newClient(b, s.addr, "ckpt", "checkpoint", 0)
			wg.Go(func() { checkpointWriter(ctx, b, c, w, &written) })
		}
		// Let the writers fill their buffers and the targets' queues.
		for written.Load() < writers*8*ckptPiece {
			time.Sleep(10 * time.Millisecond)
		}
		dur0 := s.buckets("sluice_op_duration_seconds", `op="chunk_read"`)
		wait0 := s.buckets("sluice_op_queue_wait_seconds", `op="chunk_read"`)
		w0, t0 := written.Load(), time.Now()
		traced := make(chan struct{})
		if tf := os.Getenv("SLUICE_QOS_TRACE"); tf == "" {
			close(traced)
		} else {
			go func() {
				defer close(traced)
				resp, err := http.Get("http://" + s.admin + "/debug/pprof/trace?seconds=1")
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					os.WriteFile(tf, b, 0o644)
				}
			}()
		}
		loaded = measure()
		serverP99 = quantileSince(dur0, s.buckets("sluice_op_duration_seconds", `op="chunk_read"`), 0.99)
		waitP99 = quantileSince(wait0, s.buckets("sluice_op_queue_wait_seconds", `op="chunk_read"`), 0.99)
		<-traced
		ckptRate = float64(written.Load()-w0) / time.Since(t0).Seconds()
		stop()
		wg.Wait()
	}
	b.StopTimer()
	reportLatencies(b, idle, loaded)
	b.ReportMetric(ckptRate/(1<<20), "ckpt-MiB/s")
	b.ReportMetric(serverP99*1000, "server-read-p99-ms")
	b.ReportMetric(waitP99*1000, "server-wait-p99-ms")
	// Where the reader's time went: the mean wait of its requests in the
	// targets' schedulers (the rest is the network, the clients and the
	// CPUs the processes share).
	for _, c := range []string{"interactive", "checkpoint"} {
		n := s.metric("sluice_qos_wait_seconds_count", `class="`+c+`"`)
		if n > 0 {
			b.ReportMetric(s.metric("sluice_qos_wait_seconds_sum", `class="`+c+`"`)/n*1000, c+"-wait-ms")
		}
	}
}

// checkpointWriter writes 32 MiB files in 1 MiB writes until ctx is done,
// removing each file once the next is written.
func checkpointWriter(ctx context.Context, tb testing.TB, c *client.Client, w int, written *atomic.Int64) {
	piece := make([]byte, ckptPiece)
	for i := range piece {
		piece[i] = byte(i * (w + 1))
	}
	prev := ""
	for i := 0; ctx.Err() == nil; i++ {
		p := fmt.Sprintf("/ckpt/w%d-%d", w, i)
		f, err := c.Create(context.Background(), p)
		if err != nil {
			tb.Error(err)
			return
		}
		for n := 0; n < ckptFile && ctx.Err() == nil; n += ckptPiece {
			if _, err := f.Write(piece); err != nil {
				tb.Error(err)
				f.Close()
				return
			}
			written.Add(ckptPiece)
		}
		if err := f.Close(); err != nil {
			tb.Error(err)
			return
		}
		if prev != "" {
			if err := c.Remove(context.Background(), prev); err != nil {
				tb.Error(err)
				return
			}
		}
		prev = p
	}
}

// BenchmarkMetaStorm is the metadata side of the demonstration: an
// interactive client (its own process, job infer) stats a file, idle and
// then while a background job (16 workers of one client) creates, stats
// and removes files as fast as the metadata service lets it, against a
// server with the metadata QoS off and on (at two bounds on the requests
// in service). It reports the stat's p50 and p99 in both phases, the
// storm's rate, and the mean wait of each class in the metadata service's
// scheduler:
//
//	go test -run XXX -bench MetaStorm -benchtime 1x ./test/qos
func BenchmarkMetaStorm(b *testing.B) {
	if testing.Short() {
		b.Skip("starts servers")
	}
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"qos=off", []string{"--qos-off"}},
		{"qos=on/in-service=8", nil},
		{"qos=on/in-service=8/cpu-reserve=0", []string{"--qos-cpu-reserve", "0"}},
		{"qos=on/in-service=2", []string{"--meta-qos-in-service", "2"}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			s := startServer(b, mode.args...)
			benchMetaStorm(b, s.addr, s.metric)
		})
	}
	// The same with etcd as the metadata engine (`sluice meta --etcd`, an
	// embedded etcd server, one storage node): every read of a request is
	// a round trip to etcd while it holds its place.
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"etcd/qos=off", []string{"--qos-off"}},
		{"etcd/qos=on/in-service=8", nil},
		{"etcd/qos=on/in-service=8/cpu-reserve=0", []string{"--qos-cpu-reserve", "0"}},
		{"etcd/qos=on/in-service=32", []string{"--qos-in-service", "32"}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			cl := proctest.StartCluster(b, binary, proctest.ClusterOptions{Metas: 1, Nodes: 1, TargetsPerNode: 2, FirstMetaArgs: mode.args})
			benchMetaStorm(b, cl.MetaAddrs(), nil)
		})
	}
}

// benchMetaStorm measures an interactive client's stats idle and beside a
// background storm against the metadata service at addr; metric, if not
// nil, reads the server's metrics.
func benchMetaStorm(b *testing.B, addr string, metric func(name, match string) float64) {
	const stormWorkers = 16
	setup := newClient(b, addr, "", "", 0)
	writeFile(b, setup, "/model", 4096)
	if err := setup.Mkdir(context.Background(), "/storm", 0o755); err != nil {
		b.Fatal(err)
	}
	measure := readerProcess(b, addr, "stat")
	var idle, loaded []time.Duration
	var stormRate float64
	b.ResetTimer()
	for range b.N {
		measure() // warm
		idle = measure()
		storm := newClient(b, addr, "storm", "background", 0)
		ctx, stop := context.WithCancel(context.Background())
		var ops atomic.Int64
		var wg sync.WaitGroup
		for w := range stormWorkers {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					p := fmt.Sprintf("/storm/w%d-%d", w, i)
					f, err := storm.Create(ctx, p)
					if err == nil {
						err = f.Close()
					}
					if err == nil {
						_, err = storm.Stat(ctx, p)
					}
					if err == nil {
						err = storm.Remove(ctx, p)
					}
					if err != nil {
						if ctx.Err() == nil {
							b.Error(err)
						}
						return
					}
					ops.Add(3)
				}
			})
		}
		for ops.Load() < stormWorkers*30 {
			time.Sleep(5 * time.Millisecond)
		}
		o0, t0 := ops.Load(), time.Now()
		loaded = measure()
		stormRate = float64(ops.Load()-o0) / time.Since(t0).Seconds()
		stop()
		wg.Wait()
	}
	b.StopTimer()
	reportLatencies(b, idle, loaded)
	b.ReportMetric(stormRate, "storm-ops/s")
	if metric == nil {
		return
	}
	for _, c := range []string{"interactive", "background"} {
		if n := metric("sluice_meta_qos_wait_seconds_count", `class="`+c+`"`); n > 0 {
			b.ReportMetric(metric("sluice_meta_qos_wait_seconds_sum", `class="`+c+`"`)/n*1000, c+"-wait-ms")
		}
	}
}

// reportLatencies reports the p50 and p99 of sorted latencies idle and
// loaded, and their ratios.
func reportLatencies(b *testing.B, idle, loaded []time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	p := func(l []time.Duration, q float64) time.Duration { return l[int(q*float64(len(l)-1))] }
	b.ReportMetric(ms(p(idle, 0.5)), "idle-p50-ms")
	b.ReportMetric(ms(p(idle, 0.99)), "idle-p99-ms")
	b.ReportMetric(ms(p(loaded, 0.5)), "load-p50-ms")
	b.ReportMetric(ms(p(loaded, 0.99)), "load-p99-ms")
	b.ReportMetric(ms(p(loaded, 0.99))/ms(p(idle, 0.99)), "p99-ratio")
	b.ReportMetric(ms(p(loaded, 0.5))/ms(p(idle, 0.5)), "p50-ratio")
}
