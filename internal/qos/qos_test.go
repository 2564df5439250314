package qos

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

var t0 = time.Unix(1_800_000_000, 0)

func mustNew(t *testing.T, cfg Config) *Scheduler {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// drain dispatches n requests at time now and returns the cost served per
// class and per job.
func drain(t *testing.T, s *Scheduler, n int, now time.Time) ([numClasses]float64, map[string]float64) {
	t.Helper()
	var byClass [numClasses]float64
	byJob := map[string]float64{}
	for range n {
		r, ok, _ := s.Next(now)
		if !ok {
			t.Fatalf("Next found nothing with %d queued", s.Len())
		}
		byClass[r.Class] += r.Cost
		byJob[r.Job] += r.Cost
	}
	return byClass, byJob
}

// TestWeightedShares: with every class backlogged, each gets cost in
// proportion to its weight.
func TestWeightedShares(t *testing.T) {
	for _, w := range [][numClasses]float64{DefaultWeights, {1, 1, 1, 1}, {10, 1, 3, 2}} {
		s := mustNew(t, Config{Weights: w})
		for c := range numClasses {
			for range 1000 {
				s.Enqueue(Request{Job: c.String(), Class: c, Cost: 1})
			}
		}
		total := 0.0
		for _, x := range w {
			total += x
		}
		const n = 1500
		got, _ := drain(t, s, n, t0)
		for c := range numClasses {
			want := n * w[c] / total
			// Fair queueing keeps each class within about one
			// request of its exact share.
			if math.Abs(got[c]-want) > 2 {
				t.Errorf("weights %v: class %v served %v of %d, want %.1f", w, c, got[c], n, want)
			}
		}
	}
}

// TestCostsWeigh: a class sending large requests gets its share in cost,
// not in number of requests.
func TestCostsWeigh(t *testing.T) {
	s := mustNew(t, Config{Weights: [numClasses]float64{1, 1, 1, 1}})
	for range 100 {
		s.Enqueue(Request{Job: "ckpt", Class: Checkpoint, Cost: 16})
	}
	for range 1600 {
		s.Enqueue(Request{Job: "infer", Class: Interactive, Cost: 1})
	}
	got, _ := drain(t, s, 850, t0)
	if r := got[Interactive] / got[Checkpoint]; r < 0.9 || r > 1.1 {
		t.Fatalf("served interactive %v, checkpoint %v: want equal cost", got[Interactive], got[Checkpoint])
	}
}

// TestIdleClassSavesNoCredit: a class idle while others ran does not get
// a burst of the service it missed when it comes back.
func TestIdleClassSavesNoCredit(t *testing.T) {
	s := mustNew(t, Config{Weights: [numClasses]float64{1, 1, 1, 1}})
	for range 2000 {
		s.Enqueue(Request{Job: "bg", Class: Background, Cost: 1})
	}
	drain(t, s, 1000, t0)
	for range 1000 {
		s.Enqueue(Request{Job: "train", Class: Training, Cost: 1})
	}
	got, _ := drain(t, s, 200, t0)
	if got[Training] < 90 || got[Training] > 110 {
		t.Fatalf("after idling, training got %v of 200, want about half", got[Training])
	}
}

// TestJobsRoundRobin: jobs of one class share it equally.
func TestJobsRoundRobin(t *testing.T) {
	s := mustNew(t, Config{})
	for range 300 {
		s.Enqueue(Request{Job: "a", Class: Training, Cost: 1})
	}
	for range 100 {
		s.Enqueue(Request{Job: "b", Class: Training, Cost: 1})
	}
	_, got := drain(t, s, 150, t0)
	if got["a"] != 75 || got["b"] != 75 {
		t.Fatalf("served %v, want 75 each", got)
	}
	_, got = drain(t, s, 250, t0)
	if got["a"] != 225 || got["b"] != 25 {
		t.Fatalf("then served %v, want the rest of each", got)
	}
	if s.Len() != 0 {
		t.Fatalf("%d left", s.Len())
	}
	if _, ok, wait := s.Next(t0); ok || wait != 0 {
		t.Fatalf("empty scheduler: ok %v wait %v", ok, wait)
	}
}

// TestTokenBucketLimitsJob: a limited job gets its rate over time, the
// others what is left, and Next says how long to wait when only the
// limited job has work.
func TestTokenBucketLimitsJob(t *testing.T) {
	s := mustNew(t, Config{Jobs: map[string]Limit{"ckpt": {Rate: 100, Burst: 10}}})
	for range 1000 {
		s.Enqueue(Request{Job: "ckpt", Class: Interactive, Cost: 1})
	}
	now := t0
	served := 0.0
	for range 2000 {
		r, ok, wait := s.Next(now)
		if !ok {
			if wait <= 0 {
				t.Fatalf("held back with wait %v", wait)
			}
			now = now.Add(wait)
			continue
		}
		served += r.Cost
		if now.Sub(t0) >= 5*time.Second {
			break
		}
	}
	elapsed := now.Sub(t0).Seconds()
	if want := 10 + 100*elapsed; math.Abs(served-want) > 2 {
		t.Fatalf("served %v in %.2fs, want burst 10 + 100/s = %.1f", served, elapsed, want)
	}

	// An unlimited job of a lower class goes while the limited one waits.
	s.Enqueue(Request{Job: "scrub", Class: Background, Cost: 1})
	r, ok, _ := s.Next(now)
	if !ok || r.Job != "scrub" {
		t.Fatalf("got %+v %v, want the unlimited background request", r, ok)
	}
}

// TestBigRequestGoesWhenFull: a request over the burst waits for a full
// bucket, then goes into debt, rather than waiting forever.
func TestBigRequestGoesWhenFull(t *testing.T) {
	b := NewBucket(Limit{Rate: 10, Burst: 5}, t0)
	if ok, _ := b.Ready(t0, 50); !ok {
		t.Fatal("a full bucket refused a request over its burst")
	}
	b.Take(t0, 50)
	ok, wait := b.Ready(t0, 1)
	if ok || wait != 4600*time.Millisecond {
		t.Fatalf("after a debt of 45: ok %v wait %v, want 4.6s", ok, wait)
	}
	if ok, _ := b.Ready(t0.Add(wait), 1); !ok {
		t.Fatal("not ready after the wait it gave")
	}
}

func TestConfigure(t *testing.T) {
	s := mustNew(t, Config{Jobs: map[string]Limit{"j": {Rate: 1, Burst: 1}}})
	s.Enqueue(Request{Job: "j", Class: Training, Cost: 1})
	s.Enqueue(Request{Job: "j", Class: Training, Cost: 1})
	drain(t, s, 1, t0)
	if _, ok, _ := s.Next(t0); ok {
		t.Fatal("a job over its limit went")
	}
	s.Configure(Config{}) // limit removed
	if _, ok, _ := s.Next(t0); !ok {
		t.Fatal("a job whose limit was removed is still held back")
	}
}

// TestConfigureKeepsBalance: a limit that changes (a node's share of a
// cluster-wide limit moves with every heartbeat) keeps the bucket's
// balance, at most the new burst: an empty bucket stays empty, so the
// change hands out no burst.
func TestConfigureKeepsBalance(t *testing.T) {
	s := mustNew(t, Config{Jobs: map[string]Limit{"j": {Rate: 10, Burst: 10}}})
	for range 3 {
		s.Enqueue(Request{Job: "j", Class: Training, Cost: 10})
	}
	drain(t, s, 1, t0) // the burst spent
	s.Configure(Config{Jobs: map[string]Limit{"j": {Rate: 20, Burst: 20}}})
	if _, ok, wait := s.Next(t0); ok || wait != 500*time.Millisecond {
		t.Fatalf("after a rate change: went %v, wait %v; want held back 0.5 s (10 tokens at the new 20/s)", ok, wait)
	}
	// A balance above a smaller new burst is cut to it.
	s2 := mustNew(t, Config{Jobs: map[string]Limit{"j": {Rate: 1, Burst: 100}}})
	s2.Enqueue(Request{Job: "j", Class: Training, Cost: 1})
	drain(t, s2, 1, t0) // bucket made full (100), 1 spent
	s2.Configure(Config{Jobs: map[string]Limit{"j": {Rate: 1, Burst: 5}}})
	for range 6 {
		s2.Enqueue(Request{Job: "j", Class: Training, Cost: 1})
	}
	drain(t, s2, 5, t0)
	if _, ok, _ := s2.Next(t0); ok {
		t.Fatal("a balance above the new burst was kept")
	}
}

func TestValidate(t *testing.T) {
	bad := []Config{
		{Weights: [numClasses]float64{-1}},
		{Weights: [numClasses]float64{math.NaN()}},
		{Jobs: map[string]Limit{"j": {Rate: 1}}},
		{Jobs: map[string]Limit{"j": {Rate: -1, Burst: 1}}},
	}
	for _, c := range bad {
		if _, err := New(c); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want invalid", c, err)
		}
	}
	for c := range numClasses {
		got, err := ParseClass(c.String())
		if err != nil || got != c {
			t.Errorf("ParseClass(%q) = %v, %v", c.String(), got, err)
		}
	}
	if _, err := ParseClass("urgent"); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("ParseClass(urgent) = %v", err)
	}
}

