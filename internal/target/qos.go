package target

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// DefaultQosInService is how many chunk reads and writes a Service serves
// at once when its Options do not say: enough to keep the disk and the
// page cache busy (one 1 MiB write takes ~0.3-1 ms on the machines we
// measured, docs/adr/0015-qos.md), few enough that a newly queued
// interactive read waits for at most that many requests ahead of it.
const DefaultQosInService = 8

// maxQosJobs bounds the jobs a Service keeps statistics for, OtherJob
// included, so that a client inventing job names cannot grow its memory or
// the metrics' cardinality: jobs past the first maxQosJobs-1 are counted
// under OtherJob.
const maxQosJobs = 32

// OtherJob is the name statistics of jobs past the first maxQosJobs go under.
const OtherJob = "_other"

// SystemResyncJob is the job of a chain's resync copies (class background).
const SystemResyncJob = "sluice:resync"

// QosWaitBuckets are the upper bounds, in seconds, of the wait-time
// histogram of QosClassStats.
var QosWaitBuckets = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}

// QosClassStats are one class's scheduling counters since the Service started.
type QosClassStats struct {
	Queued      int    // requests waiting now
	Served      uint64 // requests let through
	ServedBytes uint64 // their cost
	// WaitCounts[i] counts the requests that waited at most
	// QosWaitBuckets[i] (not cumulative; the last entry counts the rest).
	WaitCounts []uint64
	WaitSum    float64 // seconds
}

// QosJobStats are one job's counters.
type QosJobStats struct {
	Job         string
	Queued      int
	ServedBytes uint64
}

// QosStats is a snapshot of a Service's scheduler.
type QosStats struct {
	On          bool
	InService   int
	LimitedJobs int                      // jobs with a token bucket in the settings applied
	Classes     map[string]QosClassStats // by class name
	Jobs        []QosJobStats            // sorted by job
}

// classOf maps a wire tag's class to a qos.Class: none is training.
func classOf(t wire.QosTag) qos.Class {
	switch {
	case t.Class == 0:
		return qos.Training
	case t.Class > uint8(qos.Background)+1:
		return qos.Background
	}
	return qos.Class(t.Class - 1)
}

// TagOf is the wire tag of a job and class.
func TagOf(job string, c qos.Class) wire.QosTag { return wire.QosTag{Job: job, Class: uint8(c) + 1} }

// ConfigOf turns the wire settings into a scheduler configuration.
func ConfigOf(m *wire.QosConfig) qos.Config {
	var cfg qos.Config
	for i, w := range m.Weights {
		if i < len(cfg.Weights) {
			cfg.Weights[i] = float64(w)
		}
	}
	if len(m.Jobs) > 0 {
		cfg.Jobs = make(map[string]qos.Limit, len(m.Jobs))
		for _, j := range m.Jobs {
			cfg.Jobs[j.Job] = qos.Limit{Rate: float64(j.Rate), Burst: float64(j.Burst)}
		}
	}
	return cfg
}

// waiter is one request queued in a gate.
type waiter struct {
	ready     chan struct{} // closed when it may go
	abandoned bool          // its caller gave up (gate.mu)
	enq       time.Time
}

type jobCounters struct {
	queued int
	bytes  uint64
}

// gate admits chunk reads and writes through a qos.Scheduler, at most
// limit at once. The decision is the scheduler's; the gate only blocks
// callers and counts.
type gate struct {
	off   bool
	limit int

	mu struct {
		sync.Mutex
		sched     *qos.Scheduler
		inService int
		timer     *time.Timer // wakes dispatch when every queued request waits for its bucket
		closed    bool
		limited   int
		classes   [qos.Background + 1]QosClassStats
		jobs      map[string]*jobCounters
	}
}

func newGate(off bool, limit int) *gate {
	if limit <= 0 {
		limit = DefaultQosInService
	}
	g := &gate{off: off, limit: limit}
	g.mu.sched, _ = qos.New(qos.Config{})
	g.mu.jobs = map[string]*jobCounters{}
	for i := range g.mu.classes {
		g.mu.classes[i].WaitCounts = make([]uint64, len(QosWaitBuckets)+1)
	}
	return g
}

// configure applies new settings; cfg must be valid.
func (g *gate) configure(cfg qos.Config) {
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

func (g *gate) jobLocked(job string) *jobCounters {
	j := g.mu.jobs[job]
	if j == nil {
		named := len(g.mu.jobs)
		if _, ok := g.mu.jobs[OtherJob]; ok {
			named--
		}
		if named >= maxQosJobs-1 {
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

// acquire waits until the request may be served and returns the function
// that ends its service. With the gate off it counts and returns at once.
func (g *gate) acquire(ctx context.Context, tag wire.QosTag, cost int) (release func(), err error) {
	class := classOf(tag)
	if g.off {
		g.mu.Lock()
		c := &g.mu.classes[class]
		c.Served++
		c.ServedBytes += uint64(cost)
		c.WaitCounts[0]++
		g.jobLocked(tag.Job).bytes += uint64(cost)
		g.mu.Unlock()
		return func() {}, nil
	}
	w := &waiter{ready: make(chan struct{}), enq: time.Now()}
	g.mu.Lock()
	g.mu.sched.Enqueue(qos.Request{Job: tag.Job, Class: class, Cost: float64(cost), Value: w})
	g.mu.classes[class].Queued++
	g.jobLocked(tag.Job).queued++
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

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.inService--
	g.dispatchLocked(time.Now())
}

// dispatchLocked lets queued requests go while there is room, and arms
// the timer when the rest wait for their buckets. g.mu must be held.
func (g *gate) dispatchLocked(now time.Time) {
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
		if w.abandoned {
			continue
		}
		g.mu.inService++
		c.Served++
		c.ServedBytes += uint64(r.Cost)
		j.bytes += uint64(r.Cost)
		d := now.Sub(w.enq).Seconds()
		c.WaitSum += d
		c.WaitCounts[sort.SearchFloat64s(QosWaitBuckets, d)]++
		close(w.ready)
	}
}

func (g *gate) kick() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dispatchLocked(time.Now())
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.closed = true
	if g.mu.timer != nil {
		g.mu.timer.Stop()
	}
}

func (g *gate) stats() QosStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := QosStats{On: !g.off, InService: g.mu.inService, LimitedJobs: g.mu.limited, Classes: map[string]QosClassStats{}}
	for i, c := range g.mu.classes {
		c.WaitCounts = append([]uint64(nil), c.WaitCounts...)
		st.Classes[qos.Class(i).String()] = c
	}
	for job, j := range g.mu.jobs {
		st.Jobs = append(st.Jobs, QosJobStats{Job: job, Queued: j.queued, ServedBytes: j.bytes})
	}
	sort.Slice(st.Jobs, func(a, b int) bool { return st.Jobs[a].Job < st.Jobs[b].Job })
	return st
}

// ConfigureQos applies QoS settings (from the metadata service, with each
// heartbeat) to the scheduler in front of the chunk reads and writes.
// Invalid settings are refused.
func (s *Service) ConfigureQos(cfg qos.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.gate.configure(cfg)
	return nil
}

// QosStats returns the scheduler's counters.
func (s *Service) QosStats() QosStats { return s.gate.stats() }
