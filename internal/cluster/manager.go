package cluster

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Options configures Manager.
type Options struct {
	// DB persists the cluster state: targets, nodes and their last
	// heartbeats, chains (keys "T", "N", "R", see doc.go). Required; it is
	// normally the metadata service's DB, shared by every metadata service
	// of the file system.
	DB kv.DB
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// HeartbeatTimeout is how long a node may go without a heartbeat
	// before its targets count as down and leave their chains (default 5s).
	HeartbeatTimeout time.Duration
	// Refresh is how often the cached cluster state is reloaded from the
	// DB and down nodes are looked for (default 500ms).
	Refresh time.Duration
	// ReplaceAfter is how long a node may stay dead (no heartbeat) before
	// its offline replicas are replaced by targets of other nodes, which
	// the chains' tails then fill (re-replication). 0: never.
	ReplaceAfter time.Duration
	// MaxSyncing bounds how many chains may have a syncing replica before
	// re-replication replaces more (default 4): the rate limit of the
	// copying.
	MaxSyncing int
	// Timeout bounds one call to a target (default 5s).
	Timeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Manager is the cluster manager: it keeps the registry of storage
// nodes and targets, their heartbeats and the chain table in the KV (so
// that every metadata service sharing the KV agrees), takes the targets of
// nodes that stop heart-beating out of their chains, and reaches targets
// over the wire protocol. A cached copy of the state, reloaded every
// Refresh while Run runs, answers List and Chains.
//
// Every transaction that changes what storage nodes act on (target IDs,
// chains and their replicas' states) requires a sync (kv.Txn.RequireSync):
// it becomes visible only once durable, so a power loss of the metadata
// service can never take back a target ID that was given out or a chain
// version that a node has seen. Heartbeats that change nothing else are
// left to the engine's sync window.
//
// Lock order: mu is never held while dialing, calling a target or running
// a KV transaction.
type Manager struct {
	db      kv.DB
	log     *slog.Logger
	timeout time.Duration
	hbLimit time.Duration
	replace time.Duration
	maxSync int
	every   time.Duration
	now     func() time.Time

	mu struct {
		sync.Mutex
		st     clusterState
		ver    uint64                // bumped whenever st changes (StateVersion)
		conns  map[string]*wire.Conn // by address
		closed bool
	}
	closed    chan struct{}
	closeOnce sync.Once
	runWG     sync.WaitGroup // Run calls in progress; Add under mu
}

// LocalNode is the node name of targets registered without one (the
// targets of `sluice serve`, and records from before nodes existed).
const LocalNode = "local"

// New loads the cluster state from opts.DB.
func New(ctx context.Context, opts Options) (*Manager, error) {
	if opts.DB == nil {
		return nil, errs.New(errs.Invalid, "cluster: Options.DB is required")
	}
	r := &Manager{
		db:      opts.DB,
		log:     cmp.Or(opts.Logger, slog.Default()),
		timeout: cmp.Or(opts.Timeout, 5*time.Second),
		hbLimit: cmp.Or(opts.HeartbeatTimeout, 5*time.Second),
		replace: opts.ReplaceAfter,
		maxSync: cmp.Or(opts.MaxSyncing, 4),
		every:   cmp.Or(opts.Refresh, 500*time.Millisecond),
		now:     opts.Now,
		closed:  make(chan struct{}),
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.mu.conns = make(map[string]*wire.Conn)
	if err := r.reload(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the cluster state from the KV into the cache now (Run does
// it every Refresh).
func (r *Manager) Reload(ctx context.Context) error { return r.reload(ctx) }

// reload reads the cluster state from the KV into the cache.
func (r *Manager) reload(ctx context.Context) error {
	var st clusterState
	err := r.db.View(ctx, func(tx kv.Txn) error {
		var err error
		st, err = loadState(tx)
		return err
	})
	if err != nil {
		return fmt.Errorf("cluster: load cluster state: %w", err)
	}
	r.mu.Lock()
	r.mu.st = st
	r.mu.ver++
	r.mu.Unlock()
	return nil
}

// StateVersion returns a number that changes whenever the cached state
// that List, Chains and Pools answer from changes (a reload, a
// heartbeat), so that callers may keep what they derived from it until it
// does. Target health also depends on the time (a node whose heartbeats
// stop turns unhealthy without any change).
func (r *Manager) StateVersion() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.ver
}

func loadState(tx kv.Txn) (clusterState, error) {
	st := clusterState{
		targets:  make(map[placement.TargetID]targetRecord),
		nodes:    make(map[string]nodeRecord),
		chains:   make(map[placement.ChainID]placement.Chain),
		pools:    make(map[string][]placement.TargetID),
		draining: make(map[placement.TargetID]bool),
		removed:  make(map[placement.TargetID]bool),
		moves:    make(map[placement.ChainID]placement.DrainMove),
	}
	var bad error
	scan := func(pfx byte, fn func(k, v []byte) error) error {
		start := []byte{pfx}
		err := tx.Scan(start, kv.PrefixEnd(start), 0, func(k, v []byte) bool {
			bad = fn(k[1:], v)
			return bad == nil
		})
		return cmp.Or(err, bad)
	}
	err := scan(pfxTarget, func(k, v []byte) error {
		if len(k) != 4 {
			return errs.New(errs.Corruption, "cluster: bad target key %q", k)
		}
		t, err := decodeTargetRecord(v)
		st.targets[placement.TargetID(binary.BigEndian.Uint32(k))] = t
		return err
	})
	if err != nil {
		return st, err
	}
	err = scan(pfxNode, func(k, v []byte) error {
		// A record this build cannot read (an older format) is skipped:
		// the node's next heartbeat rewrites it.
		if n, err := decodeNodeRecord(v); err == nil {
			st.nodes[string(k)] = n
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	err = scan(pfxChain, func(k, v []byte) error {
		c, err := decodeChain(v)
		st.chains[c.ID] = c
		return err
	})
	if err != nil {
		return st, err
	}
	err = scan(pfxPool, func(k, v []byte) error {
		ts, err := decodePool(v)
		st.pools[string(k)] = ts
		return err
	})
	if err != nil {
		return st, err
	}
	err = scan(pfxDrain, func(k, v []byte) error {
		if len(k) != 4 || len(v) != 1 || (v[0] != drainOn && v[0] != drainRemoved) {
			return errs.New(errs.Corruption, "cluster: bad draining record %q = % x", k, v)
		}
		id := placement.TargetID(binary.BigEndian.Uint32(k))
		if v[0] == drainRemoved {
			st.removed[id] = true
		} else {
			st.draining[id] = true
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	err = scan(pfxMove, func(k, v []byte) error {
		m, err := decodeMove(k, v)
		st.moves[m.Chain] = m
		return err
	})
	if err != nil {
		return st, err
	}
	if v, err := tx.Get(keyChainsVer); err == nil {
		st.chainsVer, err = parseU64(v, "chain table version")
		return st, err
	} else if !errors.Is(err, kv.ErrNotFound) {
		return st, err
	}
	return st, nil
}

// alive reports whether node n heart-beat recently enough.
func (r *Manager) alive(n nodeRecord, now time.Time) bool {
	return n.LastSeen != 0 && now.Sub(time.Unix(0, n.LastSeen)) < r.hbLimit
}

// RegisterTarget records (durably) that target id of node LocalNode is
// served at addr. `sluice serve` uses it for its own targets.
func (r *Manager) RegisterTarget(ctx context.Context, id placement.TargetID, addr string) error {
	if addr == "" {
		return errs.New(errs.Invalid, "cluster: register target %d: empty address", id)
	}
	if placement.ChainID(id) >= placement.FirstReplicatedChain || id == 0 {
		return errs.New(errs.Invalid, "cluster: register target %d: IDs must be between 1 and %d", id, placement.FirstReplicatedChain-1)
	}
	err := r.db.Update(ctx, func(tx kv.Txn) error {
		tx.RequireSync() // durable before visible: see Manager
		tx.Set(targetKey(id), targetRecord{Node: LocalNode, Addr: addr}.encode())
		return bumpCounter(tx, keyNextTarget, uint64(id)+1)
	})
	if err != nil {
		return fmt.Errorf("cluster: register target %d at %s: %w", id, addr, err)
	}
	return r.reload(ctx)
}

// bumpCounter raises counter key to at least v.
func bumpCounter(tx kv.Txn, key []byte, v uint64) error {
	cur, err := getCounter(tx, key, 1)
	if err != nil {
		return err
	}
	if v > cur {
		tx.Set(key, u64Value(v))
	}
	return nil
}

func getCounter(tx kv.Txn, key []byte, def uint64) (uint64, error) {
	v, err := tx.Get(key)
	if errors.Is(err, kv.ErrNotFound) {
		return def, nil
	}
	if err != nil {
		return 0, err
	}
	return parseU64(v, string(key))
}

// Register records a storage node and its targets, giving out req.Want new
// target IDs. A target already registered to another node is refused.
func (r *Manager) Register(ctx context.Context, req *wire.RegisterReq) (wire.RegisterResp, error) {
	if req.Node == "" || req.Addr == "" {
		return wire.RegisterResp{}, errs.New(errs.Invalid, "cluster: register: node name and address are required")
	}
	if req.Want > placement.MaxStripeCount {
		return wire.RegisterResp{}, errs.New(errs.Invalid, "cluster: register node %s: %d new targets is over the limit of %d", req.Node, req.Want, placement.MaxStripeCount)
	}
	var resp wire.RegisterResp
	err := r.db.Update(ctx, func(tx kv.Txn) error {
		tx.RequireSync() // durable before visible: see Manager
		resp.IDs = nil
		for _, id := range req.Have {
			v, err := tx.Get(targetKey(id))
			if errors.Is(err, kv.ErrNotFound) {
				return errs.New(errs.Invalid, "cluster: node %s has target %d, which this file system never gave out (a data dir of another file system?)", req.Node, id)
			}
			if err != nil {
				return err
			}
			t, err := decodeTargetRecord(v)
			if err != nil {
				return err
			}
			if t.Node != req.Node {
				return errs.New(errs.Invalid, "cluster: target %d belongs to node %s, not %s", id, t.Node, req.Node)
			}
			tx.Set(targetKey(id), targetRecord{Node: req.Node, Addr: req.Addr}.encode())
		}
		next, err := getCounter(tx, keyNextTarget, 1)
		if err != nil {
			return err
		}
		for range req.Want {
			id := placement.TargetID(next)
			tx.Set(targetKey(id), targetRecord{Node: req.Node, Addr: req.Addr}.encode())
			resp.IDs = append(resp.IDs, id)
			next++
		}
		if placement.ChainID(next) >= placement.FirstReplicatedChain {
			return errs.New(errs.NoSpace, "cluster: out of target IDs")
		}
		tx.Set(keyNextTarget, u64Value(next))
		return nil
	})
	if err != nil {
		return wire.RegisterResp{}, fmt.Errorf("cluster: register node %s: %w", req.Node, err)
	}
	r.log.Info("cluster: storage node registered", "node", req.Node, "addr", req.Addr, "targets", req.Have, "new", resp.IDs)
	return resp, r.reload(ctx)
}

// Heartbeat records that a node is alive. A node that comes back after its
// targets were taken out of their chains, or that restarted (a new
// incarnation), has its replicas put back as syncing: they take writes at
// once and serve reads after the chain's tail has copied them what they
// missed.
func (r *Manager) Heartbeat(ctx context.Context, req *wire.HeartbeatReq) (wire.HeartbeatResp, error) {
	if req.Node == "" {
		return wire.HeartbeatResp{}, errs.New(errs.Invalid, "cluster: heartbeat without a node name")
	}
	now := r.now()
	var ver uint64
	var changed []placement.Chain
	err := r.db.Update(ctx, func(tx kv.Txn) error {
		changed = changed[:0]
		var prev nodeRecord
		v, err := tx.Get(nodeKey(req.Node))
		switch {
		case err == nil:
			prev, _ = decodeNodeRecord(v) // unreadable: as if new
		case !errors.Is(err, kv.ErrNotFound):
			return err
		}
		tx.Set(nodeKey(req.Node), nodeRecord{Addr: req.Addr, Incarnation: req.Incarnation, LastSeen: now.UnixNano(), Stats: req.Targets, Resyncs: req.Resyncs, QosUse: req.QosUse}.encode())
		restarted := prev.Incarnation != 0 && prev.Incarnation != req.Incarnation
		revived := prev.LastSeen != 0 && !r.alive(prev, now)
		ver = 0
		if !restarted && !revived {
			// The usual heartbeat: the node was up all along, so none of
			// its replicas can have been taken out. Reading the chain
			// table only when needed keeps this transaction small (on etcd
			// every key read is a compare).
			return nil
		}
		ver, err = getCounter(tx, keyChainsVer, 0)
		if err != nil {
			return err
		}
		mine := make(map[placement.TargetID]bool, len(req.Targets))
		for _, t := range req.Targets {
			mine[t.Target] = true
		}
		chains, err := r.chainsWith(tx, mine)
		if err != nil {
			return err
		}
		for _, c := range chains {
			for _, rep := range c.Replicas {
				if !mine[rep.Target] || (rep.State == placement.Serving && !restarted) {
					continue
				}
				if c.StartSync(rep.Target) {
					changed = append(changed, c)
				}
			}
		}
		if len(changed) > 0 {
			tx.RequireSync() // durable before visible: see Manager
			ver++
			for i := range changed {
				tx.Set(chainKey(changed[i].ID), encodeChain(&changed[i]))
			}
			tx.Set(keyChainsVer, u64Value(ver))
		}
		return nil
	})
	if err != nil {
		return wire.HeartbeatResp{}, fmt.Errorf("cluster: heartbeat of node %s: %w", req.Node, err)
	}
	for _, c := range changed {
		r.log.Info("cluster: replica back, syncing", "node", req.Node, "chain", c.String())
	}
	r.mu.Lock()
	r.mu.st.nodes[req.Node] = nodeRecord{Addr: req.Addr, Incarnation: req.Incarnation, LastSeen: now.UnixNano(), Stats: req.Targets, Resyncs: req.Resyncs, QosUse: req.QosUse}
	r.mu.ver++
	if ver == 0 {
		ver = r.mu.st.chainsVer
	}
	r.mu.Unlock()
	if len(changed) > 0 {
		if err := r.reload(ctx); err != nil {
			return wire.HeartbeatResp{}, err
		}
	}
	return wire.HeartbeatResp{ChainsVersion: ver}, nil
}

// chainsWith reads, in tx, the chains that the cache says have a replica
// on one of the targets. The cache may miss a chain formed, or a replica
// added by re-replication, in the last Refresh: such a replica is new and
// serving or syncing already, so a returning node has nothing to restart
// in it.
func (r *Manager) chainsWith(tx kv.Txn, targets map[placement.TargetID]bool) ([]placement.Chain, error) {
	r.mu.Lock()
	var ids []placement.ChainID
	for _, c := range r.mu.st.chains {
		if slices.ContainsFunc(c.Replicas, func(x placement.Replica) bool { return targets[x.Target] }) {
			ids = append(ids, c.ID)
		}
	}
	r.mu.Unlock()
	var out []placement.Chain
	for _, id := range ids {
		v, err := tx.Get(chainKey(id))
		if errors.Is(err, kv.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		c, err := decodeChain(v)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// SyncDone makes a syncing replica serving, if its chain is still at the
// version the copy was made for.
func (r *Manager) SyncDone(ctx context.Context, req *wire.SyncDoneReq) error {
	var done bool
	var after placement.Chain
	var finished *placement.DrainMove
	err := r.db.Update(ctx, func(tx kv.Txn) error {
		finished = nil
		v, err := tx.Get(chainKey(req.Chain))
		if errors.Is(err, kv.ErrNotFound) {
			return errs.New(errs.NotFound, "cluster: chain %d does not exist", req.Chain)
		}
		if err != nil {
			return err
		}
		c, err := decodeChain(v)
		if err != nil {
			return err
		}
		if done = c.FinishSync(req.Target, req.Version); !done {
			return nil
		}
		// The replica that took a draining one's place serves: the
		// draining one leaves in the same transaction (make before
		// break; see replaceDraining).
		if mv, err := tx.Get(moveKey(req.Chain)); err == nil {
			m, err := decodeMove(moveKey(req.Chain)[1:], mv)
			if err != nil {
				return err
			}
			if m.New == req.Target && c.Leave(m.Old) {
				tx.Delete(moveKey(req.Chain))
				finished = &m
			}
		} else if !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		if err := putChains(tx, c); err != nil {
			return err
		}
		after = c
		return nil
	})
	if err != nil {
		return fmt.Errorf("cluster: sync done for target %d of chain %d: %w", req.Target, req.Chain, err)
	}
	if !done {
		return errs.New(errs.ChainChanged, "cluster: chain %d changed since version %d; sync again", req.Chain, req.Version)
	}
	r.log.Info("cluster: replica synced, serving", "target", req.Target, "chain", after.String())
	if finished != nil {
		r.log.Info("cluster: draining: a replica moved", "chain", after.String(), "old", finished.Old, "new", finished.New)
	}
	return r.reload(ctx)
}

// checkNodes takes the targets of nodes whose heartbeats stopped out of
// their chains.
func (r *Manager) checkNodes(ctx context.Context) error {
	// Candidates come from the cache; the transaction reads just the down
	// nodes' records (to confirm they are still silent) and the chains
	// they are in, so that it stays small (on etcd every key read is a
	// compare, and etcd bounds a transaction's compares).
	now := r.now()
	down := make(map[string][]placement.TargetID)
	var cands []placement.ChainID
	r.mu.Lock()
	for name, n := range r.mu.st.nodes {
		if !r.alive(n, now) {
			down[name] = nil
		}
	}
	for id, t := range r.mu.st.targets {
		if ts, ok := down[t.Node]; ok {
			down[t.Node] = append(ts, id)
		}
	}
	for _, c := range r.mu.st.chains {
		for _, rep := range c.Replicas {
			if rep.State != placement.Offline && r.targetDown(down, rep.Target) {
				cands = append(cands, c.ID)
				break
			}
		}
	}
	r.mu.Unlock()
	if len(cands) == 0 {
		return nil
	}
	var changed []placement.Chain
	err := r.db.Update(ctx, func(tx kv.Txn) error {
		changed = changed[:0]
		dead := make(map[placement.TargetID]bool)
		for name, ts := range down {
			v, err := tx.Get(nodeKey(name))
			if err != nil && !errors.Is(err, kv.ErrNotFound) {
				return err
			}
			if err == nil {
				if n, derr := decodeNodeRecord(v); derr == nil && r.alive(n, now) {
					continue // heart-beat meanwhile
				}
			}
			for _, id := range ts {
				dead[id] = true
			}
		}
		for _, id := range cands {
			v, err := tx.Get(chainKey(id))
			if errors.Is(err, kv.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			c, err := decodeChain(v)
			if err != nil {
				return err
			}
			moved := false
			for _, rep := range c.Replicas {
				if dead[rep.Target] && c.TakeOffline(rep.Target) {
					moved = true
				}
			}
			if moved {
				changed = append(changed, c)
			}
		}
		if len(changed) == 0 {
			return nil
		}
		return putChains(tx, changed...)
	})
	if err != nil {
		return fmt.Errorf("cluster: take down nodes' targets out of their chains: %w", err)
	}
	for _, c := range changed {
		r.log.Warn("cluster: replica taken out of its chain: its node stopped heart-beating", "chain", c.String(), "timeout", r.hbLimit)
	}
	return nil
}

// targetDown reports whether target id is on one of the down nodes.
func (r *Manager) targetDown(down map[string][]placement.TargetID, id placement.TargetID) bool {
	t, ok := r.mu.st.targets[id]
	if !ok {
		return false
	}
	_, isDown := down[t.Node]
	return isDown
}

// List returns the registered targets sorted by ID. A target is healthy
// while its node heart-beats.
func (r *Manager) List(ctx context.Context) ([]wire.TargetAddr, error) {
	now := r.now()
	r.mu.Lock()
	out := make([]wire.TargetAddr, 0, len(r.mu.st.targets))
	for id, t := range r.mu.st.targets {
		if r.mu.st.removed[id] {
			continue // sluice target rm
		}
		ta := wire.TargetAddr{ID: id, Addr: t.Addr, Node: t.Node, Draining: r.mu.st.draining[id]}
		if n, ok := r.mu.st.nodes[t.Node]; ok {
			// Healthy: the node heart-beats and reports the target.
			for _, s := range n.Stats {
				if s.Target == id {
					ta.Healthy = r.alive(n, now)
					ta.Capacity, ta.Used, ta.FS = s.Capacity, max(s.Capacity-s.Free, 0), s.FS
				}
			}
		}
		out = append(out, ta)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b wire.TargetAddr) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Nodes returns the storage nodes, sorted by name.
func (r *Manager) Nodes(ctx context.Context) []wire.NodeInfo {
	now := r.now()
	r.mu.Lock()
	out := make([]wire.NodeInfo, 0, len(r.mu.st.nodes))
	for name, n := range r.mu.st.nodes {
		out = append(out, wire.NodeInfo{Name: name, Addr: n.Addr, Alive: r.alive(n, now), LastSeen: n.LastSeen, Resyncs: n.Resyncs})
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b wire.NodeInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// QosUse returns, for every live node (sorted by name), what its jobs
// asked of it lately, as its last heartbeat reported (from the cache,
// which Refresh brings up to date with the other metadata services'
// heartbeats).
func (r *Manager) QosUse() (nodes []string, uses [][]wire.QosUse) {
	now := r.now()
	r.mu.Lock()
	for name, n := range r.mu.st.nodes {
		if r.alive(n, now) {
			nodes = append(nodes, name)
		}
	}
	slices.Sort(nodes)
	for _, name := range nodes {
		uses = append(uses, r.mu.st.nodes[name].QosUse)
	}
	r.mu.Unlock()
	return nodes, uses
}

// Chains returns the cached chain table.
func (r *Manager) Chains(ctx context.Context) (uint64, []placement.Chain, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]placement.Chain, 0, len(r.mu.st.chains))
	for _, c := range r.mu.st.chains {
		out = append(out, c.Clone())
	}
	slices.SortFunc(out, func(a, b placement.Chain) int { return cmp.Compare(a.ID, b.ID) })
	return r.mu.st.chainsVer, out, nil
}

// FormChains makes r-replica chains headed by each healthy target that
// heads none yet. With a pool (non-nil), only the pool's targets are used,
// and a target heads a chain only if the chain lies inside the pool.
func (r *Manager) FormChains(ctx context.Context, n int, pool []placement.TargetID) error {
	now := r.now()
	err := r.db.Update(ctx, func(tx kv.Txn) error {
		st, err := loadState(tx)
		if err != nil {
			return err
		}
		var all []placement.NodeTarget
		for id, t := range st.targets {
			if (pool != nil && !slices.Contains(pool, id)) || st.draining[id] || st.removed[id] {
				continue // draining targets join no new chains
			}
			if nd, ok := st.nodes[t.Node]; ok && r.alive(nd, now) {
				all = append(all, placement.NodeTarget{ID: id, Node: t.Node})
			}
		}
		load := make(map[placement.TargetID]int)
		headed := make(map[placement.TargetID]bool)
		for _, c := range st.chains {
			for _, rep := range c.Replicas {
				load[rep.Target]++
			}
			if len(c.Replicas) == n && (pool == nil || len(placement.PoolChains([]placement.Chain{c}, pool)) == 1) {
				headed[c.Replicas[0].Target] = true
			}
		}
		var heads []placement.TargetID
		for _, t := range all {
			if !headed[t.ID] {
				heads = append(heads, t.ID)
			}
		}
		if len(heads) == 0 {
			return nil
		}
		slices.Sort(heads)
		next, err := getCounter(tx, keyNextChain, uint64(placement.FirstReplicatedChain))
		if err != nil {
			return err
		}
		cs, err := placement.FormChains(all, heads, n, load, placement.ChainID(next))
		if err != nil {
			return err
		}
		addChains(tx, st, next, cs)
		return nil
	})
	if err != nil {
		return fmt.Errorf("cluster: form chains of %d replicas: %w", n, err)
	}
	return r.reload(ctx)
}

// addChains writes new chains cs, whose IDs were given from next on (the
// counter's value in tx), and bumps the counter and the table's version.
// Durable before visible: see Manager.
func addChains(tx kv.Txn, st clusterState, next uint64, cs []placement.Chain) {
	tx.RequireSync()
	for i := range cs {
		tx.Set(chainKey(cs[i].ID), encodeChain(&cs[i]))
	}
	tx.Set(keyNextChain, u64Value(next+uint64(len(cs))))
	tx.Set(keyChainsVer, u64Value(st.chainsVer+1))
}

// route returns the target to send a chain-wide request to (the head) and
// the chain reference to put in it.
func (r *Manager) route(chain placement.ChainID) (placement.TargetID, string, wire.ChainRef, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if chain < placement.FirstReplicatedChain {
		t, ok := r.mu.st.targets[placement.TargetID(chain)]
		if !ok {
			return 0, "", wire.ChainRef{}, errs.New(errs.Unavailable, "cluster: target %d is not registered", chain)
		}
		return placement.TargetID(chain), t.Addr, wire.ChainRef{Chain: chain}, nil
	}
	c, ok := r.mu.st.chains[chain]
	if !ok {
		return 0, "", wire.ChainRef{}, errs.New(errs.Unavailable, "cluster: chain %d does not exist", chain)
	}
	head, _ := c.Head()
	t, ok := r.mu.st.targets[head]
	if !ok {
		return 0, "", wire.ChainRef{}, errs.New(errs.Unavailable, "cluster: target %d of chain %d is not registered", head, chain)
	}
	return head, t.Addr, wire.ChainRef{Chain: chain, ChainVer: c.Version}, nil
}

// SystemFreeJob is the QoS job of the removal of freed files' chunks
// (class background): the targets schedule it behind applications' work.
const SystemFreeJob = "sluice:free"

var freeTag = wire.QosTag{Job: SystemFreeJob, Class: uint8(qos.Background) + 1}

// RemoveChunks sends OpChunkRemove to the chain's head, which passes it
// along the chain, in the background class (SystemFreeJob). A stale chain version makes it reload and try again.
func (r *Manager) RemoveChunks(ctx context.Context, chain placement.ChainID, ino uint64, slots []uint32) error {
	err := r.callHead(ctx, chain, wire.OpChunkRemove, func(head placement.TargetID, ref wire.ChainRef) wire.Message {
		return &wire.ChunkRemoveReq{ChunkSetReq: wire.ChunkSetReq{Target: head, ChainRef: ref, Ino: ino, Slots: slots}, Qos: freeTag}
	})
	if err != nil {
		return fmt.Errorf("cluster: remove chunks of inode %d in chain %d: %w", ino, chain, err)
	}
	return nil
}

// FenceChunks sends OpChunkFence to the chain's head, which passes it
// along the chain: mode wire.FenceFreeze freezes the chunks of inode ino
// in slots on every replica (writes then fail with errs.Moved),
// wire.FenceThaw thaws them. A stale chain version makes it reload and try
// again.
func (r *Manager) FenceChunks(ctx context.Context, chain placement.ChainID, ino uint64, slots []uint32, mode uint8) error {
	err := r.callHead(ctx, chain, wire.OpChunkFence, func(head placement.TargetID, ref wire.ChainRef) wire.Message {
		return &wire.ChunkFenceReq{ChunkSetReq: wire.ChunkSetReq{Target: head, ChainRef: ref, Ino: ino, Slots: slots}, Mode: mode}
	})
	if err != nil {
		return fmt.Errorf("cluster: fence (mode %d) chunks of inode %d in chain %d: %w", mode, ino, chain, err)
	}
	return nil
}

// callHead sends op with the body req makes to the chain's head, within
// the registry's timeout, and tries again (up to three times in all) after
// reloading the chain table when the head answers errs.ChainChanged.
func (r *Manager) callHead(ctx context.Context, chain placement.ChainID, op wire.Op, req func(head placement.TargetID, ref wire.ChainRef) wire.Message) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var head placement.TargetID
		var addr string
		var ref wire.ChainRef
		head, addr, ref, err = r.route(chain)
		if err != nil {
			break
		}
		var c *wire.Conn
		if c, err = r.conn(ctx, addr); err != nil {
			break
		}
		if _, err = c.Call(ctx, op, req(head, ref), nil, &wire.Empty{}, nil); err == nil {
			return nil
		}
		if errs.CodeOf(err) != errs.ChainChanged {
			break
		}
		if rerr := r.reload(ctx); rerr != nil {
			return rerr
		}
	}
	return err
}

// conn returns a live connection to addr, dialing if needed.
func (r *Manager) conn(ctx context.Context, addr string) (*wire.Conn, error) {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil, errs.New(errs.Unavailable, "cluster: target registry closed")
	}
	if c := r.mu.conns[addr]; c != nil && c.Err() == nil {
		r.mu.Unlock()
		return c, nil
	}
	r.mu.Unlock()

	c, err := wire.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	var drop *wire.Conn // closed after unlocking
	switch old := r.mu.conns[addr]; {
	case r.mu.closed:
		drop, c, err = c, nil, errs.New(errs.Unavailable, "cluster: target registry closed")
	case old != nil && old.Err() == nil: // lost a race with another dialer
		drop, c = c, old
	default:
		drop, r.mu.conns[addr] = old, c
	}
	r.mu.Unlock()
	if drop != nil {
		drop.Close()
	}
	return c, err
}

// putChains writes changed chains and bumps the chain table's version, in
// a transaction that must be durable before it is visible (see Manager).
func putChains(tx kv.Txn, chains ...placement.Chain) error {
	tx.RequireSync()
	ver, err := getCounter(tx, keyChainsVer, 0)
	if err != nil {
		return err
	}
	for i := range chains {
		tx.Set(chainKey(chains[i].ID), encodeChain(&chains[i]))
	}
	tx.Set(keyChainsVer, u64Value(ver+1))
	return nil
}

// Run reloads the cluster state and looks for down nodes every Refresh
// until ctx is done or Close is called, and returns nil then.
func (r *Manager) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil
	}
	r.runWG.Add(1)
	r.mu.Unlock()
	defer r.runWG.Done()

	ctx, cancel := context.WithCancel(ctx)
	var watch sync.WaitGroup
	defer watch.Wait()
	defer cancel()
	watch.Go(func() { // cancels work in flight on Close
		select {
		case <-r.closed:
			cancel()
		case <-ctx.Done():
		}
	})
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := r.reload(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("cluster: reload cluster state", "err", err)
			continue
		}
		if err := r.checkNodes(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("cluster: check nodes", "err", err)
		}
		if err := r.replaceDead(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("cluster: re-replicate", "err", err)
		}
		if err := r.replaceDraining(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("cluster: drain", "err", err)
		}
		if err := r.topUpChains(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("cluster: top up chains", "err", err)
		}
	}
}

// Close stops Run, waits for it and closes the connections. It is
// idempotent.
func (r *Manager) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.mu.closed = true
		r.mu.Unlock()
		close(r.closed)
		r.runWG.Wait()
		r.mu.Lock()
		conns := r.mu.conns
		r.mu.conns = nil
		r.mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return nil
}
