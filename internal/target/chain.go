package target

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/chunk"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Chain replication, on the target side.
//
// A target hosts the chunks of the chain of one replica on itself (chain t
// on target t, the store in the target's directory) and, for each
// replicated chain it is a member of, a store of its own in
// <target dir>/chains/<chain id>. It learns the chain table from the
// metadata service (SetCluster; the node agent fetches it when a
// heartbeat reply shows a new version) and checks the chain version of
// every request against it: a request made for another version is refused
// with errs.ChainChanged (after one reload of the table, if the request's
// version is newer), so nobody acts on a stale chain.
//
// A write, truncate, sync or remove from a client goes to the chain's head.
// Each replica applies it locally, passes it to the next replica on the
// write path (FlagForwarded) and answers when that one answered: the reply
// to the client means every replica on the path, the last one included,
// has it. Each replica holds the chunk's lock from its local change until
// the next replica answered, so writes to a chunk reach all replicas in
// the same order. A read goes to any serving replica; one that has a write
// of that chunk in flight waits for it first, so a read never returns data
// that a later read from another replica could lack.
//
// Resync: when a chain has syncing replicas, its tail (last serving
// replica) copies to each one what differs: it lists both sides' chunks
// with their lengths and content digests (OpChunkList), and copies each
// chunk that differs, holding the chunk's lock so that no write passes
// meanwhile, then removes the chunks the syncing replica has and the tail
// does not. Writes keep flowing to the syncing replica while this runs.
// When done it reports OpSyncDone for the chain version it synced at; the
// metadata service then makes the replica serving (or, if the chain
// changed meanwhile, the tail syncs again at the new version).
//
// A target that has not reached the metadata service for FenceAfter
// refuses replicated-chain requests: the metadata service may have taken
// it out of its chains, and it must not serve data that others have moved
// past.

// Meta is what the target service needs from the metadata service.
type Meta interface {
	Cluster(ctx context.Context) (*wire.ClusterInfo, error)
	SyncDone(ctx context.Context, req *wire.SyncDoneReq) error
}

type chunkKey struct {
	target placement.TargetID
	chain  placement.ChainID
	ino    uint64
	slot   uint32
}

type lockEntry struct {
	mu   sync.Mutex
	refs int
}

// lockTable holds a lock per chunk in use.
type lockTable struct {
	mu sync.Mutex
	m  map[chunkKey]*lockEntry
}

func (lt *lockTable) lock(k chunkKey) (unlock func()) {
	lt.mu.Lock()
	if lt.m == nil {
		lt.m = make(map[chunkKey]*lockEntry)
	}
	e := lt.m[k]
	if e == nil {
		e = &lockEntry{}
		lt.m[k] = e
	}
	e.refs++
	lt.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		lt.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(lt.m, k)
		}
		lt.mu.Unlock()
	}
}

// busy reports whether chunk k's lock is held or waited for.
func (lt *lockTable) busy(k chunkKey) bool {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return lt.m[k] != nil
}

// view is the chain table as this service knows it.
type view struct {
	ver    uint64
	chains map[placement.ChainID]placement.Chain
	addrs  map[placement.TargetID]string
}

// chainState is the Service's chain replication state.
type chainState struct {
	locks lockTable

	mu struct {
		sync.Mutex
		meta    Meta
		view    view
		peers   map[string]*wire.Conn
		resyncs map[resyncKey]*resyncJob
		fence   time.Duration
		contact time.Time // last successful contact with the metadata service
		closed  bool
	}
	refreshMu sync.Mutex // one reload at a time
	discard   sync.Mutex // one discardStale at a time
	wg        sync.WaitGroup
}

type resyncKey struct {
	chain placement.ChainID
	dst   placement.TargetID
}

type resyncJob struct {
	version uint64
	cancel  context.CancelFunc
	// progress, for status: chunks looked at and copied so far.
	mu             sync.Mutex
	looked, copied int
	total          int
}

// ResyncStatus is the progress of one resync this service runs.
type ResyncStatus struct {
	Chain          placement.ChainID
	Version        uint64
	From, To       placement.TargetID
	Looked, Copied int
	Total          int
}

// SetMeta connects the service to the metadata service. fence > 0 makes
// it refuse replicated-chain requests when Contact was not called for that
// long.
func (s *Service) SetMeta(m Meta, fence time.Duration) {
	s.cs.mu.Lock()
	defer s.cs.mu.Unlock()
	s.cs.mu.meta = m
	s.cs.mu.fence = fence
	s.cs.mu.contact = time.Now()
}

