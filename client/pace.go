package client

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// QosPacePoll is how often a client with a job name reads the QoS
// settings, to pace its job's chunk reads and writes and its namespace
// requests (pacer).
const QosPacePoll = 2 * time.Second

// pacer holds a limited job's chunk reads and writes at the client, so
// that they wait here for their token buckets instead of in the targets'
// schedulers, where each queued write holds its bytes in the server's
// memory and every queued request a connection's slot (docs/qos.md,
// "Pacing at the client"). It mirrors the targets' buckets from the
// settings it polls: one bucket per target process (the job's per-node
// limit) and one for the whole cluster (its cluster-wide limit); and the
// metadata service's (the job's limit in namespace requests), for the
// requests that service schedules at the costs it charges
// (wire.MetaScheduled). The servers still enforce the limits: a pacer
// that is stale or missing costs only the queueing it would have saved.
type pacer struct {
	c    *Client
	job  string
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	node    qos.Limit              // per target process; Rate 0: none
	cluster qos.Limit              // over all targets; Rate 0: none
	meta    qos.Limit              // namespace requests to the metadata service; Rate 0: none
	nodes   map[string]*qos.Bucket // by target address
	all     *qos.Bucket
	metaB   *qos.Bucket   // nil without a meta limit
	waited  time.Duration // total time requests waited here (for tests and metrics)
}

func newPacer(c *Client, job string) *pacer {
	return &pacer{c: c, job: job, stop: make(chan struct{}), done: make(chan struct{}), nodes: map[string]*qos.Bucket{}}
}

// start reads the settings now and then every QosPacePoll until close.
func (p *pacer) start() {
	p.poll()
	go func() {
		defer close(p.done)
		t := time.NewTicker(QosPacePoll)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.poll()
			}
		}
	}()
}

func (p *pacer) close() {
	close(p.stop)
	<-p.done
}

// poll reads the settings and applies the job's limits; a failure keeps
// the limits in force.
func (p *pacer) poll() {
	ctx, cancel := context.WithTimeout(context.Background(), QosPacePoll)
	defer cancel()
	var cfg wire.QosConfig
	if err := p.c.metaCall(ctx, wire.OpQosList, &wire.Empty{}, &cfg); err != nil {
		return
	}
	l := jobLimits(&cfg, p.job)
	p.configure(l, time.Now())
}

// limits are a job's limits in the QoS settings (zero Limits where it has
// none).
type limits struct {
	node, cluster qos.Limit // bytes of chunk reads and writes
	meta          qos.Limit // namespace requests
}

// jobLimits returns job's limits in cfg.
func jobLimits(cfg *wire.QosConfig, job string) limits {
	return limits{node: jobLimit(cfg.Jobs, job), cluster: jobLimit(cfg.ClusterJobs, job), meta: jobLimit(cfg.MetaJobs, job)}
}

// jobLimit returns job's limit among jobs (the last one listed; zero if
// none).
func jobLimit(jobs []wire.QosJob, job string) qos.Limit {
	var l qos.Limit
	for _, j := range jobs {
		if j.Job == job {
			l = qos.Limit{Rate: float64(j.Rate), Burst: float64(j.Burst)}
		}
	}
	return l
}

// configure applies limits: a bucket whose limit changed keeps its
// balance (up to the new burst), as the targets' do; one whose limit went
// away is dropped.
func (p *pacer) configure(l limits, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	node, cluster := l.node, l.cluster
	if node != p.node {
		p.node = node
		for addr, b := range p.nodes {
			if node.Rate == 0 {
				delete(p.nodes, addr)
				continue
			}
			b.SetLimit(node, now)
		}
	}
	if cluster != p.cluster {
		p.cluster = cluster
		p.all = setBucket(p.all, cluster, now)
	}
	if l.meta != p.meta {
		p.meta = l.meta
		p.metaB = setBucket(p.metaB, l.meta, now)
	}
}

// setBucket returns b with limit l from now: nil without a rate, a new
// full bucket if b is nil, else b keeping its balance.
func setBucket(b *qos.Bucket, l qos.Limit, now time.Time) *qos.Bucket {
	switch {
	case l.Rate == 0:
		return nil
	case b == nil:
		return qos.NewBucket(l, now)
	}
	b.SetLimit(l, now)
	return b
}

// admitMeta is admit for a namespace request of cost requests.
func (p *pacer) admitMeta(cost int, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return take(now, cost, p.metaB)
}

// chargeMeta spends extra tokens of the meta bucket without waiting: what
// a request turned out to cost beyond what it waited for (a listing's
// entries), as the metadata service charges it.
func (p *pacer) chargeMeta(extra int, now time.Time) {
	if p == nil || extra <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.metaB != nil {
		p.metaB.Take(now, float64(extra))
	}
}

// admit decides whether a request of cost bytes to the target process at
// addr may go at now: if so it spends the tokens and returns 0, else it
// returns how long to wait before asking again.
func (p *pacer) admit(addr string, cost int, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var nb *qos.Bucket
	if p.node.Rate > 0 {
		if nb = p.nodes[addr]; nb == nil {
			nb = qos.NewBucket(p.node, now)
			p.nodes[addr] = nb
		}
	}
	return take(now, cost, nb, p.all)
}

// take spends cost tokens of every bucket (nil ones never limit) and
// returns 0 if all of them allow the request at now; else it spends none
// and returns how long to wait before asking again.
func take(now time.Time, cost int, buckets ...*qos.Bucket) time.Duration {
	wait := time.Duration(0)
	for _, b := range buckets {
		if b == nil {
			continue
		}
		if ok, w := b.Ready(now, float64(cost)); !ok {
			wait = max(wait, w)
		}
	}
	if wait > 0 {
		return wait
	}
	for _, b := range buckets {
		if b != nil {
			b.Take(now, float64(cost))
		}
	}
	return 0
}

// wait holds a request of cost bytes to addr until its buckets allow it,
// or ctx ends.
func (p *pacer) wait(ctx context.Context, addr string, cost int) error {
	if p == nil || cost <= 0 {
		return nil
	}
	return p.waitFor(ctx, func(now time.Time) time.Duration { return p.admit(addr, cost, now) })
}

// waitMeta holds a namespace request of cost requests until the job's
// bucket on the metadata service allows it, or ctx ends.
func (p *pacer) waitMeta(ctx context.Context, cost int) error {
	if p == nil || cost <= 0 {
		return nil
	}
	return p.waitFor(ctx, func(now time.Time) time.Duration { return p.admitMeta(cost, now) })
}

// waitFor waits until admit, asked again after each wait it returns,
// returns 0, or ctx ends.
func (p *pacer) waitFor(ctx context.Context, admit func(now time.Time) time.Duration) error {
	var t *time.Timer
	start := time.Time{}
	for {
		now := time.Now()
		d := admit(now)
		if d == 0 {
			if !start.IsZero() {
				p.mu.Lock()
				p.waited += now.Sub(start)
				p.mu.Unlock()
			}
			return nil
		}
		if start.IsZero() {
			start = now
		}
		if t == nil {
			t = time.NewTimer(d)
			defer t.Stop()
		} else {
			t.Reset(d)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// PacedWait is how long this client's chunk reads and writes and its
// namespace requests have waited at the client for its job's token buckets
// (zero without a job, or with Options.QosNoPace).
func (c *Client) PacedWait() time.Duration {
	if c.pace == nil {
		return 0
	}
	c.pace.mu.Lock()
	defer c.pace.mu.Unlock()
	return c.pace.waited
}
