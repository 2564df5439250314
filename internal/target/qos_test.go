package target

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// waitQueued spins until the gate holds n queued requests.
func waitQueued(t *testing.T, g *gate, n int) {
	t.Helper()
	for {
		total := 0
		for _, c := range g.stats().Classes {
			total += c.Queued
		}
		if total == n {
			return
		}
		runtime.Gosched()
	}
}

// TestGateOrdersByClass: with the one place in service taken, a
// checkpoint write queued before an interactive read of the same size goes
// after it; a caller that gives up while queued takes no place.
func TestGateOrdersByClass(t *testing.T) {
	g := newGate(false, 1)
	first, err := g.acquire(context.Background(), wire.QosTag{}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	run := func(name string, c qos.Class) {
		rel, err := g.acquire(context.Background(), TagOf(name, c), 1<<20)
		if err != nil {
			t.Error(err)
			return
		}
		order <- name
		rel()
	}
	go run("ckpt", qos.Checkpoint)
	waitQueued(t, g, 1)
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() {
		_, err := g.acquire(ctx, TagOf("gone", qos.Interactive), 1)
		gaveUp <- err
	}()
	waitQueued(t, g, 2)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire returned %v", err)
	}
	go run("infer", qos.Interactive)
	waitQueued(t, g, 3)
	first()
	if a, b := <-order, <-order; a != "infer" || b != "ckpt" {
		t.Errorf("served %s then %s, want infer then ckpt", a, b)
	}
	st := g.stats()
	if st.InService != 0 {
		t.Errorf("%d in service after every release", st.InService)
	}
	if c := st.Classes["checkpoint"]; c.Served != 1 || c.ServedBytes != 1<<20 {
		t.Errorf("checkpoint stats %+v", c)
	}
	if c := st.Classes["interactive"]; c.Served != 1 {
		t.Errorf("interactive served %d, want 1 (the abandoned one is not served)", c.Served)
	}
	if c := st.Classes["training"]; c.Served != 1 {
		t.Errorf("a request with no identity is not counted as training: %+v", st.Classes)
	}
}

// TestGateJobsBounded: statistics keep at most maxQosJobs jobs; the rest
// are counted under OtherJob.
func TestGateJobsBounded(t *testing.T) {
	g := newGate(true, 0)
	for i := range maxQosJobs + 10 {
		rel, err := g.acquire(context.Background(), TagOf(string(rune('a'+i)), qos.Training), 10)
		if err != nil {
			t.Fatal(err)
		}
		rel()
	}
	st := g.stats()
	if len(st.Jobs) != maxQosJobs {
		t.Fatalf("%d jobs kept, want %d", len(st.Jobs), maxQosJobs)
	}
	var other uint64
	for _, j := range st.Jobs {
		if j.Job == OtherJob {
			other = j.ServedBytes
		}
	}
	if other != 11*10 {
		t.Errorf("other jobs' bytes %d, want %d", other, 11*10)
	}
}

// TestQosTagsCounted: chunk requests over the wire are counted under the
// class and job they carry; an untagged one (an older client) as training,
// job ""; invalid settings are refused.
func TestQosTagsCounted(t *testing.T) {
	e := start(t, 1)
	c := dial(t, e.addr)
	ctx := context.Background()
	ref := wire.ChunkRef{Target: 1, Ino: 5, Slot: 0}
	if _, err := c.Call(ctx, wire.OpChunkWrite, &wire.ChunkWriteReq{ChunkRef: ref, Qos: TagOf("ckpt", qos.Checkpoint)}, [][]byte{data(1, 3000)}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, c, ref, 3000, data(2, 1000), false); err != nil {
		t.Fatal(err)
	}
	var resp wire.ChunkReadResp
	if _, err := c.Call(ctx, wire.OpChunkRead, &wire.ChunkReadReq{ChunkRef: ref, Len: 4096, Qos: TagOf("infer", qos.Interactive)}, nil, &resp, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	st := e.svc.QosStats()
	for class, want := range map[string]uint64{"checkpoint": 3000, "training": 1000, "interactive": 4096, "background": 0} {
		if got := st.Classes[class].ServedBytes; got != want {
			t.Errorf("class %s served %d bytes, want %d", class, got, want)
		}
	}
	jobs := map[string]uint64{}
	for _, j := range st.Jobs {
		jobs[j.Job] = j.ServedBytes
	}
	if jobs["ckpt"] != 3000 || jobs["infer"] != 4096 || jobs[""] != 1000 {
		t.Errorf("jobs served %v", jobs)
	}
	if err := e.svc.ConfigureQos(qos.Config{Jobs: map[string]qos.Limit{"x": {Rate: 5}}}); err == nil {
		t.Error("a limit with a rate and no burst was accepted")
	}
	if err := e.svc.ConfigureQos(ConfigOf(&wire.QosConfig{Weights: []uint32{1, 1, 1, 1}, Jobs: []wire.QosJob{{Job: "x", Rate: 5, Burst: 5}}})); err != nil {
		t.Error(err)
	}
	if n := e.svc.QosStats().LimitedJobs; n != 1 {
		t.Errorf("%d limited jobs after one limit was applied", n)
	}
}
