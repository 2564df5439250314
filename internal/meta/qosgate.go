package meta

import (
	"context"
	"fmt"
	"sync"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// DefaultQosInService is how many namespace requests the metadata service
// serves at once when Options.QosInService does not say; the rest wait in
// its QoS scheduler, ordered by class and limited per job (docs/qos.md).
const DefaultQosInService = 8

// scheduledOps are the requests the metadata service admits through its
// QoS gate: the namespace operations that clients make for applications,
// one unit of cost each (a lookup), a listing one more for every
// readDirPerLookup entries it returns (readDirPlusPerLookup with their
// attributes). Not scheduled, so that a storm from clients can
// never hold them back: cluster membership (register, heartbeats), the
// change feed's long polls, syncs, the settings themselves (an
// administrator limiting a storm must get through), and the system's own
// movers (migration, tier, staging, profile shipping, audit).
var scheduledOps = []wire.Op{
	wire.OpResolve, wire.OpLookup, wire.OpGetAttr, wire.OpSetAttr,
	wire.OpCreate, wire.OpMkdir, wire.OpSymlink, wire.OpReadlink,
	wire.OpUnlink, wire.OpRmdir, wire.OpRename, wire.OpLink, wire.OpReadDir,
	wire.OpGetXattr, wire.OpSetXattr, wire.OpListXattr, wire.OpRemoveXattr,
	wire.OpGetLayout, wire.OpCommitWrite, wire.OpWriteInline, wire.OpReadInline,
	wire.OpSetChunks, wire.OpResolveRead, wire.OpPutFile, wire.OpOpenIno,
	wire.OpStatfs,
}

// gateHandlers puts the QoS gate in front of the handlers of scheduledOps
// registered on srv: each request waits for a place in the class and job
// its connection declared (OpSession; none is class training, job "").
func (s *Service) gateHandlers(srv *wire.Server) {
	for _, op := range scheduledOps {
		h := srv.Handler(op)
		if h == nil {
			continue
		}
		srv.Handle(op, func(ctx context.Context, r *wire.Request) (wire.Response, error) {
			tag := r.Session.Qos()
			release, err := s.gate.Acquire(ctx, tag.Job, qos.FromWire(tag.Class), 1)
			if err != nil {
				return wire.Response{}, fmt.Errorf("meta: op %d: waiting for the QoS scheduler: %w", op, err)
			}
			// The place is given back when the request's transaction
			// waits for its commit (and sync): the waits of concurrent
			// requests then share one group commit instead of taking
			// every place.
			var once sync.Once
			done := func() { once.Do(release) }
			defer done()
			resp, err := h(kv.WithCommitting(ctx, done), r)
			if page, ok := resp.Msg.(*wire.ReadDirResp); ok && err == nil {
				s.gate.Charge(tag.Job, qos.FromWire(tag.Class), readDirCost(page)-1)
			}
			return resp, err
		})
	}
}

// Entries of a directory listing that cost the metadata service what one
// lookup request does, measured by BenchmarkReadDirCost (a loopback
// connection, the reply encoded and decoded; 2026-11-28, the 2-core
// development VM: 59 names, or 15-16 names with their attributes).
const (
	readDirPerLookup     = 64
	readDirPlusPerLookup = 16
)

// readDirCost is what a listing's page costs in the gate's unit (lookup
// requests): one request, plus its entries. The gate admits a listing at
// the cost of one request and charges the rest once the page is read.
func readDirCost(page *wire.ReadDirResp) int {
	per := readDirPerLookup
	if len(page.Entries) > 0 && page.Entries[0].Attr != nil {
		per = readDirPlusPerLookup
	}
	return 1 + len(page.Entries)/per
}

// reloadQos applies the stored settings to the gate: at start, after a
// change through this service, and every second (another service sharing
// the database may have changed them). A failure keeps the settings in
// force and is logged.
func (s *Service) reloadQos(ctx context.Context) {
	m, err := s.QosList(ctx)
	if err == nil {
		cfg := m.Scheduler(true)
		if err = cfg.Validate(); err == nil {
			s.gate.Configure(cfg)
			return
		}
	}
	if ctx.Err() == nil {
		s.log.Warn("meta: cannot load the QoS settings; the ones in force stay", "err", err)
	}
}

// QosStats returns the counters of the scheduler in front of the namespace
// requests (a class's ServedBytes count requests).
func (s *Service) QosStats() qos.GateStats { return s.gate.Stats() }

// QosLimited reports whether job has a limit on the metadata service.
func (s *Service) QosLimited(job string) bool { return s.gate.Limited(job) }
