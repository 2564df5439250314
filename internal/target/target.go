// Package target is the storage server: it hosts the chunk stores of one or
// more storage targets (one per disk, like Lustre OSTs) and serves the
// chunk operations of the wire protocol (wire.OpChunkWrite ...
// wire.OpTargetStat) on a wire.Server.
//
// A request names its target; an unknown target is errs.NotFound. Request
// bodies that do not decode are errs.Protocol, fields out of range
// errs.Invalid; store errors (errs.Corruption, errs.NoSpace, ...) go to the
// client with their class. Data of a write request is used only while its
// handler runs; read replies are sent straight from a pooled buffer.
package target

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/chunk"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Options configure OpenDir.
type Options struct {
	// Logger is passed to the stores; nil means slog.Default().
	Logger *slog.Logger
	// MaxOpenChunks is each store's open-chunk cache size (0: the default).
	MaxOpenChunks int
	// QosOff lets every chunk read and write through at once, unscheduled
	// (as before QoS; for comparisons). They are still counted by class.
	QosOff bool
	// QosInService bounds the chunk reads and writes served at once while
	// QoS is on (0: DefaultQosInService).
	QosInService int
	// Precreate is each store's number of empty chunk files made ahead of
	// need (chunk.Options.Precreate; 0: none).
	Precreate int
	// FenceGrace is how long each store keeps the fence of a removed
	// chunk (chunk.Options.FenceGrace; 0: for good).
	FenceGrace time.Duration
}

// Stats are a target's counters since the Service started.
type Stats struct {
	ReadOps, ReadBytes   uint64
	WriteOps, WriteBytes uint64
	SyncOps              uint64
	TruncateOps          uint64
	LateOps              uint64 // writes, truncates, punches and fences refused: they arrived after their sender's deadline
	RemoveOps            uint64
	Errors               uint64 // requests that failed, of any kind
	Garbled              uint64 // writes refused because their data did not match its CRC32C
	SentUnread           uint64 // reads whose data was sent from the page cache unread (sendfile)
}

type counters struct {
	readOps, readBytes   atomic.Uint64
	writeOps, writeBytes atomic.Uint64
	syncOps              atomic.Uint64
	truncateOps          atomic.Uint64
	lateOps              atomic.Uint64
	removeOps            atomic.Uint64
	errors               atomic.Uint64
	garbled              atomic.Uint64
	sentUnread           atomic.Uint64
}

type hosted struct {
	store *chunk.Store // the chain of one replica on this target
	c     counters

	mu     sync.Mutex
	chains map[placement.ChainID]*chunk.Store // replicated chains' stores, opened on first use
	closed bool
}

// Service serves the chunk operations of a set of stores. It is safe for
// concurrent use. The set of targets is fixed when the Service is made.
type Service struct {
	targets map[placement.TargetID]*hosted
	ids     []placement.TargetID
	opts    Options
	cs      chainState
	gate    gate                   // QoS scheduling of chunk reads and writes (qos.go)
	direct  atomic.Pointer[direct] // the Unix socket of direct reads (direct.go), or nil

	closeOnce sync.Once
	closeErr  error
}

// New returns a Service hosting the given stores, keyed by their target
// IDs. The Service takes ownership: Close closes them.
func New(stores ...*chunk.Store) (*Service, error) {
	s := &Service{targets: make(map[placement.TargetID]*hosted, len(stores)), gate: newGate(false, 0)}
	for _, st := range stores {
		id := st.Target()
		if _, dup := s.targets[id]; dup {
			return nil, errs.New(errs.Invalid, "target: target %d is hosted twice", id)
		}
		s.targets[id] = &hosted{store: st}
		s.ids = append(s.ids, id)
	}
	slices.Sort(s.ids)
	return s, nil
}

// Dir returns the directory of target id in a data directory:
// <dataDir>/targets/<id>.
func Dir(dataDir string, id placement.TargetID) string {
	return filepath.Join(dataDir, "targets", strconv.FormatUint(uint64(id), 10))
}

