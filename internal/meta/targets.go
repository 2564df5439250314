package meta

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Targets is how the service reaches the storage targets. Implementations
// must be safe for concurrent use.
type Targets interface {
	// List returns the known targets in any order, with their health and
	// capacity. Used is the bytes in use on the target's file system, so
	// Capacity-Used is what is free. It is called on every file create and
	// must be cheap (a cached snapshot).
	List(ctx context.Context) ([]wire.TargetAddr, error)

	// RemoveChunks durably removes the chunks of inode ino in the given
	// slots on a target. Removing chunks that do not exist is not an error,
	// so a repeated call is harmless.
	RemoveChunks(ctx context.Context, target placement.TargetID, ino uint64, slots []uint32) error
}

// TargetRegistrar is implemented by Targets that accept target
// registrations; the OpRegister handler needs it.
type TargetRegistrar interface {
	RegisterTarget(ctx context.Context, id placement.TargetID, addr string) error
}

// RemoteTargetsOptions configures RemoteTargets.
type RemoteTargetsOptions struct {
	// DB persists the registry (key "T" + id, see doc.go). Required; it is
	// normally the metadata service's DB.
	DB kv.DB
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// PollInterval is how often each target's OpTargetStat is polled
	// (default 3s). A target that does not answer is marked unhealthy.
	PollInterval time.Duration
	// Timeout bounds one call to a target (default 5s).
	Timeout time.Duration
}

// RemoteTargets is a Targets that reaches targets over the wire protocol.
// It keeps a registry of targets (persisted in the KV) and polls their
// health and capacity while Run runs.
//
// Lock order: mu is never held while dialing or calling a target.
type RemoteTargets struct {
	db      kv.DB
	log     *slog.Logger
	every   time.Duration
	timeout time.Duration

	mu struct {
		sync.Mutex
		targets map[placement.TargetID]*remoteTarget
		closed  bool
	}
	closed    chan struct{}
	closeOnce sync.Once
	runWG     sync.WaitGroup // Run calls in progress; Add under mu
}

type remoteTarget struct {
	id   placement.TargetID
	addr string
	conn *wire.Conn

	healthy        bool
	capacity, used int64
}

// NewRemoteTargets loads the registry from opts.DB.
func NewRemoteTargets(ctx context.Context, opts RemoteTargetsOptions) (*RemoteTargets, error) {
	if opts.DB == nil {
		return nil, errs.New(errs.Invalid, "meta: RemoteTargetsOptions.DB is required")
	}
	r := &RemoteTargets{
		db:      opts.DB,
		log:     opts.Logger,
		every:   opts.PollInterval,
		timeout: opts.Timeout,
		closed:  make(chan struct{}),
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.every <= 0 {
		r.every = 3 * time.Second
	}
	if r.timeout <= 0 {
		r.timeout = 5 * time.Second
	}
	r.mu.targets = make(map[placement.TargetID]*remoteTarget)
	start := []byte{pfxTarget}
	err := r.db.View(ctx, func(tx kv.Txn) error {
		clear(r.mu.targets)
		var bad error
		err := tx.Scan(start, kv.PrefixEnd(start), 0, func(k, v []byte) bool {
			if len(k) != 5 || len(v) == 0 {
				bad = errs.New(errs.Corruption, "meta: bad target registry record %q", k)
				return false
			}
			id := placement.TargetID(binary.BigEndian.Uint32(k[1:]))
			r.mu.targets[id] = &remoteTarget{id: id, addr: string(v)}
			return true
		})
		return cmp.Or(err, bad)
	})
	if err != nil {
		return nil, fmt.Errorf("meta: load target registry: %w", err)
	}
	return r, nil
}

// RegisterTarget records (durably) that target id is served at addr, then
// polls it once so that it can be used at once if it answers.
func (r *RemoteTargets) RegisterTarget(ctx context.Context, id placement.TargetID, addr string) error {
	if addr == "" {
		return errs.New(errs.Invalid, "meta: register target %d: empty address", id)
	}
	err := r.db.Update(ctx, func(tx kv.Txn) error {
		tx.Set(targetKey(id), []byte(addr))
		return nil
	})
	if err != nil {
		return fmt.Errorf("meta: register target %d at %s: %w", id, addr, err)
	}
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return errs.New(errs.Unavailable, "meta: register target %d: target registry closed", id)
	}
	t := r.mu.targets[id]
	var old *wire.Conn
	if t == nil {
		t = &remoteTarget{id: id}
		r.mu.targets[id] = t
	}
	if t.addr != addr {
		t.addr, old, t.conn, t.healthy = addr, t.conn, nil, false
	}
	r.mu.Unlock()
	if old != nil {
		old.Close()
	}
	r.poll(ctx, id)
	return nil
}

