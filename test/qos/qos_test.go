// Package qos tests quality of service end to end (docs/qos.md): real
// `sluice serve` processes, real clients naming jobs and classes, the CLI
// setting limits, and the targets' metrics read over HTTP. Every process
// is stopped by PID when its test ends, even on failure.
package qos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.Main(m, &binary)) }

var (
	readyLine = regexp.MustCompile(`serving on (\S+)`)
	adminLine = regexp.MustCompile(`admin on (\S+)`)
)

// server is a `sluice serve` process with its admin (metrics) address.
type server struct {
	tb    testing.TB
	addr  string
	admin string
	proc  *proctest.Proc
}

func startServer(tb testing.TB, extra ...string) *server {
	tb.Helper()
	args := append([]string{"serve", "--data-dir", tb.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}, extra...)
	// SLUICE_QOS_SERVE_ARGS adds flags (e.g. "--meta-sync always").
	args = append(args, strings.Fields(os.Getenv("SLUICE_QOS_SERVE_ARGS"))...)
	p, addr := proctest.Start(tb, binary, nil, readyLine, args...)
	admin, err := p.WaitLine(adminLine, 10*time.Second)
	if err != nil {
		tb.Fatalf("no admin address: %v\n%s", err, p.Logs())
	}
	tb.Cleanup(func() { p.Stop(10 * time.Second) })
	return &server{tb: tb, addr: addr, admin: admin, proc: p}
}

// cli runs `sluice ARGS...` against the server and returns its stdout.
func (s *server) cli(args ...string) string {
	s.tb.Helper()
	return runCLI(s.tb, s.addr, args...)
}

// runCLI runs `sluice ARGS...` against the metadata service at addr and
// returns its stdout.
func runCLI(tb testing.TB, addr string, args ...string) string {
	tb.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "SLUICE_SERVER="+addr)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		tb.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// metric sums the samples of a metric whose labels contain match (e.g.