// TestChargeAfterDispatch: cost billed after a request ran (a listing's
// entries) counts as if asked for at first: against the class's share and
// against the job's bucket.
func TestChargeAfterDispatch(t *testing.T) {
	s := mustNew(t, Config{Weights: [numClasses]float64{1, 1, 1, 1}})
	for range 2000 {
		s.Enqueue(Request{Job: "ls", Class: Training, Cost: 1})
		s.Enqueue(Request{Job: "stat", Class: Interactive, Cost: 1})
	}
	counts := map[Class]int{}
	for range 1100 {
		r, ok, _ := s.Next(t0)
		if !ok {
			t.Fatal("nothing to dispatch")
		}
		counts[r.Class]++
		if r.Class == Training {
			s.Charge(r.Job, r.Class, 9, t0) // each listing cost 10 in all
		}
	}
	// Equal weights, equal cost: the listings get a tenth of the
	// requests the stats get.
	if got := float64(counts[Training]) / float64(counts[Interactive]); math.Abs(got-0.1) > 0.01 {
		t.Errorf("listings:stats dispatched %d:%d (%.3f), want about 0.1", counts[Training], counts[Interactive], got)
	}
	if got := s.Served()[Training]; got != float64(counts[Training])*10 {
		t.Errorf("training served %v, want %d", got, counts[Training]*10)
	}

	// A job of 10 per second (burst 10) charged 19 after a request of 1
	// owes 10: its next request of 1 waits 1.1 s.
	s = mustNew(t, Config{Jobs: map[string]Limit{"ls": {Rate: 10, Burst: 10}}})
	s.Enqueue(Request{Job: "ls", Class: Training, Cost: 1})
	s.Enqueue(Request{Job: "ls", Class: Training, Cost: 1})
	if _, ok, _ := s.Next(t0); !ok {
		t.Fatal("a full bucket held back a request")
	}
	s.Charge("ls", Training, 19, t0)
	if _, ok, wait := s.Next(t0); ok || wait != 1100*time.Millisecond {
		t.Errorf("after the charge: dispatched %v, wait %v, want held back 1.1s", ok, wait)
	}
	if _, ok, _ := s.Next(t0.Add(1100 * time.Millisecond)); !ok {
		t.Error("the bucket did not refill")
	}
	for _, bad := range []float64{0, -5, math.NaN(), math.Inf(1)} {
		before := s.Served()
		s.Charge("ls", Training, bad, t0)
		if s.Served() != before {
			t.Errorf("charge %v changed the served cost", bad)
		}
	}
}
