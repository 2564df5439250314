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

// gateHandlers puts the QoS gate in front of the handlers of the requests
// it schedules (wire.MetaScheduledOps, at the costs wire says) registered
// on srv: each request waits for a place in the class and job
// its connection declared (OpSession; none is class training, job "").
func (s *Service) gateHandlers(srv *wire.Server) {
	for _, op := range wire.MetaScheduledOps() {
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
			if c, ok := resp.Msg.(interface{ QosCost() int }); ok && err == nil {
				// A listing's entries, a batch import's files.
				s.gate.Charge(tag.Job, qos.FromWire(tag.Class), c.QosCost()-1)
			}
			return resp, err
		})
	}
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