// SafeFenceGrace is the shortest FenceGrace that outlasts clients with
// the default layout lease (client.DefaultLayoutLease, 1 min) and their
// retries (RetryTimeout and FlushTimeout, 1 min each): OpenDir warns
// below it.
const SafeFenceGrace = 3 * time.Minute

// OpenDir opens (creating if needed) the stores of the given targets under
// dataDir (see Dir) and returns a Service hosting them.
func OpenDir(dataDir string, ids []placement.TargetID, opts Options) (*Service, error) {
	var stores []*chunk.Store
	fail := func(err error) (*Service, error) {
		for _, st := range stores {
			st.Close()
		}
		return nil, err
	}
	if opts.FenceGrace > 0 && opts.FenceGrace < SafeFenceGrace && opts.Logger != nil {
		opts.Logger.Warn("target: a chunk fence grace this short may end before a client stops using an old layout (the default layout lease is 1 min, its requests retry for up to 2 min more)",
			"chunk_fence_grace", opts.FenceGrace, "safe_from", SafeFenceGrace)
	}
	for _, id := range ids {
		st, err := chunk.Open(Dir(dataDir, id), chunk.Options{Target: id, Logger: opts.Logger, MaxOpenChunks: opts.MaxOpenChunks, Precreate: opts.Precreate, FenceGrace: opts.FenceGrace})
		if err != nil {
			return fail(fmt.Errorf("target: open target %d in %s: %w", id, dataDir, err))
		}
		stores = append(stores, st)
	}
	s, err := New(stores...)
	if err != nil {
		return fail(err)
	}
	s.opts = opts
	s.gate = newGate(opts.QosOff, opts.QosInService)
	return s, nil
}

// Targets returns the IDs of the hosted targets, in increasing order.
func (s *Service) Targets() []placement.TargetID { return slices.Clone(s.ids) }

// Store returns the store of target id.
func (s *Service) Store(id placement.TargetID) (*chunk.Store, bool) {
	h, ok := s.targets[id]
	if !ok {
		return nil, false
	}
	return h.store, true
}

// Fences returns the chunk fences target id holds, in its own store and
// its replicated chains' stores, and how many of them expired since they
// were opened (chunk.Store.Fences).
func (s *Service) Fences(id placement.TargetID) (held int, expired uint64, ok bool) {
	h, ok := s.targets[id]
	if !ok {
		return 0, 0, false
	}
	held, expired = h.store.Fences()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, st := range h.chains {
		n, x := st.Fences()
		held += n
		expired += x
	}
	return held, expired, true
}

// Stats returns the counters of target id.
func (s *Service) Stats(id placement.TargetID) (Stats, bool) {
	h, ok := s.targets[id]
	if !ok {
		return Stats{}, false
	}
	c := &h.c
	return Stats{
		ReadOps: c.readOps.Load(), ReadBytes: c.readBytes.Load(),
		WriteOps: c.writeOps.Load(), WriteBytes: c.writeBytes.Load(),
		SyncOps: c.syncOps.Load(), TruncateOps: c.truncateOps.Load(), LateOps: c.lateOps.Load(),
		RemoveOps: c.removeOps.Load(), Errors: c.errors.Load(), Garbled: c.garbled.Load(),
		SentUnread: c.sentUnread.Load(),
	}, true
}

// Close syncs and closes every store. It is idempotent. Stop the
// wire.Server first: requests after Close fail with errs.Unavailable.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		s.gate.Close()
		all := []error{s.closeChains()}
		for _, id := range s.ids {
			all = append(all, s.targets[id].store.Close())
		}
		s.closeErr = errors.Join(all...)
	})
	return s.closeErr
}

// Register installs the chunk operation handlers on srv.
func (s *Service) Register(srv *wire.Server) {
	srv.Handle(wire.OpChunkWrite, s.handleWrite)
	srv.Handle(wire.OpChunkRead, s.handleRead)
	srv.Handle(wire.OpChunkSync, s.handleSync)
	srv.Handle(wire.OpChunkTruncate, s.handleTruncate)
	srv.Handle(wire.OpChunkPunch, s.handlePunch)
	srv.Handle(wire.OpChunkMap, s.handleMap)
	srv.Handle(wire.OpChunkRemove, s.handleRemove)
	srv.Handle(wire.OpChunkFence, s.handleFence)
	srv.Handle(wire.OpTargetStat, s.handleStat)
	srv.Handle(wire.OpChunkList, s.handleList)
	srv.Handle(wire.OpChunkInfo, s.handleInfo)
	srv.Handle(wire.OpDirectInfo, s.handleDirectInfo)
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.Default()
	}
	return o.Logger
}

