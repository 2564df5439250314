package qos

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// TestClientPacing: a limited job's client holds its chunk reads at the
// client until the job's token bucket allows them, so the targets'
// scheduler queues few of them (each queued write would hold its bytes
// in the server's memory), where a client with pacing off
// (Options.QosNoPace) leaves them queued there; both get the job's rate.
// Each client runs 16 readers of 1 MiB until the targets have served it
// 6 MiB more: a count, not a duration.
func TestClientPacing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	s := startServer(t)
	const size = 16 << 20
	s.putFile("/data", size)
	s.cli("qos", "set", "--job", "slow", "--rate", "1M", "--burst", "1M")
	s.waitLimited(1)
	opts := client.Options{Server: s.addr, Job: "slow", Class: "training", ReadAhead: -1}
	run := func(noPace bool) (maxQueued float64, waited time.Duration) {
		return s.pacedRun(t, opts, noPace, gateMetrics{"sluice_qos_job_served_bytes_total", "sluice_qos_job_queued"}, 6<<20,
			func(ctx context.Context, c *client.Client) { readLoop(ctx, t, c, "/data", size) })
	}
	pacedQ, pacedWait := run(false)
	unpacedQ, unpacedWait := run(true)
	t.Logf("most requests of the job queued at the targets: paced %v (waited %v at the client), unpaced %v (waited %v)", pacedQ, pacedWait, unpacedQ, unpacedWait)
	if pacedWait == 0 || unpacedWait != 0 {
		t.Errorf("time waited at the client: paced %v, unpaced %v; want some, none", pacedWait, unpacedWait)
	}
	// Without pacing, the 16 readers' requests wait at the targets; with
	// it at most a few (the client's and the targets' buckets are not in
	// step to the microsecond).
	if unpacedQ < 8 || pacedQ > 4 {
		t.Errorf("most queued at the targets: paced %v, unpaced %v; want at most 4 and at least 8", pacedQ, unpacedQ)
	}
}

// TestClientPacingMeta is TestClientPacing for namespace requests: a job
// limited on the metadata service (--meta-rate) holds its stats at the
// client, so that service's QoS scheduler queues few of them, where a
// client with pacing off leaves its 16 workers' requests queued there.
// Each client runs until the service has served the job 40 requests more:
// a count, not a duration.
func TestClientPacingMeta(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	s := startServer(t)
	s.putFile("/f", 1)
	s.cli("qos", "set", "--job", "slowmeta", "--meta-rate", "20", "--meta-burst", "2")
	s.waitMetric("sluice_meta_qos_limited_jobs", 1, "the metadata service never applied the job's limit")
	opts := client.Options{Server: s.addr, Job: "slowmeta", Class: "training"}
	run := func(noPace bool) (maxQueued float64, waited time.Duration) {
		return s.pacedRun(t, opts, noPace, gateMetrics{"sluice_meta_qos_job_served_requests_total", "sluice_meta_qos_job_queued"}, 40,
			func(ctx context.Context, c *client.Client) {
				for ctx.Err() == nil {
					if _, err := c.Stat(ctx, "/f"); err != nil && ctx.Err() == nil {
						t.Error(err)
						return
					}
				}
			})
	}
	pacedQ, pacedWait := run(false)
	unpacedQ, unpacedWait := run(true)
	t.Logf("most stats of the job queued at the metadata service: paced %v (waited %v at the client), unpaced %v (waited %v)", pacedQ, pacedWait, unpacedQ, unpacedWait)
	if pacedWait == 0 || unpacedWait != 0 {
		t.Errorf("time waited at the client: paced %v, unpaced %v; want some, none", pacedWait, unpacedWait)
	}
	if unpacedQ < 8 || pacedQ > 4 {
		t.Errorf("most queued at the metadata service: paced %v, unpaced %v; want at most 4 and at least 8", pacedQ, unpacedQ)
	}
}

// gateMetrics name a QoS gate's per-job metrics: what it served (bytes or
// requests) and how many requests wait in it.
type gateMetrics struct{ served, queued string }

// pacedRun runs 16 workers of a client with opts (pacing off with noPace)
// until the gate has served opts.Job need more, sampling every 20 ms how
// many of the job's requests wait in it: a count, not a duration. It
// returns the most that waited and how long the client held requests.
func (s *server) pacedRun(t *testing.T, opts client.Options, noPace bool, m gateMetrics, need float64, work func(context.Context, *client.Client)) (maxQueued float64, waited time.Duration) {
	t.Helper()
	opts.QosNoPace = noPace
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	c, err := client.New(ctx, opts)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	job := fmt.Sprintf("job=%q", opts.Job)
	served := func() float64 { return s.metric(m.served, job) }
	start := served()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() { work(ctx, c) })
	}
	deadline := time.Now().Add(2 * time.Minute)
	for served() < start+need {
		maxQueued = max(maxQueued, s.metric(m.queued, job))
		if time.Now().After(deadline) {
			t.Errorf("the limited job was not served %v more in 2 minutes (%s)", need, m.served)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()
	return maxQueued, c.PacedWait()
}
