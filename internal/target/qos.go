package target

import (
	"context"

	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// DefaultQosInService is how many chunk reads and writes a Service serves
// at once when its Options do not say: enough to keep the disk and the
// page cache busy (one 1 MiB write takes ~0.3-1 ms on the machines we
// measured, docs/adr/0015-qos.md), few enough that a newly queued
// interactive read waits for at most that many requests ahead of it.
const DefaultQosInService = 8

// SystemResyncJob is the job of a chain's resync copies (class background).
const SystemResyncJob = "sluice:resync"

// QosStats are the counters of the scheduler in front of the chunk reads
// and writes (a qos.Gate; a class's ServedBytes are bytes).
type QosStats = qos.GateStats

// classOf maps a wire tag's class to a qos.Class: none is training.
func classOf(t wire.QosTag) qos.Class { return qos.FromWire(t.Class) }

// TagOf is the wire tag of a job and class.
func TagOf(job string, c qos.Class) wire.QosTag { return wire.QosTag{Job: job, Class: uint8(c) + 1} }

// ConfigOf turns the wire settings into the targets' scheduler
// configuration.
func ConfigOf(m *wire.QosConfig) qos.Config { return m.Scheduler(false) }

// gate admits chunk reads and writes through a qos.Gate, in the class and
// job of their tag.
type gate struct{ *qos.Gate }

func newGate(off bool, limit int) gate {
	if limit <= 0 {
		limit = DefaultQosInService
	}
	return gate{qos.NewGate(off, limit)}
}

// acquire waits until the request may be served and returns the function
// that ends its service.
func (g gate) acquire(ctx context.Context, tag wire.QosTag, cost int) (release func(), err error) {
	return g.Acquire(ctx, tag.Job, classOf(tag), cost)
}

// ConfigureQos applies QoS settings (from the metadata service, with each
// heartbeat) to the scheduler in front of the chunk reads and writes.
// Invalid settings are refused.
func (s *Service) ConfigureQos(cfg qos.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.gate.Configure(cfg)
	return nil
}

// QosStats returns the scheduler's counters.
func (s *Service) QosStats() QosStats { return s.gate.Stats() }

// QosLimited reports whether job has a limit on the chunk reads and
// writes.
func (s *Service) QosLimited(job string) bool { return s.gate.Limited(job) }
