package client

import (
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestPacerAdmit: the pacer's decisions, without I/O: a per-node bucket
// for each target process and one for the cluster, a request going only
// when both allow it, limits that change keeping the balance and limits
// that go away freeing the job.
func TestPacerAdmit(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	p := newPacer(nil, "j")
	if d := p.admit("a", 1<<30, t0); d != 0 {
		t.Fatalf("no limits, yet a request waits %v", d)
	}
	p.configure(limits{node: qos.Limit{Rate: 1000, Burst: 1000}, cluster: qos.Limit{}}, t0)
	if d := p.admit("a", 800, t0); d != 0 {
		t.Fatalf("a full bucket held 800 of 1000 back %v", d)
	}
	if d := p.admit("a", 800, t0); d != 600*time.Millisecond {
		t.Fatalf("800 more wait %v, want 600ms (200 left, 1000/s)", d)
	}
	if d := p.admit("b", 800, t0); d != 0 {
		t.Fatalf("another target process's bucket is full, yet the request waits %v", d)
	}
	if d := p.admit("a", 800, t0.Add(600*time.Millisecond)); d != 0 {
		t.Fatalf("the bucket did not refill: wait %v", d)
	}
	// A cluster-wide limit holds the requests to every process together.
	p.configure(limits{node: qos.Limit{}, cluster: qos.Limit{Rate: 100, Burst: 500}}, t0)
	if d := p.admit("a", 500, t0); d != 0 {
		t.Fatalf("a full cluster bucket held a request back %v", d)
	}
	if d := p.admit("b", 100, t0); d != time.Second {
		t.Fatalf("the cluster bucket let another process's request go after the burst (wait %v, want 1s)", d)
	}
	// A changed limit keeps the balance: still empty.
	p.configure(limits{node: qos.Limit{}, cluster: qos.Limit{Rate: 200, Burst: 400}}, t0)
	if d := p.admit("b", 100, t0); d != 500*time.Millisecond {
		t.Fatalf("after a new rate, wait %v, want 500ms", d)
	}
	p.configure(limits{node: qos.Limit{}, cluster: qos.Limit{}}, t0)
	if d := p.admit("b", 1<<30, t0); d != 0 {
		t.Fatalf("limits removed, yet a request waits %v", d)
	}
}

// TestJobLimits: the pacer takes its job's per-node, cluster-wide and
// metadata limits from the settings, no other job's.
func TestJobLimits(t *testing.T) {
	cfg := &wire.QosConfig{
		Jobs:        []wire.QosJob{{Job: "x", Rate: 5, Burst: 6}, {Job: "j", Rate: 7, Burst: 8}},
		ClusterJobs: []wire.QosJob{{Job: "j", Rate: 9, Burst: 10}},
		MetaJobs:    []wire.QosJob{{Job: "j", Rate: 1, Burst: 1}},
	}
	l := jobLimits(cfg, "j")
	if l.node != (qos.Limit{Rate: 7, Burst: 8}) || l.cluster != (qos.Limit{Rate: 9, Burst: 10}) || l.meta != (qos.Limit{Rate: 1, Burst: 1}) {
		t.Fatalf("limits of j: %+v", l)
	}
	if l := jobLimits(cfg, "none"); l != (limits{}) {
		t.Fatalf("a job without limits got %+v", l)
	}
}

// TestPacerMeta: namespace requests wait for the job's bucket on the
// metadata service, apart from the chunk buckets; a listing's extra cost
// is charged after it, putting the bucket in debt that later requests
// wait out; no meta limit, no wait.
func TestPacerMeta(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	p := newPacer(nil, "j")
	if d := p.admitMeta(1, t0); d != 0 {
		t.Fatalf("no meta limit, yet a request waits %v", d)
	}
	p.configure(limits{node: qos.Limit{Rate: 1, Burst: 1}, meta: qos.Limit{Rate: 10, Burst: 2}}, t0)
	for i := range 2 {
		if d := p.admitMeta(1, t0); d != 0 {
			t.Fatalf("request %d of a burst of 2 waits %v", i, d)
		}
	}
	if d := p.admitMeta(1, t0); d != 100*time.Millisecond {
		t.Fatalf("a third request waits %v, want 100ms (10/s)", d)
	}
	if d := p.admit("a", 1, t0); d != 0 {
		t.Fatalf("the chunk bucket is full, yet a chunk read waits %v for the meta bucket", d)
	}
	// A listing that cost 5 more than the request it waited for.
	p.chargeMeta(5, t0)
	if d := p.admitMeta(1, t0); d != 600*time.Millisecond {
		t.Fatalf("after a listing's charge a request waits %v, want 600ms (5 in debt, 1 more)", d)
	}
	p.configure(limits{}, t0)
	if d := p.admitMeta(100, t0); d != 0 {
		t.Fatalf("limits removed, yet a request waits %v", d)
	}
}
