package qos

import (
	"context"
	"sort"
	"sync"
	"time"
)

// OtherJob is the name a Gate's statistics give the jobs past the first
// MaxStatJobs-1, so that a client inventing job names cannot grow a
// server's memory or its metrics' cardinality. Jobs with a limit always
// keep their names (the settings bound their number).
const OtherJob = "_other"

// MaxStatJobs bounds the jobs a Gate keeps statistics for, OtherJob
// included.
const MaxStatJobs = 32

// WaitBuckets are the upper bounds, in seconds, of a Gate's wait-time
// histogram (ClassStats.WaitCounts).
var WaitBuckets = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}

// ClassStats are one class's counters since a Gate was made.
type ClassStats struct {
	Queued      int    // requests waiting now
	Served      uint64 // requests let through
	ServedBytes uint64 // their cost (bytes on the targets, requests on the metadata service)
	// WaitCounts[i] counts the requests that waited at most
	// WaitBuckets[i] (not cumulative; the last entry counts the rest).
	WaitCounts []uint64
	WaitSum    float64 // seconds
}

// JobStats are one job's counters.
type JobStats struct {
	Job         string
	Queued      int
	QueuedBytes uint64 // cost of the queued requests
	ServedBytes uint64 // cost let through
}

// GateStats is a snapshot of a Gate.
type GateStats struct {
	On          bool
	InService   int
	LimitedJobs int                   // jobs with a token bucket in the settings applied
	Classes     map[string]ClassStats // by class name
	Jobs        []JobStats            // sorted by job
}

// waiter is one request queued in a Gate.
type waiter struct {
	ready     chan struct{} // closed when it may go
	abandoned bool          // its caller gave up (Gate.mu)
	enq       time.Time
}

type jobCounters struct {
	queued     int
	queuedCost uint64
	cost       uint64
}

// Gate admits requests through a Scheduler, at most a fixed number in
// service at once: the thin, blocking part in front of a server's work.
// The decisions are the Scheduler's; the Gate only blocks callers and
// counts. A Gate that is off lets every request through at once and only
// counts.
type Gate struct {
	off   bool
	limit int

	mu struct {
		sync.Mutex
		sched     *Scheduler
		inService int
		timer     *time.Timer // wakes dispatch when every queued request waits for its bucket
		closed    bool
		limited   int
		classes   [numClasses]ClassStats
		jobs      map[string]*jobCounters
	}
}

// NewGate returns a Gate letting at most limit requests (at least 1) be
// in service at once, with the default weights and no job limits.
func NewGate(off bool, limit int) *Gate {
	g := &Gate{off: off, limit: max(limit, 1)}
	g.mu.sched, _ = New(Config{})
	g.mu.jobs = map[string]*jobCounters{}
	for i := range g.mu.classes {
		g.mu.classes[i].WaitCounts = make([]uint64, len(WaitBuckets)+1)
	}
	return g
}

// Configure applies new settings; cfg must be valid (Config.Validate).
func (g *Gate) Configure(cfg Config) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.sched.Configure(cfg)
	g.mu.limited = 0
	for _, l := range cfg.Jobs {
		if l.Rate > 0 {
			g.mu.limited++
		}
	}
	g.dispatchLocked(time.Now())
}

func (g *Gate) jobLocked(job string) *jobCounters {
	j := g.mu.jobs[job]
	if j == nil {
		named := len(g.mu.jobs)
		if _, ok := g.mu.jobs[OtherJob]; ok {
			named--
		}
		// A limited job keeps its name past the bound (the settings bound
		// those): a node reports its demand for the split of
		// cluster-wide limits from these counters.
		if named >= MaxStatJobs-1 && !g.mu.sched.Limited(job) {
			job = OtherJob
			if j = g.mu.jobs[job]; j != nil {
				return j
			}
		}
		j = &jobCounters{}
		g.mu.jobs[job] = j
	}
	return j
}