// Contact records a successful exchange with the metadata service.
func (s *Service) Contact() {
	s.cs.mu.Lock()
	s.cs.mu.contact = time.Now()
	s.cs.mu.Unlock()
}

// ChainsVersion returns the version of the chain table the service holds.
func (s *Service) ChainsVersion() uint64 {
	s.cs.mu.Lock()
	defer s.cs.mu.Unlock()
	return s.cs.mu.view.ver
}

// SetCluster installs a chain table (ignored if older than the one held)
// and starts the resyncs it calls for.
func (s *Service) SetCluster(info *wire.ClusterInfo) {
	v := view{
		ver:    info.ChainsVersion,
		chains: make(map[placement.ChainID]placement.Chain, len(info.Chains)),
		addrs:  make(map[placement.TargetID]string, len(info.Targets)),
	}
	for _, c := range info.Chains {
		v.chains[c.ID] = c
	}
	for _, t := range info.Targets {
		v.addrs[t.ID] = t.Addr
	}
	s.cs.mu.Lock()
	if s.cs.mu.closed || (v.ver < s.cs.mu.view.ver && s.cs.mu.view.chains != nil) {
		s.cs.mu.Unlock()
		return
	}
	s.cs.mu.view = v
	s.cs.wg.Add(1) // under mu, before closeChains can wait
	s.cs.mu.Unlock()
	s.startResyncs(v)
	go func() {
		defer s.cs.wg.Done()
		s.discardStale(v)
	}()
}

// refresh reloads the chain table from the metadata service.
func (s *Service) refresh(ctx context.Context) error {
	s.cs.refreshMu.Lock()
	defer s.cs.refreshMu.Unlock()
	s.cs.mu.Lock()
	m := s.cs.mu.meta
	s.cs.mu.Unlock()
	if m == nil {
		return nil
	}
	info, err := m.Cluster(ctx)
	if err != nil {
		return err
	}
	s.Contact()
	s.SetCluster(info)
	return nil
}

type access int

const (
	accWrite  access = iota // from a client, to the head
	accFwd                  // forwarded along the chain
	accRead                 // reads: serving replicas
	accResync               // copies from the tail: syncing replicas
	accList                 // listings: any member
)