// access returns the access kind of a chain-wide request with these flags.
func accessOf(flags uint8) access {
	switch {
	case flags&wire.FlagResync != 0:
		return accResync
	case flags&wire.FlagForwarded != 0:
		return accFwd
	}
	return accWrite
}

func (s *Service) lookup(id placement.TargetID) (*hosted, error) {
	h, ok := s.targets[id]
	if !ok {
		return nil, errs.New(errs.NotFound, "target: target %d is not hosted here (hosted: %v)", id, s.ids)
	}
	return h, nil
}

func (h *hosted) fail(err error) error {
	h.c.errors.Add(1)
	return err
}

func checkOff(op string, ref wire.ChunkRef, off uint64) error {
	if off > math.MaxInt64 {
		return errs.New(errs.Invalid, "target: %s chunk ino %d slot %d on target %d: offset %d is out of range", op, ref.Ino, ref.Slot, ref.Target, off)
	}
	return nil
}

func (s *Service) handleWrite(ctx context.Context, req *wire.Request) (wire.Response, error) {
	var m wire.ChunkWriteReq
	if err := wire.Unmarshal(req.Body, &m); err != nil {
		return wire.Response{}, fmt.Errorf("target: chunk write request: %w", err)
	}
	h, err := s.lookup(m.Target)
	if err != nil {
		return wire.Response{}, err
	}
	if err := checkOff("write", m.ChunkRef, m.Off); err != nil {
		return wire.Response{}, h.fail(err)
	}
	// End to end: the data must be what the client sent, before it is
	// stored (with checksums of its own) or passed down the chain.
	if m.HasDataCRC {
		if got := checksum.DataCRC(req.Data); got != m.DataCRC {
			h.c.garbled.Add(1)
			return wire.Response{}, h.fail(errs.New(errs.Garbled, "target: write of %d bytes at %d to chunk ino %d slot %d on target %d: the data's CRC32C is %08x, the request says %08x (garbled in transit)",
				len(req.Data), m.Off, m.Ino, m.Slot, m.Target, got, m.DataCRC))
		}
	}
	fw := m
	ctx, late, cancel := applyBy(ctx, req, m.ApplyBy)
	defer cancel()
	err = s.applyChunk(ctx, h, m.ChunkRef, wire.OpChunkWrite, &fw, &fw.ChunkRef, [][]byte{req.Data}, func(st *chunk.Store, id chunk.ID) error {
		// Only the local write is scheduled, not the forwarding to the next
		// replica: a request in service never waits for another node's
		// scheduler, so two nodes' gates cannot wait on each other.
		release, err := s.acquireInTime(ctx, late, h, "write", m.ChunkRef, m.Qos, len(req.Data))
		if err != nil {
			return err
		}
		defer release()
		return st.WriteAt(id, int64(m.Off), req.Data, m.Sync)
	})
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	h.c.writeOps.Add(1)
	h.c.writeBytes.Add(uint64(len(req.Data)))
	return wire.Response{}, nil
}

// resolveRead is resolve for a read of the chunk ref names: on a
// replicated chain, a write of this chunk in flight may not have reached
// the other replicas yet, so it waits for it, so that no later read
// elsewhere can return older data than this one.
func (s *Service) resolveRead(ctx context.Context, h *hosted, ref wire.ChunkRef) (*chunk.Store, error) {
	st, c, err := s.resolve(ctx, h, ref.Target, ref.ChainRef, accRead)
	if err != nil {
		return nil, err
	}
	if c != nil {
		if k := (chunkKey{ref.Target, c.ID, ref.Ino, ref.Slot}); s.cs.locks.busy(k) {
			s.cs.locks.lock(k)()
		}
	}
	return st, nil
}