// Acquire waits until a request of job and class costing cost may be
// served, and returns the function that ends its service (to be called
// once). It fails only when ctx ends first. With the Gate off it counts
// and returns at once.
func (g *Gate) Acquire(ctx context.Context, job string, class Class, cost int) (release func(), err error) {
	if class >= numClasses {
		class = Background
	}
	if g.off {
		g.mu.Lock()
		c := &g.mu.classes[class]
		c.Served++
		c.ServedBytes += uint64(cost)
		c.WaitCounts[0]++
		g.jobLocked(job).cost += uint64(cost)
		g.mu.Unlock()
		return func() {}, nil
	}
	w := &waiter{ready: make(chan struct{}), enq: time.Now()}
	g.mu.Lock()
	g.mu.sched.Enqueue(Request{Job: job, Class: class, Cost: float64(cost), Value: w})
	g.mu.classes[class].Queued++
	j := g.jobLocked(job)
	j.queued++
	j.queuedCost += uint64(cost)
	g.dispatchLocked(w.enq)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return g.release, nil
	case <-ctx.Done():
		g.mu.Lock()
		select {
		case <-w.ready:
			g.mu.Unlock()
			g.release()
		default:
			w.abandoned = true
			g.mu.Unlock()
		}
		return nil, ctx.Err()
	}
}

// Charge bills extra cost to a request of job and class that Acquire let
// through (Scheduler.Charge): a listing charged for its entries once it
// knows how many. Its counters count the extra as served.
func (g *Gate) Charge(job string, class Class, extra int) {
	if extra <= 0 {
		return
	}
	if class >= numClasses {
		class = Background
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.classes[class].ServedBytes += uint64(extra)
	g.jobLocked(job).cost += uint64(extra)
	if !g.off {
		g.mu.sched.Charge(job, class, float64(extra), time.Now())
	}
}

func (g *Gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.inService--
	g.dispatchLocked(time.Now())
}

// dispatchLocked lets queued requests go while there is room, and arms
// the timer when the rest wait for their buckets. g.mu must be held.
func (g *Gate) dispatchLocked(now time.Time) {
	for g.mu.inService < g.limit {
		r, ok, wait := g.mu.sched.Next(now)
		if !ok {
			if wait > 0 && !g.mu.closed {
				if g.mu.timer == nil {
					g.mu.timer = time.AfterFunc(wait, g.kick)
				} else {
					g.mu.timer.Reset(wait)
				}
			}
			return
		}
		w := r.Value.(*waiter)
		c := &g.mu.classes[r.Class]
		c.Queued--
		j := g.jobLocked(r.Job)
		j.queued--
		j.queuedCost -= uint64(r.Cost)
		if w.abandoned {
			continue
		}
		g.mu.inService++
		c.Served++
		c.ServedBytes += uint64(r.Cost)
		j.cost += uint64(r.Cost)
		d := now.Sub(w.enq).Seconds()
		c.WaitSum += d
		c.WaitCounts[sort.SearchFloat64s(WaitBuckets, d)]++
		close(w.ready)
	}
}

func (g *Gate) kick() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dispatchLocked(time.Now())
}

// Close stops the Gate's timer; requests queued then wait for releases.
func (g *Gate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.closed = true
	if g.mu.timer != nil {
		g.mu.timer.Stop()
	}
}

// Limited reports whether job has a limit in the settings applied.
func (g *Gate) Limited(job string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.sched.Limited(job)
}

// Stats returns the Gate's counters.
func (g *Gate) Stats() GateStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := GateStats{On: !g.off, InService: g.mu.inService, LimitedJobs: g.mu.limited, Classes: map[string]ClassStats{}}
	for i, c := range g.mu.classes {
		c.WaitCounts = append([]uint64(nil), c.WaitCounts...)
		st.Classes[Class(i).String()] = c
	}
	for job, j := range g.mu.jobs {
		st.Jobs = append(st.Jobs, JobStats{Job: job, Queued: j.queued, QueuedBytes: j.queuedCost, ServedBytes: j.cost})
	}
	sort.Slice(st.Jobs, func(a, b int) bool { return st.Jobs[a].Job < st.Jobs[b].Job })
	return st
}