// List returns the registered targets sorted by ID.
func (r *RemoteTargets) List(ctx context.Context) ([]wire.TargetAddr, error) {
	r.mu.Lock()
	out := make([]wire.TargetAddr, 0, len(r.mu.targets))
	for _, t := range r.mu.targets {
		out = append(out, wire.TargetAddr{ID: t.id, Addr: t.addr, Healthy: t.healthy, Capacity: t.capacity, Used: t.used})
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b wire.TargetAddr) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// RemoveChunks sends OpChunkRemove to the target.
func (r *RemoteTargets) RemoveChunks(ctx context.Context, target placement.TargetID, ino uint64, slots []uint32) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	c, err := r.conn(ctx, target)
	if err != nil {
		return fmt.Errorf("meta: remove chunks of inode %d on target %d: %w", ino, target, err)
	}
	req := &wire.ChunkRemoveReq{Target: target, Ino: ino, Slots: slots}
	if _, err := c.Call(ctx, wire.OpChunkRemove, req, nil, &wire.Empty{}, nil); err != nil {
		return fmt.Errorf("meta: remove chunks of inode %d on target %d: %w", ino, target, err)
	}
	return nil
}

// conn returns a live connection to the target, dialing if needed.
func (r *RemoteTargets) conn(ctx context.Context, id placement.TargetID) (*wire.Conn, error) {
	r.mu.Lock()
	t := r.mu.targets[id]
	if t == nil {
		r.mu.Unlock()
		return nil, errs.New(errs.Unavailable, "meta: target %d is not registered", id)
	}
	if r.mu.closed {
		r.mu.Unlock()
		return nil, errs.New(errs.Unavailable, "meta: target registry closed")
	}
	if t.conn != nil && t.conn.Err() == nil {
		c := t.conn
		r.mu.Unlock()
		return c, nil
	}
	addr := t.addr
	r.mu.Unlock()

	c, err := wire.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	var drop *wire.Conn // closed after unlocking
	switch {
	case r.mu.closed || t.addr != addr:
		drop, c, err = c, nil, errs.New(errs.Unavailable, "meta: target %d changed while dialing %s", id, addr)
	case t.conn != nil && t.conn.Err() == nil: // lost a race with another dialer
		drop, c = c, t.conn
	default:
		drop, t.conn = t.conn, c // the old one, if any, has failed
	}
	r.mu.Unlock()
	if drop != nil {
		drop.Close()
	}
	return c, err
}

// poll asks one target for its stat and records health and capacity.
func (r *RemoteTargets) poll(ctx context.Context, id placement.TargetID) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var st wire.TargetStat
	c, err := r.conn(ctx, id)
	if err == nil {
		_, err = c.Call(ctx, wire.OpTargetStat, &wire.TargetReq{Target: id}, nil, &st, nil)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.mu.targets[id]
	if t == nil {
		return
	}
	if err != nil {
		if t.healthy {
			r.log.Warn("meta: storage target unhealthy", "target", id, "addr", t.addr, "err", err)
		}
		t.healthy = false
		return
	}
	if !t.healthy {
		r.log.Info("meta: storage target healthy", "target", id, "addr", t.addr)
	}
	t.healthy, t.capacity, t.used = true, st.Capacity, max(st.Capacity-st.Free, 0)
}

// Run polls every target every PollInterval until ctx is done or Close is
// called, and returns nil then.
func (r *RemoteTargets) Run(ctx context.Context) error {
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
	watch.Go(func() { // cancels polls in flight on Close
		select {
		case <-r.closed:
			cancel()
		case <-ctx.Done():
		}
	})
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		r.mu.Lock()
		ids := make([]placement.TargetID, 0, len(r.mu.targets))
		for id := range r.mu.targets {
			ids = append(ids, id)
		}
		r.mu.Unlock()
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() { r.poll(ctx, id) })
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return nil
		case <-r.closed:
			return nil
		case <-t.C:
		}
	}
}

// Close stops Run, waits for it and closes the connections. It is
// idempotent.
func (r *RemoteTargets) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.mu.closed = true
		r.mu.Unlock()
		close(r.closed)
		r.runWG.Wait()
		r.mu.Lock()
		var conns []*wire.Conn
		for _, t := range r.mu.targets {
			if t.conn != nil {
				conns = append(conns, t.conn)
				t.conn = nil
			}
		}
		r.mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return nil
}

var _ TargetRegistrar = (*RemoteTargets)(nil)