func (s *Service) handleRead(ctx context.Context, req *wire.Request) (wire.Response, error) {
	var m wire.ChunkReadReq
	if err := wire.Unmarshal(req.Body, &m); err != nil {
		return wire.Response{}, fmt.Errorf("target: chunk read request: %w", err)
	}
	h, err := s.lookup(m.Target)
	if err != nil {
		return wire.Response{}, err
	}
	if err := checkOff("read", m.ChunkRef, m.Off); err != nil {
		return wire.Response{}, h.fail(err)
	}
	if m.Len > wire.MaxData {
		return wire.Response{}, h.fail(errs.New(errs.Invalid, "target: read of %d bytes from chunk ino %d slot %d on target %d is over the limit of %d",
			m.Len, m.Ino, m.Slot, m.Target, wire.MaxData))
	}
	st, err := s.resolveRead(ctx, h, m.ChunkRef)
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	release, err := s.gate.acquire(ctx, m.Qos, int(m.Len))
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	id := chunk.ID{Ino: m.Ino, Slot: m.Slot}
	if req.SendFile && m.Flags&wire.ReadFlagUnverified != 0 {
		// Cached whole blocks go from the page cache to the socket unread,
		// with the checksums they were stored with: the client's check
		// of them is the check at rest too (wire.ReadFlagUnverified).
		if fr, ok := st.ReadFileRange(id, int64(m.Off), int(m.Len)); ok {
			release()
			h.c.readOps.Add(1)
			h.c.readBytes.Add(uint64(fr.N))
			h.c.sentUnread.Add(1)
			return wire.Response{
				Msg:      &wire.ChunkReadResp{ChunkLen: uint64(fr.ChunkLen), DataSums: fr.Sums, HasDataSums: true},
				DataFile: &wire.FileRange{F: fr.F, Off: fr.Off, N: fr.N},
				Release:  func() { fr.F.Close() },
			}, nil
		}
	}
	buf := wire.GetBuf(int(m.Len))
	var sums []uint32
	if !req.Local { // end to end, for the trip back (none in process)
		sums = make([]uint32, checksum.Pieces(int64(m.Off), len(buf)))
	}
	n, chunkLen, err := st.ReadAtSums(id, int64(m.Off), buf, sums)
	release()
	if err != nil {
		wire.PutBuf(buf)
		return wire.Response{}, h.fail(err)
	}
	h.c.readOps.Add(1)
	h.c.readBytes.Add(uint64(n))
	if sums != nil {
		sums = sums[:checksum.Pieces(int64(m.Off), n)]
	}
	return wire.Response{
		Msg:     &wire.ChunkReadResp{ChunkLen: uint64(chunkLen), DataSums: sums, HasDataSums: !req.Local},
		Data:    buf[:n],
		Release: func() { wire.PutBuf(buf) },
	}, nil
}

func (s *Service) handleSync(ctx context.Context, req *wire.Request) (wire.Response, error) {
	var m wire.ChunkSyncReq
	if err := wire.Unmarshal(req.Body, &m); err != nil {
		return wire.Response{}, fmt.Errorf("target: chunk sync request: %w", err)
	}
	h, err := s.lookup(m.Target)
	if err != nil {
		return wire.Response{}, err
	}
	st, c, err := s.resolve(ctx, h, m.Target, m.ChainRef, accessOf(m.Flags))
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	ids := make([]chunk.ID, len(m.Slots))
	for i, slot := range m.Slots {
		ids[i] = chunk.ID{Ino: m.Ino, Slot: slot}
	}
	// Only the local sync is scheduled (as a write): it is charged no
	// bytes (they were charged when written) but holds a place while
	// the disk works, in its class's turn.
	release, err := s.gate.acquire(ctx, m.Qos, 0)
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	err = st.Sync(ids...)
	release()
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	if c != nil && m.Flags&wire.FlagResync == 0 {
		if err := s.forwardSet(ctx, c, wire.OpChunkSync, m); err != nil {
			return wire.Response{}, h.fail(err)
		}
	}
	h.c.syncOps.Add(1)
	return wire.Response{}, nil
}

