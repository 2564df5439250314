package target

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// MetaAPI is the metadata service as a storage node's agent talks to it.
type MetaAPI interface {
	Meta
	Register(ctx context.Context, req *wire.RegisterReq) (wire.RegisterResp, error)
	Heartbeat(ctx context.Context, req *wire.HeartbeatReq) (wire.HeartbeatResp, error)
}

// AgentOptions configure an Agent.
type AgentOptions struct {
	Node        string // the node's name, stable across restarts
	Addr        string // the address the node's targets are served at
	Incarnation uint64 // differs for every start of the process
	// Interval is the heartbeat period (default 1s).
	Interval time.Duration
	// Fence makes the targets refuse replicated-chain requests when no
	// heartbeat got through for that long (0: never). It must be shorter
	// than the metadata service's heartbeat timeout.
	Fence  time.Duration
	Logger *slog.Logger
}

// Agent is a storage node's link to the metadata service: it heart-beats
// with the targets' usage, fetches the chain table when its version moves
// and hands it to the Service.
type Agent struct {
	svc  *Service
	meta MetaAPI
	use  qosUse // Beat's own
	opts AgentOptions
	log  *slog.Logger
}

// NewAgent connects svc to the metadata service m.
func NewAgent(svc *Service, m MetaAPI, opts AgentOptions) *Agent {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	svc.SetMeta(m, opts.Fence)
	return &Agent{svc: svc, meta: m, opts: opts, log: log}
}

// Beat sends one heartbeat and, if the chain table moved, fetches it.
func (a *Agent) Beat(ctx context.Context) error {
	var rs []wire.ResyncStat
	for _, r := range a.svc.Resyncs() {
		rs = append(rs, wire.ResyncStat{Chain: r.Chain, Version: r.Version, From: r.From, To: r.To,
			Looked: uint64(r.Looked), Copied: uint64(r.Copied), Total: uint64(r.Total)})
	}
	use := a.use.sample(a.svc.QosStats().Jobs, time.Now())
	resp, err := a.meta.Heartbeat(ctx, &wire.HeartbeatReq{Node: a.opts.Node, Addr: a.opts.Addr, Incarnation: a.opts.Incarnation, Targets: a.svc.StatAll(), Resyncs: rs, QosUse: use})
	if err != nil {
		return err
	}
	a.svc.Contact()
	if resp.Qos != nil {
		if err := a.svc.ConfigureQos(ConfigOf(resp.Qos)); err != nil {
			a.log.Warn("target: QoS settings from the metadata service refused", "err", err)
		}
	}
	if resp.ChainsVersion != a.svc.ChainsVersion() || a.svc.cs.viewEmpty() {
		return a.svc.refresh(ctx)
	}
	return nil
}

// Run heart-beats every Interval until ctx is done.
func (a *Agent) Run(ctx context.Context) {
	t := time.NewTicker(a.opts.Interval)
	defer t.Stop()
	failing := false
	for {
		bctx, cancel := context.WithTimeout(ctx, max(a.opts.Interval, time.Second))
		err := a.Beat(bctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			a.log.Warn("target: heartbeat failed", "err", err)
			failing = true
		case err == nil && failing:
			a.log.Info("target: heartbeats get through again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (cs *chainState) viewEmpty() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.mu.view.chains == nil
}

// RemoteMeta reaches the metadata services over the wire protocol, trying
// each address in turn until one answers.
type RemoteMeta struct {
	addrs []string

	mu   sync.Mutex
	next int // the address to try first
	conn *wire.Conn
}

// NewRemoteMeta returns a MetaAPI over the given metadata service
// addresses.
func NewRemoteMeta(addrs []string) *RemoteMeta { return &RemoteMeta{addrs: addrs} }

// Close closes the connection.
func (r *RemoteMeta) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil {
		r.conn.Close()
		r.conn = nil
	}
	return nil
}

func (r *RemoteMeta) call(ctx context.Context, op wire.Op, req, resp wire.Message) error {
	var last error
	for range len(r.addrs) {
		r.mu.Lock()
		c := r.conn
		addr := r.addrs[r.next%len(r.addrs)]
		r.mu.Unlock()
		if c == nil || c.Err() != nil {
			dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			var err error
			c, err = wire.Dial(dctx, addr)
			cancel()
			if err != nil {
				last = err
				r.rotate(nil)
				continue
			}
			r.mu.Lock()
			if r.conn != nil {
				r.conn.Close()
			}
			r.conn = c
			r.mu.Unlock()
		}
		_, err := c.Call(ctx, op, req, nil, resp, nil)
		if err == nil || (errs.CodeOf(err) != errs.Unavailable && c.Err() == nil) {
			return err
		}
		last = err
		r.rotate(c)
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("target: no metadata service answered (%v): %w", r.addrs, last)
}

// rotate drops a failed connection and moves on to the next address.
func (r *RemoteMeta) rotate(failed *wire.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if failed != nil && r.conn == failed {
		r.conn.Close()
		r.conn = nil
	}
	r.next++
}

func (r *RemoteMeta) Register(ctx context.Context, req *wire.RegisterReq) (wire.RegisterResp, error) {
	var resp wire.RegisterResp
	err := r.call(ctx, wire.OpRegister, req, &resp)
	return resp, err
}

func (r *RemoteMeta) Heartbeat(ctx context.Context, req *wire.HeartbeatReq) (wire.HeartbeatResp, error) {
	var resp wire.HeartbeatResp
	err := r.call(ctx, wire.OpHeartbeat, req, &resp)
	return resp, err
}

func (r *RemoteMeta) Cluster(ctx context.Context) (*wire.ClusterInfo, error) {
	var info wire.ClusterInfo
	if err := r.call(ctx, wire.OpCluster, &wire.Empty{}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

func (r *RemoteMeta) SyncDone(ctx context.Context, req *wire.SyncDoneReq) error {
	return r.call(ctx, wire.OpSyncDone, req, &wire.Empty{})
}

var _ MetaAPI = (*RemoteMeta)(nil)

// qosUse turns the scheduler's per-job counters into what each job asked
// of the node since the last sample (wire.QosUse): the bytes served per
// second plus the bytes waiting (as if they were to go within a second),
// for the split of cluster-wide limits.
type qosUse struct {
	at     time.Time
	served map[string]uint64
}

func (u *qosUse) sample(jobs []qos.JobStats, now time.Time) []wire.QosUse {
	dt := now.Sub(u.at).Seconds()
	first := u.served == nil
	prev := u.served
	u.served, u.at = make(map[string]uint64, len(jobs)), now
	var out []wire.QosUse
	for _, j := range jobs {
		u.served[j.Job] = j.ServedBytes
		if j.Job == "" || j.Job == qos.OtherJob {
			continue
		}
		var rate float64
		if !first && dt > 0 && j.ServedBytes >= prev[j.Job] {
			rate = float64(j.ServedBytes-prev[j.Job]) / dt
		}
		if d := uint64(rate) + j.QueuedBytes; d > 0 {
			out = append(out, wire.QosUse{Job: j.Job, Demand: d})
		}
	}
	return out
}