// `job="slow"`; "" for all).
func (s *server) metric(name, match string) float64 {
	s.tb.Helper()
	resp, err := http.Get("http://" + s.admin + "/metrics")
	if err != nil {
		s.tb.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		if match != "" && !strings.Contains(line, match) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			s.tb.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// waitLimited waits until the targets apply n job limits: they get the
// settings with a heartbeat (1 s).
func (s *server) waitLimited(n float64) {
	s.tb.Helper()
	s.waitMetric("sluice_qos_limited_jobs", n, "the targets never applied the job limits")
}

// waitMetric waits up to 20 s until metric name (summed over its labels)
// is n, and fails with why if it never is.
func (s *server) waitMetric(name string, n float64, why string) {
	s.tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.metric(name, "") != n {
		if time.Now().After(deadline) {
			s.tb.Fatalf("%s (%s != %v)", why, name, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// buckets returns the cumulative counts of a histogram's buckets whose
// labels contain match, summed over its other labels, by upper bound.
func (s *server) buckets(name, match string) map[float64]float64 {
	s.tb.Helper()
	resp, err := http.Get("http://" + s.admin + "/metrics")
	if err != nil {
		s.tb.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[float64]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"_bucket{") || !strings.Contains(line, match) {
			continue
		}
		i := strings.Index(line, `le="`)
		j := strings.Index(line[i+4:], `"`)
		f := strings.Fields(line)
		le, err1 := strconv.ParseFloat(line[i+4:i+4+j], 64)
		v, err2 := strconv.ParseFloat(f[len(f)-1], 64)
		if err1 != nil || err2 != nil {
			s.tb.Fatalf("histogram line %q", line)
		}
		out[le] += v
	}
	return out
}

// quantileSince returns the upper bound of the bucket holding quantile q
// of the observations made between two snapshots of buckets.
func quantileSince(before, after map[float64]float64, q float64) float64 {
	les := make([]float64, 0, len(after))
	for le := range after {
		les = append(les, le)
	}
	slices.Sort(les)
	if len(les) == 0 {
		return 0
	}
	total := after[les[len(les)-1]] - before[les[len(les)-1]]
	for _, le := range les {
		if after[le]-before[le] >= q*total {
			return le
		}
	}
	return les[len(les)-1]
}

// newClient connects a client with a QoS identity.
func newClient(tb testing.TB, addr, job, class string, readAhead int) *client.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Options{Server: addr, Job: job, Class: class, ReadAhead: readAhead})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// putFile writes size bytes at p through a client of its own that names
// no job: the set-up of a test, outside every job's accounts.
func (s *server) putFile(p string, size int) {
	s.tb.Helper()
	writeFile(s.tb, newClient(s.tb, s.addr, "", "", 0), p, size)
}

func writeFile(tb testing.TB, c *client.Client, p string, size int) {
	tb.Helper()
	buf := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(size), 1))
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	if err := proctest.WriteFile(context.Background(), c, p, buf); err != nil {
		tb.Fatal(err)
	}
}

// readLoop reads 1 MiB pieces of p at random offsets until ctx is done.
func readLoop(ctx context.Context, tb testing.TB, c *client.Client, p string, size int) {
	f, err := c.Open(context.Background(), p)
	if err != nil {
		tb.Error(err)
		return
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(7, uint64(len(p))))
	for ctx.Err() == nil {
		off := r.Int64N(int64(size - len(buf)))
		if _, err := f.ReadAtContext(ctx, buf, off); err != nil && ctx.Err() == nil {
			tb.Error(err)
			return
		}
	}
}

// TestJobLimit: a job limit set with `sluice qos set` reaches the targets
// (their metrics count it), `sluice qos ls` and the audit trail show it,
// and a limited job reading beside an unlimited one gets fewer bytes
// served, as the targets' per-job counters show.
func TestJobLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	s := startServer(t)
	const size = 16 << 20
	s.putFile("/data", size)

	s.cli("qos", "set", "--job", "slow", "--rate", "1M", "--burst", "1M")
	s.cli("qos", "set", "--class", "checkpoint", "--weight", "3")
	ls := s.cli("qos", "ls")
	if !regexp.MustCompile(`(?m)^slow\s+1048576\s+1048576\s+-\s+-$`).MatchString(ls) || !regexp.MustCompile(`(?m)^checkpoint\s+3$`).MatchString(ls) {
		t.Errorf("qos ls does not show the limit and weight set:\n%s", ls)
	}
	if audit := s.cli("audit", "ls"); !strings.Contains(audit, "qos") {
		t.Errorf("audit ls shows no qos change:\n%s", audit)
	}
	s.waitLimited(1)

	slow := newClient(t, s.addr, "slow", "training", -1)
	fast := newClient(t, s.addr, "fast", "training", -1)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { readLoop(ctx, t, slow, "/data", size) })
	wg.Go(func() { readLoop(ctx, t, fast, "/data", size) })
	// Run until the unlimited job has read 32 times the limited one's
	// burst on all targets: a count, not a duration.
	deadline := time.Now().Add(2 * time.Minute)
	for s.metric("sluice_qos_job_served_bytes_total", `job="fast"`) < 4*32<<20 {
		if time.Now().After(deadline) {
			stop()
			wg.Wait()
			t.Fatal("the unlimited job did not read 128 MiB in 2 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	wg.Wait()
	slowB := s.metric("sluice_qos_job_served_bytes_total", `job="slow"`)
	fastB := s.metric("sluice_qos_job_served_bytes_total", `job="fast"`)
	t.Logf("served: slow %.0f bytes, fast %.0f bytes", slowB, fastB)
	if slowB == 0 || slowB*4 > fastB {
		t.Errorf("the limited job got %.0f bytes beside the unlimited job's %.0f: want above 0 and under a quarter", slowB, fastB)
	}
	if got := s.metric("sluice_qos_served_bytes_total", `class="training"`); got < slowB+fastB {
		t.Errorf("class training served %.0f bytes, less than its jobs' %.0f", got, slowB+fastB)
	}

	s.cli("qos", "rm", "--job", "slow")
	if ls := s.cli("qos", "ls"); strings.Contains(ls, "slow") {
		t.Errorf("qos ls still shows the removed limit:\n%s", ls)
	}
}

// TestMetaJobLimit: a job's limit on the metadata service, set with
// `sluice qos set --meta-rate`, is applied at once (its metric counts it),
// shown by `sluice qos ls`, and holds the job's namespace requests to its
// token bucket while another job's stats run unlimited beside it; both
// are counted under their jobs and declared classes. `sluice qos rm`
// lifts it.
func TestMetaJobLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	s := startServer(t)
	s.putFile("/f", 10)
	const rate, burst = 100, 10
	s.cli("qos", "set", "--job", "slow", "--meta-rate", fmt.Sprint(rate), "--meta-burst", fmt.Sprint(burst))
	if ls := s.cli("qos", "ls"); !regexp.MustCompile(`(?m)^slow\s+-\s+-\s+100\s+10$`).MatchString(ls) {
		t.Errorf("qos ls does not show the metadata limit:\n%s", ls)
	}
	if got := s.metric("sluice_meta_qos_limited_jobs", ""); got != 1 {
		t.Fatalf("sluice_meta_qos_limited_jobs = %v right after the set, want 1", got)
	}
	slow := newClient(t, s.addr, "slow", "background", -1)
	fast := newClient(t, s.addr, "fast", "interactive", -1)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stat := func(c *client.Client) {
		for ctx.Err() == nil {
			if _, err := c.Stat(ctx, "/f"); err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
		}
	}
	start := time.Now()
	base := s.metric("sluice_meta_qos_job_served_requests_total", `job="slow"`)
	for range 8 {
		wg.Go(func() { stat(slow) })
	}
	wg.Go(func() { stat(fast) })
	// Run until the unlimited job made 2,000 requests: a count, not a
	// duration.
	deadline := time.Now().Add(2 * time.Minute)
	for s.metric("sluice_meta_qos_job_served_requests_total", `job="fast"`) < 2000 {
		if time.Now().After(deadline) {
			stop()
			wg.Wait()
			t.Fatal("the unlimited job did not make 2,000 requests in 2 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	slowN := s.metric("sluice_meta_qos_job_served_requests_total", `job="slow"`) - base
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	fastN := s.metric("sluice_meta_qos_job_served_requests_total", `job="fast"`)
	t.Logf("in %v: slow %.0f requests, fast %.0f", elapsed, slowN, fastN)
	// The bucket's bound: the burst, the rate over the time, and what was
	// in service (8 places) when the counters were read.
	if bound := burst + rate*elapsed.Seconds() + 8; slowN > bound || slowN == 0 {
		t.Errorf("the limited job made %.0f requests in %v: want above 0 and at most %.0f", slowN, elapsed, bound)
	}
	if got := s.metric("sluice_meta_qos_served_total", `class="interactive"`); got < fastN {
		t.Errorf("class interactive served %.0f requests, fewer than job fast's %.0f", got, fastN)
	}
	if got := s.metric("sluice_meta_qos_served_total", `class="background"`); got < slowN {
		t.Errorf("class background served %.0f requests, fewer than job slow's %.0f", got, slowN)
	}
	s.cli("qos", "rm", "--job", "slow")
	if got := s.metric("sluice_meta_qos_limited_jobs", ""); got != 0 {
		t.Errorf("sluice_meta_qos_limited_jobs = %v after qos rm, want 0", got)
	}
}