func (s *Service) handleTruncate(ctx context.Context, req *wire.Request) (wire.Response, error) {
	var m wire.ChunkTruncateReq
	if err := wire.Unmarshal(req.Body, &m); err != nil {
		return wire.Response{}, fmt.Errorf("target: chunk truncate request: %w", err)
	}
	h, err := s.lookup(m.Target)
	if err != nil {
		return wire.Response{}, err
	}
	if err := checkOff("truncate", m.ChunkRef, m.Size); err != nil {
		return wire.Response{}, h.fail(err)
	}
	fw := m
	ctx, late, cancel := applyBy(ctx, req, m.ApplyBy)
	defer cancel()
	err = s.applyChunk(ctx, h, m.ChunkRef, wire.OpChunkTruncate, &fw, &fw.ChunkRef, nil, func(st *chunk.Store, id chunk.ID) error {
		release, err := s.acquireInTime(ctx, late, h, "truncate", m.ChunkRef, m.Qos, 0)
		if err != nil {
			return err
		}
		defer release()
		return st.Truncate(id, int64(m.Size))
	})
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	h.c.truncateOps.Add(1)
	return wire.Response{}, nil
}

// handlePunch zeroes a range of a chunk, freeing its whole blocks
// (chunk.Store.Punch), and passes the request along the chain.
func (s *Service) handlePunch(ctx context.Context, req *wire.Request) (wire.Response, error) {
	var m wire.ChunkPunchReq
	if err := wire.Unmarshal(req.Body, &m); err != nil {
		return wire.Response{}, fmt.Errorf("target: chunk punch request: %w", err)
	}
	h, err := s.lookup(m.Target)
	if err != nil {
		return wire.Response{}, err
	}
	if err := checkOff("punch", m.ChunkRef, m.Off); err != nil {
		return wire.Response{}, h.fail(err)
	}
	fw := m
	ctx, late, cancel := applyBy(ctx, req, m.ApplyBy)
	defer cancel()
	err = s.applyChunk(ctx, h, m.ChunkRef, wire.OpChunkPunch, &fw, &fw.ChunkRef, nil, func(st *chunk.Store, id chunk.ID) error {
		release, err := s.acquireInTime(ctx, late, h, "punch", m.ChunkRef, m.Qos, 0)
		if err != nil {
			return err
		}
		defer release()
		if m.Off >= chunk.MaxChunkSize {
			return nil // past any chunk's end
		}
		return st.Punch(id, int64(m.Off), int64(min(m.Len, chunk.MaxChunkSize-m.Off)))
	})
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	h.c.truncateOps.Add(1)
	return wire.Response{}, nil
}

// handleMap answers where a range of a chunk holds data
// (chunk.Store.DataRuns), where reads are answered.
func (s *Service) handleMap(ctx context.Context, req *wire.Request) (wire.Response, error) {
	var m wire.ChunkMapReq
	if err := wire.Unmarshal(req.Body, &m); err != nil {
		return wire.Response{}, fmt.Errorf("target: chunk map request: %w", err)
	}
	h, err := s.lookup(m.Target)
	if err != nil {
		return wire.Response{}, err
	}
	if err := checkOff("map", m.ChunkRef, m.Off); err != nil {
		return wire.Response{}, h.fail(err)
	}
	if m.Len > wire.MaxMapLen {
		return wire.Response{}, h.fail(errs.New(errs.Invalid, "target: map of %d bytes of chunk ino %d slot %d on target %d is over the limit of %d",
			m.Len, m.Ino, m.Slot, m.Target, wire.MaxMapLen))
	}
	st, err := s.resolveRead(ctx, h, m.ChunkRef)
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	release, err := s.gate.acquire(ctx, m.Qos, 0)
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	off := min(m.Off, chunk.MaxChunkSize) // past any chunk's end: no runs
	runs, length, err := st.DataRuns(chunk.ID{Ino: m.Ino, Slot: m.Slot}, int64(off), int64(min(m.Len, chunk.MaxChunkSize-off)))
	release()
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	resp := &wire.ChunkMapResp{ChunkLen: uint64(length)}
	if len(runs) > 0 {
		resp.Runs = make([]wire.ChunkRun, len(runs))
		for i, r := range runs {
			resp.Runs[i] = wire.ChunkRun{Off: uint64(r[0]), End: uint64(r[1])}
		}
	}
	return wire.Response{Msg: resp}, nil
}