// resolve finds the store a chunk request is for and checks the request's
// chain version and this replica's role. c is nil for the chain of one
// replica on the target itself.
func (s *Service) resolve(ctx context.Context, h *hosted, target placement.TargetID, ref wire.ChainRef, acc access) (*chunk.Store, *placement.Chain, error) {
	if ref.Chain == 0 || ref.Chain == placement.ChainID(target) {
		return h.store, nil, nil
	}
	if ref.Chain < placement.FirstReplicatedChain {
		return nil, nil, errs.New(errs.Invalid, "target: request for chain %d sent to target %d", ref.Chain, target)
	}
	c, err := s.chainAt(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	s.cs.mu.Lock()
	fence, contact := s.cs.mu.fence, s.cs.mu.contact
	s.cs.mu.Unlock()
	if fence > 0 && time.Since(contact) > fence {
		return nil, nil, errs.New(errs.Unavailable, "target: target %d has not reached the metadata service for %v; it refuses chain requests until it does", target, time.Since(contact).Round(time.Millisecond))
	}
	st, member := c.State(target)
	ok := false
	switch acc {
	case accWrite:
		head, _ := c.Head()
		ok = head == target
	case accFwd:
		ok = member && (st == placement.Serving || st == placement.Syncing)
	case accRead:
		ok = member && st == placement.Serving
	case accResync:
		ok = member && st == placement.Syncing
	case accList:
		ok = member
	}
	if !ok {
		return nil, nil, errs.New(errs.ChainChanged, "target: target %d is %v in %v; it cannot take this request", target, st, c)
	}
	store, err := h.chainStore(c.ID, s.opts)
	if err != nil {
		return nil, nil, err
	}
	return store, &c, nil
}

// chainAt returns the chain at the request's version, reloading the table
// once if the request names a newer version than the one held.
func (s *Service) chainAt(ctx context.Context, ref wire.ChainRef) (placement.Chain, error) {
	for reloaded := false; ; reloaded = true {
		s.cs.mu.Lock()
		c, ok := s.cs.mu.view.chains[ref.Chain]
		s.cs.mu.Unlock()
		if ok && c.Version == ref.ChainVer {
			return c, nil
		}
		if reloaded || (ok && c.Version > ref.ChainVer) {
			have := uint64(0)
			if ok {
				have = c.Version
			}
			return placement.Chain{}, errs.New(errs.ChainChanged, "target: chain %d is at version %d here, the request names version %d", ref.Chain, have, ref.ChainVer)
		}
		if err := s.refresh(ctx); err != nil {
			return placement.Chain{}, fmt.Errorf("target: reload chain table: %w", err)
		}
	}
}

// chainStore opens (once) the store of a replicated chain on h.
func (h *hosted) chainStore(id placement.ChainID, opts Options) (*chunk.Store, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.chains[id]; st != nil {
		return st, nil
	}
	if h.closed {
		return nil, errs.New(errs.Unavailable, "target: target %d is closed", h.store.Target())
	}
	dir := filepath.Join(h.store.Dir(), "chains", strconv.FormatUint(uint64(id), 10))
	st, err := chunk.Open(dir, chunk.Options{Target: h.store.Target(), Logger: opts.Logger, MaxOpenChunks: opts.MaxOpenChunks, FenceGrace: opts.FenceGrace})
	if err != nil {
		return nil, fmt.Errorf("target: open store of chain %d on target %d: %w", id, h.store.Target(), err)
	}
	if h.chains == nil {
		h.chains = make(map[placement.ChainID]*chunk.Store)
	}
	h.chains[id] = st
	return st, nil
}

// peer returns a connection to another target's server.
func (s *Service) peer(ctx context.Context, t placement.TargetID) (*wire.Conn, error) {
	s.cs.mu.Lock()
	addr, ok := s.cs.mu.view.addrs[t]
	if !ok {
		s.cs.mu.Unlock()
		return nil, errs.New(errs.Unavailable, "target: no address for target %d", t)
	}
	if c := s.cs.mu.peers[addr]; c != nil && c.Err() == nil {
		s.cs.mu.Unlock()
		return c, nil
	}
	s.cs.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	c, err := wire.Dial(dctx, addr)
	if err != nil {
		return nil, err
	}
	s.cs.mu.Lock()
	defer s.cs.mu.Unlock()
	if s.cs.mu.closed {
		c.Close()
		return nil, errs.New(errs.Unavailable, "target: closed")
	}
	if old := s.cs.mu.peers[addr]; old != nil {
		if old.Err() == nil {
			c.Close()
			return old, nil
		}
		old.Close()
	}
	if s.cs.mu.peers == nil {
		s.cs.mu.peers = make(map[string]*wire.Conn)
	}
	s.cs.mu.peers[addr] = c
	return c, nil
}

// dropPeer closes a peer connection that stopped answering, so that the
// next call dials again instead of waiting on a dead TCP connection.
func (s *Service) dropPeer(c *wire.Conn) {
	s.cs.mu.Lock()
	for addr, pc := range s.cs.mu.peers {
		if pc == c {
			delete(s.cs.mu.peers, addr)
		}
	}
	s.cs.mu.Unlock()
	c.Close()
}

// peerTimeout bounds a call to another replica.
const peerTimeout = 5 * time.Second

// forward passes a request to the replica after target on c's write path,
// if any. msg must be the request with Target set to the next replica.
func (s *Service) forward(ctx context.Context, c *placement.Chain, target placement.TargetID, op wire.Op, msg func(next placement.TargetID) wire.Message, data [][]byte) error {
	next, has, _ := c.Next(target)
	if !has {
		return nil
	}
	conn, err := s.peer(ctx, next)
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, peerTimeout)
		_, err = conn.Call(cctx, op, msg(next), data, nil, nil)
		cancel()
		if err != nil && cctx.Err() != nil {
			// The replica did not answer in time: its connection may be
			// dead (a cut link); the next try dials afresh.
			s.dropPeer(conn)
		}
	}
	if err != nil {
		code := errs.CodeOf(err)
		if code != errs.ChainChanged && code != errs.Moved {
			code = errs.Unavailable
		}
		return errs.New(code, "target: pass to replica %d of %v: %v", next, c, err)
	}
	return nil
}

// closeChains stops resyncs and closes peer connections and chain stores.
func (s *Service) closeChains() error {
	s.cs.mu.Lock()
	s.cs.mu.closed = true
	for _, j := range s.cs.mu.resyncs {
		j.cancel()
	}
	peers := s.cs.mu.peers
	s.cs.mu.peers = nil
	s.cs.mu.Unlock()
	s.cs.wg.Wait()
	for _, c := range peers {
		c.Close()
	}
	var first error
	for _, h := range s.targets {
		h.mu.Lock()
		h.closed = true
		for _, st := range h.chains {
			if err := st.Close(); err != nil && first == nil {
				first = err
			}
		}
		h.mu.Unlock()
	}
	return first
}
