package qos

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
)

// waitQueued spins until the gate holds n queued requests.
func waitQueued(t *testing.T, g *Gate, n int) {
	t.Helper()
	for {
		total := 0
		for _, c := range g.Stats().Classes {
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
	g := NewGate(false, 1)
	first, err := g.Acquire(context.Background(), "", Training, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	run := func(name string, c Class) {
		rel, err := g.Acquire(context.Background(), name, c, 1<<20)
		if err != nil {
			t.Error(err)
			return
		}
		order <- name
		rel()
	}
	go run("ckpt", Checkpoint)
	waitQueued(t, g, 1)
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() {
		_, err := g.Acquire(ctx, "gone", Interactive, 1)
		gaveUp <- err
	}()
	waitQueued(t, g, 2)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire returned %v", err)
	}
	go run("infer", Interactive)
	waitQueued(t, g, 3)
	first()
	if a, b := <-order, <-order; a != "infer" || b != "ckpt" {
		t.Errorf("served %s then %s, want infer then ckpt", a, b)
	}
	st := g.Stats()
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
		t.Errorf("the untagged request is not counted as training: %+v", st.Classes)
	}
}

// TestGateJobsBounded: statistics keep at most MaxStatJobs jobs; the rest
// are counted under OtherJob.
func TestGateJobsBounded(t *testing.T) {
	g := NewGate(true, 1)
	for i := range MaxStatJobs + 10 {
		rel, err := g.Acquire(context.Background(), string(rune('a'+i)), Training, 10)
		if err != nil {
			t.Fatal(err)
		}
		rel()
	}
	st := g.Stats()
	if len(st.Jobs) != MaxStatJobs {
		t.Fatalf("%d jobs kept, want %d", len(st.Jobs), MaxStatJobs)
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

// TestGateLimitedJobsKeepNames: past the bound, a job with a limit is
// still counted under its own name (a node reports its demand from these
// counters), an unlimited one under OtherJob.
func TestGateLimitedJobsKeepNames(t *testing.T) {
	g := NewGate(false, 4)
	g.Configure(Config{Jobs: map[string]Limit{"limited": {Rate: 1 << 30, Burst: 1 << 30}}})
	for i := range MaxStatJobs + 5 {
		rel, err := g.Acquire(context.Background(), fmt.Sprint("j", i), Training, 10)
		if err != nil {
			t.Fatal(err)
		}
		rel()
	}
	for _, job := range []string{"limited", "unlimited"} {
		rel, err := g.Acquire(context.Background(), job, Training, 7)
		if err != nil {
			t.Fatal(err)
		}
		rel()
	}
	byJob := map[string]uint64{}
	for _, j := range g.Stats().Jobs {
		byJob[j.Job] = j.ServedBytes
	}
	if byJob["limited"] != 7 {
		t.Errorf("the limited job's bytes under its name: %d, want 7", byJob["limited"])
	}
	if _, ok := byJob["unlimited"]; ok {
		t.Error("an unlimited job past the bound kept its name")
	}
	if byJob[OtherJob] != 6*10+7 {
		t.Errorf("other jobs' bytes %d, want %d", byJob[OtherJob], 6*10+7)
	}
}