func (s *Service) handleRemove(ctx context.Context, req *wire.Request) (wire.Response, error) {
	var m wire.ChunkRemoveReq
	if err := wire.Unmarshal(req.Body, &m); err != nil {
		return wire.Response{}, fmt.Errorf("target: chunk remove request: %w", err)
	}
	h, err := s.lookup(m.Target)
	if err != nil {
		return wire.Response{}, err
	}
	st, c, err := s.resolve(ctx, h, m.Target, m.ChainRef, accessOf(m.Flags))
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	if c != nil {
		slots := slices.Sorted(slices.Values(m.Slots))
		for _, slot := range slices.Compact(slots) {
			defer s.cs.locks.lock(chunkKey{m.Target, c.ID, m.Ino, slot})()
		}
	}
	release, err := s.gate.acquire(ctx, m.Qos, 0)
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	err = st.Remove(m.Ino, m.Slots)
	release()
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	if c != nil && m.Flags&wire.FlagResync == 0 {
		if err := s.forwardSet(ctx, c, wire.OpChunkRemove, m); err != nil {
			return wire.Response{}, h.fail(err)
		}
	}
	h.c.removeOps.Add(1)
	return wire.Response{}, nil
}

// StatAll returns the capacity and usage of every hosted target; a target
// whose store cannot say is reported with zeros.
func (s *Service) StatAll() []wire.TargetStat {
	out := make([]wire.TargetStat, 0, len(s.ids))
	for _, id := range s.ids {
		h := s.targets[id]
		st := wire.TargetStat{Target: id, Corruptions: h.store.Corruptions()}
		if capacity, used, free, chunks, err := h.store.Stat(); err == nil {
			st.Capacity, st.Used, st.Free, st.Chunks = capacity, used, free, chunks
		}
		out = append(out, st)
	}
	return out
}

func (s *Service) handleStat(_ context.Context, req *wire.Request) (wire.Response, error) {
	var m wire.TargetReq
	if err := wire.Unmarshal(req.Body, &m); err != nil {
		return wire.Response{}, fmt.Errorf("target: target stat request: %w", err)
	}
	h, err := s.lookup(m.Target)
	if err != nil {
		return wire.Response{}, err
	}
	capacity, used, free, chunks, err := h.store.Stat()
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	return wire.Response{Msg: &wire.TargetStat{
		Target: m.Target, Capacity: capacity, Used: used, Free: free,
		Chunks: chunks, Corruptions: h.store.Corruptions(),
	}}, nil
}

// applyChunk applies a change to one chunk (local) on the store of the
// request's chain replica and passes the request on along the chain. For a
// replicated chain it holds the chunk's lock from the local change until
// the next replica answered. fw is a copy of the request, whose ChunkRef
// fwRef is rewritten for the next replica.
func (s *Service) applyChunk(ctx context.Context, h *hosted, ref wire.ChunkRef, op wire.Op, fw wire.Message, fwRef *wire.ChunkRef,
	data [][]byte, local func(*chunk.Store, chunk.ID) error) error {
	st, c, err := s.resolve(ctx, h, ref.Target, ref.ChainRef, accessOf(ref.Flags))
	if err != nil {
		return err
	}
	if c != nil {
		defer s.cs.locks.lock(chunkKey{ref.Target, c.ID, ref.Ino, ref.Slot})()
	}
	if err := local(st, chunk.ID{Ino: ref.Ino, Slot: ref.Slot}); err != nil {
		return err
	}
	if c == nil || ref.Flags&wire.FlagResync != 0 {
		return nil
	}
	fwRef.Flags |= wire.FlagForwarded
	return s.forward(ctx, c, ref.Target, op, func(next placement.TargetID) wire.Message {
		fwRef.Target = next
		return fw
	}, data)
}

