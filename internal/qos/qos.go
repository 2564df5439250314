// Package qos is the scheduling core of Sluice's quality of service (issue
// 18, part 1): requests carry a job (or tenant) and a priority class; a
// Scheduler orders queued requests by weighted fair queueing across
// classes and round robin across the jobs of a class, and holds back a
// job's requests while its token bucket is empty.
//
// The Scheduler is pure: time is passed in, nothing blocks, nothing does
// I/O. A Gate (gate.go) is the thin part a server puts in front of its
// work: it enqueues each request, lets the Scheduler's choices go while
// fewer than its limit are in service, and sleeps for the wait Next
// returns when every queued request is held back by its bucket. The
// targets gate chunk reads and writes (cost: bytes), the metadata service
// namespace operations (cost: 1 each).
package qos

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Class is a request's priority class.
type Class uint8

// The classes, most urgent first. Background is for the system's own work
// (resync, rebalance, scrub, tier moves).
const (
	Interactive Class = iota // inference, interactive reads: latency first
	Training                 // training data loading
	Checkpoint               // checkpoint writes: throughput, may lag
	Background               // the system's own work
	numClasses
)

var classNames = [numClasses]string{"interactive", "training", "checkpoint", "background"}

func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return fmt.Sprintf("class%d", uint8(c))
}

// FromWire maps the class byte of a wire QoS tag to a Class: 0 (the
// sender named none) is Training, otherwise 1 + the Class; values past
// Background are Background.
func FromWire(c uint8) Class {
	switch {
	case c == 0:
		return Training
	case c > uint8(Background)+1:
		return Background
	}
	return Class(c - 1)
}

// ParseClass reads a class name as String writes it.
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if n == s {
			return Class(i), nil
		}
	}
	return 0, errs.New(errs.Invalid, "qos: unknown class %q (interactive, training, checkpoint, background)", s)
}

// DefaultWeights are the classes' shares of a saturated resource: with all
// four backlogged, interactive gets 8/15, background 1/15.
var DefaultWeights = [numClasses]float64{8, 4, 2, 1}

// Limit is a job's token bucket: Rate cost units per second refill it, up
// to Burst. A zero Rate means no limit.
type Limit struct {
	Rate  float64
	Burst float64
}

// Config is a Scheduler's settings.
type Config struct {
	// Weights of the classes, indexed by Class; zero entries take
	// DefaultWeights'.
	Weights [numClasses]float64
	// Jobs limits named jobs; jobs not named are not limited.
	Jobs map[string]Limit
}

// Validate checks the weights and limits.
func (c Config) Validate() error {
	for i, w := range c.Weights {
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return errs.New(errs.Invalid, "qos: weight %v of class %v", w, Class(i))
		}
	}
	for job, l := range c.Jobs {
		if l.Rate < 0 || l.Burst < 0 || math.IsNaN(l.Rate) || math.IsNaN(l.Burst) || math.IsInf(l.Rate, 0) || math.IsInf(l.Burst, 0) {
			return errs.New(errs.Invalid, "qos: limit %+v of job %q", l, job)
		}
		if l.Rate > 0 && l.Burst <= 0 {
			return errs.New(errs.Invalid, "qos: job %q has a rate but no burst", job)
		}
	}
	return nil
}

// Bucket is a token bucket. The zero value with Rate 0 never limits.
type Bucket struct {
	Limit
	tokens float64
	last   time.Time
}

// NewBucket returns a full bucket as of now.
func NewBucket(l Limit, now time.Time) *Bucket {
	return &Bucket{Limit: l, tokens: l.Burst, last: now}
}

func (b *Bucket) refill(now time.Time) {
	if now.After(b.last) {
		b.tokens = math.Min(b.Burst, b.tokens+b.Rate*now.Sub(b.last).Seconds())
		b.last = now
	}
}

// Ready reports whether a request of the given cost may go at now, and if
// not, how long until it may. A request costing more than Burst may go
// when the bucket is full (it then goes into debt), so no request waits
// forever.
func (b *Bucket) Ready(now time.Time, cost float64) (bool, time.Duration) {
	if b.Rate == 0 {
		return true, 0
	}
	b.refill(now)
	need := math.Min(cost, b.Burst)
	if b.tokens >= need {
		return true, 0
	}
	return false, time.Duration(math.Ceil((need - b.tokens) / b.Rate * float64(time.Second)))
}

// SetLimit changes the bucket's limit at now, keeping its balance (no
// more than the new burst).
func (b *Bucket) SetLimit(l Limit, now time.Time) {
	b.refill(now)
	b.Limit = l
	b.tokens = math.Min(b.tokens, l.Burst)
}

// Take spends cost tokens (the balance may go below zero).
func (b *Bucket) Take(now time.Time, cost float64) {
	if b.Rate == 0 {
		return
	}
	b.refill(now)
	b.tokens -= cost
}

// Request is one queued unit of work.
type Request struct {
	Job   string
	Class Class
	Cost  float64 // in the unit of the jobs' limits: bytes, or 1 per op
	// Value is the caller's, returned with the request by Next.
	Value any
}

// jobQueue is one job's FIFO within a class.
type jobQueue struct {
	job  string
	reqs []Request
}

// classState is one class's queues and its virtual finish tag.
type classState struct {
	weight float64
	jobs   []*jobQueue // round robin: jobs[next] goes first
	next   int
	finish float64 // virtual time at which its last dispatched request finished
	queued int
}

// Scheduler orders requests. It is not safe for concurrent use: its
// owner serializes calls (one mutex in the server that wires it).
type Scheduler struct {
	classes [numClasses]classState
	vtime   float64 // virtual time: the start tag of the last dispatched request
	limits  map[string]Limit
	buckets map[string]*Bucket
	served  [numClasses]float64
}