// forwardSet passes a sync or remove request along the chain.
func (s *Service) forwardSet(ctx context.Context, c *placement.Chain, op wire.Op, m wire.TaggedChunkSetReq) error {
	target := m.Target
	m.Flags |= wire.FlagForwarded
	return s.forward(ctx, c, target, op, func(next placement.TargetID) wire.Message {
		m.Target = next
		return &m
	}, nil)
}

func (s *Service) handleList(ctx context.Context, req *wire.Request) (wire.Response, error) {
	var m wire.ChunkListReq
	if err := wire.Unmarshal(req.Body, &m); err != nil {
		return wire.Response{}, fmt.Errorf("target: chunk list request: %w", err)
	}
	h, err := s.lookup(m.Target)
	if err != nil {
		return wire.Response{}, err
	}
	st, _, err := s.resolve(ctx, h, m.Target, m.ChainRef, accList)
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	limit := int(min(max(m.Limit, 1), 100000))
	if m.Fences {
		ids, more := st.FrozenList(chunk.ID{Ino: m.AfterIno, Slot: m.AfterSlot}, limit)
		resp := &wire.ChunkListResp{More: more, Fences: true, Chunks: make([]wire.ChunkInfo, len(ids))}
		for i, id := range ids {
			resp.Chunks[i] = wire.ChunkInfo{Ino: id.Ino, Slot: id.Slot}
		}
		return wire.Response{Msg: resp}, nil
	}
	infos, more, err := st.List(chunk.ID{Ino: m.AfterIno, Slot: m.AfterSlot}, limit)
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	resp := &wire.ChunkListResp{More: more, Chunks: make([]wire.ChunkInfo, len(infos))}
	for i, in := range infos {
		resp.Chunks[i] = wire.ChunkInfo{Ino: in.ID.Ino, Slot: in.ID.Slot, Len: uint64(in.Len), Digest: in.Digest}
	}
	return wire.Response{Msg: resp}, nil
}

// handleInfo answers OpChunkInfo: the length and content digest of each
// chunk named that exists, from a serving replica.
func (s *Service) handleInfo(ctx context.Context, req *wire.Request) (wire.Response, error) {
	var m wire.ChunkInfoReq
	if err := wire.Unmarshal(req.Body, &m); err != nil {
		return wire.Response{}, fmt.Errorf("target: chunk info request: %w", err)
	}
	h, err := s.lookup(m.Target)
	if err != nil {
		return wire.Response{}, err
	}
	st, _, err := s.resolve(ctx, h, m.Target, m.ChainRef, accRead)
	if err != nil {
		return wire.Response{}, h.fail(err)
	}
	resp := &wire.ChunkListResp{}
	for _, slot := range m.Slots {
		in, found, err := st.ChunkInfo(chunk.ID{Ino: m.Ino, Slot: slot})
		if err != nil {
			return wire.Response{}, h.fail(err)
		}
		if found {
			resp.Chunks = append(resp.Chunks, wire.ChunkInfo{Ino: m.Ino, Slot: slot, Len: uint64(in.Len), Digest: in.Digest})
		}
	}
	return wire.Response{Msg: resp}, nil
}

// OpenChunkData opens chunk (ino, slot) of chain for reading straight from
// its data file (FUSE passthrough; see chunk.Store.OpenData), if a target
// of this service holds the chain alone. Replicated chains give an
// errs.NotSupported error: a direct reader would not see their version
// changes or resyncs.
func (s *Service) OpenChunkData(chain uint32, ino uint64, slot uint32) (*os.File, int64, error) {
	if placement.ChainID(chain) >= placement.FirstReplicatedChain {
		return nil, 0, errs.New(errs.NotSupported, "target: chain %d is replicated: no direct reads", chain)
	}
	st, ok := s.Store(placement.TargetID(chain))
	if !ok {
		return nil, 0, errs.New(errs.NotSupported, "target: target %d is not local", chain)
	}
	return st.OpenData(chunk.ID{Ino: ino, Slot: slot})
}