// New returns a Scheduler with the given configuration.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{buckets: map[string]*Bucket{}}
	s.Configure(cfg)
	return s, nil
}

// Configure changes the weights and limits at runtime (sluice qos set).
// A job newly limited starts with a full bucket at its next request; a job
// whose limit changed keeps its bucket's balance (no more than the new
// burst), so that a limit that moves with every heartbeat (a node's share
// of a cluster-wide limit) does not hand out a fresh burst each time.
// cfg must be valid (Config.Validate).
func (s *Scheduler) Configure(cfg Config) {
	for i := range s.classes {
		w := cfg.Weights[i]
		if w == 0 {
			w = DefaultWeights[i]
		}
		s.classes[i].weight = w
	}
	old := s.limits
	s.limits = make(map[string]Limit, len(cfg.Jobs))
	for job, l := range cfg.Jobs {
		s.limits[job] = l
		if b := s.buckets[job]; b != nil && old[job] != l {
			b.Limit = l
			b.tokens = math.Min(b.tokens, l.Burst)
		}
	}
	for job := range s.buckets {
		if _, ok := s.limits[job]; !ok {
			delete(s.buckets, job)
		}
	}
}

// Limited reports whether job has a limit.
func (s *Scheduler) Limited(job string) bool {
	l, ok := s.limits[job]
	return ok && l.Rate > 0
}

// Len is the number of queued requests.
func (s *Scheduler) Len() int {
	n := 0
	for i := range s.classes {
		n += s.classes[i].queued
	}
	return n
}

// Served returns the cost dispatched per class so far (for metrics).
func (s *Scheduler) Served() [numClasses]float64 { return s.served }

// Enqueue queues r. An unknown class is treated as Background.
func (s *Scheduler) Enqueue(r Request) {
	if r.Class >= numClasses {
		r.Class = Background
	}
	c := &s.classes[r.Class]
	if c.queued == 0 {
		// An idle class saves no credit: it restarts at the current
		// virtual time (start-time fair queueing).
		c.finish = math.Max(c.finish, s.vtime)
	}
	c.queued++
	for _, q := range c.jobs {
		if q.job == r.Job {
			q.reqs = append(q.reqs, r)
			return
		}
	}
	c.jobs = append(c.jobs, &jobQueue{job: r.Job, reqs: []Request{r}})
}

func (s *Scheduler) bucket(job string, now time.Time) *Bucket {
	l, ok := s.limits[job]
	if !ok || l.Rate == 0 {
		return nil
	}
	b := s.buckets[job]
	if b == nil {
		b = NewBucket(l, now)
		s.buckets[job] = b
	}
	return b
}

// Next dequeues the request to run now: among the classes with a request
// whose job's bucket allows it, the one with the smallest virtual finish
// tag; within the class, the next job in round robin order that is
// allowed. If requests are queued but all are held back, it returns ok
// false and the shortest wait until one may go; with nothing queued, ok
// false and wait 0.
func (s *Scheduler) Next(now time.Time) (r Request, ok bool, wait time.Duration) {
	type cand struct {
		class Class
		tag   float64
		qi    int
	}
	var cands []cand
	wait = -1
	for ci := range s.classes {
		c := &s.classes[ci]
		if c.queued == 0 {
			continue
		}
		for k := range c.jobs {
			qi := (c.next + k) % len(c.jobs)
			q := c.jobs[qi]
			head := q.reqs[0]
			if b := s.bucket(q.job, now); b != nil {
				if ready, w := b.Ready(now, head.Cost); !ready {
					if wait < 0 || w < wait {
						wait = w
					}
					continue
				}
			}
			cands = append(cands, cand{Class(ci), c.finish + head.Cost/c.weight, qi})
			break
		}
	}
	if len(cands) == 0 {
		return Request{}, false, max(wait, 0)
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].tag < cands[j].tag })
	best := cands[0]
	c := &s.classes[best.class]
	q := c.jobs[best.qi]
	r = q.reqs[0]
	q.reqs = q.reqs[1:]
	s.vtime = math.Max(s.vtime, c.finish)
	c.finish = best.tag
	c.queued--
	s.served[best.class] += r.Cost
	if b := s.bucket(q.job, now); b != nil {
		b.Take(now, r.Cost)
	}
	if len(q.reqs) == 0 {
		c.jobs = append(c.jobs[:best.qi], c.jobs[best.qi+1:]...)
		if best.qi < c.next {
			c.next--
		}
	} else {
		c.next = best.qi + 1
	}
	if len(c.jobs) > 0 {
		c.next %= len(c.jobs)
	} else {
		c.next = 0
	}
	return r, true, 0
}

// Charge bills extra cost to a request of job and class already
// dispatched, for work whose cost is known only once it is done (a
// directory listing's entries): the job's bucket pays it (going into debt
// if it must) and the class's virtual finish tag moves by extra/weight,
// so that the class's and the job's next requests wait for it as if the
// request had asked for it at first. A non-positive extra changes nothing.
func (s *Scheduler) Charge(job string, class Class, extra float64, now time.Time) {
	if extra <= 0 || math.IsNaN(extra) || math.IsInf(extra, 0) {
		return
	}
	if class >= numClasses {
		class = Background
	}
	c := &s.classes[class]
	c.finish = math.Max(c.finish, s.vtime) + extra/c.weight
	s.served[class] += extra
	if b := s.bucket(job, now); b != nil {
		b.Take(now, extra)
	}
}
