package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// QoS settings (docs/qos.md, ADR 0015): "Qc" + class byte -> u32 weight
// (big-endian), "Qj" + job name -> u64 rate, u64 burst (bytes per second,
// bytes; big-endian) on each target, "Qm" + job name -> u64 rate, u64
// burst (requests per second, requests) on the metadata service, "Qg" +
// job name -> u64 rate, u64 burst (bytes per second, bytes) in the whole
// cluster, split among the storage nodes by demand (QosFor). A class
// without a key has its default weight, a job without one no limit. The
// targets get the settings with every heartbeat reply (QosConfig) and
// apply them to their schedulers; the metadata service applies them to
// its own (qosgate.go).

// maxQosJobs bounds the limited jobs, so that the settings fit in every
// heartbeat reply.
const maxQosJobs = 1024

var (
	qosClassPrefix   = []byte{pfxQos, 'c'}
	qosJobPrefix     = []byte{pfxQos, 'j'}
	qosMetaJobPrefix = []byte{pfxQos, 'm'}
	qosClusterPrefix = []byte{pfxQos, 'g'}
)

func qosClassKey(c qos.Class) []byte { return append(append([]byte(nil), qosClassPrefix...), byte(c)) }
func qosJobKey(job string) []byte    { return append(append([]byte(nil), qosJobPrefix...), job...) }
func qosMetaJobKey(job string) []byte {
	return append(append([]byte(nil), qosMetaJobPrefix...), job...)
}
func qosClusterJobKey(job string) []byte {
	return append(append([]byte(nil), qosClusterPrefix...), job...)
}

// qosLimit decodes job's stored limit.
func qosLimit(v []byte, job string) (rate, burst uint64, err error) {
	if len(v) != 16 {
		return 0, 0, errs.New(errs.Corruption, "meta: qos limit of job %q: %d bytes", job, len(v))
	}
	return binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:]), nil
}

func limitText(rate, burst uint64) string {
	if rate == 0 {
		return "none"
	}
	return fmt.Sprintf("rate=%d burst=%d", rate, burst)
}

// QosSet changes one QoS setting and records the change in the audit trail.
func (s *Service) QosSet(ctx context.Context, req *wire.QosSetReq) error {
	now := time.Now().UnixNano()
	who := whoOf(ctx, nil)
	var e *audit.Entry
	switch req.Kind {
	case wire.QosSetWeight:
		c := qos.Class(req.Class)
		if c > qos.Background {
			return errs.New(errs.Invalid, "meta: qos: class %d is not a class", req.Class)
		}
		e = &audit.Entry{Time: now, Op: audit.OpQos, Name: "class:" + c.String(), Who: who}
	case wire.QosSetJob, wire.QosSetJobMeta, wire.QosSetJobCluster, wire.QosRemoveJob:
		if req.Job == "" || len(req.Job) > 255 {
			return errs.New(errs.Invalid, "meta: qos: job name %q: want 1-255 bytes", req.Job)
		}
		if req.Kind != wire.QosRemoveJob && (req.Rate == 0 || req.Burst == 0) {
			return errs.New(errs.Invalid, "meta: qos: job %q needs a rate and a burst above 0 (remove the limit instead)", req.Job)
		}
		e = &audit.Entry{Time: now, Op: audit.OpQos, Name: "job:" + req.Job, Who: who}
	default:
		return errs.New(errs.Invalid, "meta: qos: unknown change kind %d", req.Kind)
	}
	err := s.update(ctx, func(tx kv.Txn) error {
		switch req.Kind {
		case wire.QosSetWeight:
			c := qos.Class(req.Class)
			old := qos.DefaultWeights[c]
			if v, err := tx.Get(qosClassKey(c)); err == nil && len(v) == 4 {
				old = float64(binary.BigEndian.Uint32(v))
			} else if err != nil && !errors.Is(err, kv.ErrNotFound) {
				return err
			}
			nw := qos.DefaultWeights[c]
			if req.Weight == 0 {
				tx.Delete(qosClassKey(c))
			} else {
				tx.Set(qosClassKey(c), binary.BigEndian.AppendUint32(nil, req.Weight))
				nw = float64(req.Weight)
			}
			e.Changes = []audit.Change{{Field: "weight", Old: strconv.FormatFloat(old, 'g', -1, 64), New: strconv.FormatFloat(nw, 'g', -1, 64)}}
		case wire.QosRemoveJob:
			found := false
			for _, k := range []struct {
				key   []byte
				field string
			}{{qosJobKey(req.Job), "limit"}, {qosMetaJobKey(req.Job), "meta-limit"}, {qosClusterJobKey(req.Job), "cluster-limit"}} {
				v, err := tx.Get(k.key)
				if errors.Is(err, kv.ErrNotFound) {
					continue
				} else if err != nil {
					return err
				}
				rate, burst, err := qosLimit(v, req.Job)
				if err != nil {
					return err
				}
				found = true
				tx.Delete(k.key)
				e.Changes = append(e.Changes, audit.Change{Field: k.field, Old: limitText(rate, burst), New: "none"})
			}
			if !found {
				return errs.New(errs.NotFound, "job %q has no limit", req.Job)
			}
		default:
			key, prefix, field := qosJobKey(req.Job), qosJobPrefix, "limit"
			switch req.Kind {
			case wire.QosSetJobMeta:
				key, prefix, field = qosMetaJobKey(req.Job), qosMetaJobPrefix, "meta-limit"
			case wire.QosSetJobCluster:
				key, prefix, field = qosClusterJobKey(req.Job), qosClusterPrefix, "cluster-limit"
			}
			var oldRate, oldBurst uint64
			v, err := tx.Get(key)
			switch {
			case errors.Is(err, kv.ErrNotFound):
				n := 0
				if err := tx.Scan(prefix, kv.PrefixEnd(prefix), maxQosJobs, func(_, _ []byte) bool { n++; return true }); err != nil {
					return err
				}
				if n >= maxQosJobs {
					return errs.New(errs.NoSpace, "%d jobs are limited already; remove one first", n)
				}
			case err != nil:
				return err
			default:
				if oldRate, oldBurst, err = qosLimit(v, req.Job); err != nil {
					return err
				}
			}
			tx.Set(key, binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, req.Rate), req.Burst))
			e.Changes = []audit.Change{{Field: field, Old: limitText(oldRate, oldBurst), New: limitText(req.Rate, req.Burst)}}
		}
		return s.appendAudit(tx, e)
	})
	if err != nil {
		return fmt.Errorf("meta: qos set: %w", err)
	}
	s.audited()
	s.reloadQos(ctx)
	return nil
}

// QosList returns the QoS settings: every class's weight (defaults
// included) and the limited jobs, sorted by name.
func (s *Service) QosList(ctx context.Context) (wire.QosConfig, error) {
	var r wire.QosConfig
	err := s.db.View(ctx, func(tx kv.Txn) error {
		r = wire.QosConfig{Weights: make([]uint32, len(qos.DefaultWeights))}
		for i, w := range qos.DefaultWeights {
			r.Weights[i] = uint32(w)
		}
		var derr error
		err := tx.Scan(qosClassPrefix, kv.PrefixEnd(qosClassPrefix), 0, func(k, v []byte) bool {
			if len(k) != 3 || int(k[2]) >= len(r.Weights) || len(v) != 4 {
				derr = errs.New(errs.Corruption, "meta: qos class record %q", k)
				return false
			}
			r.Weights[k[2]] = binary.BigEndian.Uint32(v)
			return true
		})
		if err != nil {
			return err
		}
		if derr != nil {
			return derr
		}
		jobs := func(prefix []byte) ([]wire.QosJob, error) {
			var out []wire.QosJob
			var derr error
			err := tx.Scan(prefix, kv.PrefixEnd(prefix), 0, func(k, v []byte) bool {
				j := wire.QosJob{Job: string(k[len(prefix):])}
				j.Rate, j.Burst, derr = qosLimit(v, j.Job)
				out = append(out, j)
				return derr == nil
			})
			if err == nil {
				err = derr
			}
			return out, err
		}
		if r.Jobs, err = jobs(qosJobPrefix); err != nil {
			return err
		}
		if r.MetaJobs, err = jobs(qosMetaJobPrefix); err != nil {
			return err
		}
		r.ClusterJobs, err = jobs(qosClusterPrefix)
		return err
	})
	if err != nil {
		return wire.QosConfig{}, fmt.Errorf("meta: qos list: %w", err)
	}
	return r, nil
}

// qosUser is implemented by Targets that know what the storage nodes'
// jobs asked of them lately (cluster.Manager).
type qosUser interface {
	QosUse() (nodes []string, uses [][]wire.QosUse)
}

// QosFor returns the QoS settings for storage node node, as its
// heartbeat's reply carries them: QosList's, with the node's share of
// every cluster-wide limit in Jobs (nodeLimits).
func (s *Service) QosFor(ctx context.Context, node string) (wire.QosConfig, error) {
	q, err := s.QosList(ctx)
	if err != nil || len(q.ClusterJobs) == 0 {
		return q, err
	}
	var nodes []string
	var uses [][]wire.QosUse
	if qu, ok := s.targets.(qosUser); ok {
		nodes, uses = qu.QosUse()
	}
	q.Jobs = nodeLimits(q.Jobs, q.ClusterJobs, node, nodes, uses)
	return q, nil
}

// nodeLimits returns the limits node applies: the per-target limits jobs,
// with each cluster-wide limit of cluster split among the live nodes
// (nodes, with what their jobs asked of them in uses) by qos.SplitLimit,
// node's share merged in (the smaller rate and burst where a job has
// both). A node missing from nodes (its first heartbeat) counts as live
// and asking nothing. Each share's burst is the cluster burst's
// proportional part, at least 1. Sorted by job.
func nodeLimits(jobs, cluster []wire.QosJob, node string, nodes []string, uses [][]wire.QosUse) []wire.QosJob {
	me := slices.Index(nodes, node)
	if me < 0 {
		uses = append(slices.Clone(uses), nil) // node's, asking nothing
		me = len(uses) - 1
	}
	out := slices.Clone(jobs)
	for _, cj := range cluster {
		demand := make([]float64, len(uses))
		for i, us := range uses {
			for _, u := range us {
				if u.Job == cj.Job {
					demand[i] = float64(u.Demand)
				}
			}
		}
		share := qos.SplitLimit(float64(cj.Rate), demand)[me]
		lim := wire.QosJob{Job: cj.Job, Rate: max(uint64(share), 1), Burst: max(uint64(float64(cj.Burst)*share/float64(cj.Rate)), 1)}
		if i := slices.IndexFunc(out, func(j wire.QosJob) bool { return j.Job == cj.Job }); i >= 0 {
			out[i].Rate, out[i].Burst = min(out[i].Rate, lim.Rate), min(out[i].Burst, lim.Burst)
		} else {
			out = append(out, lim)
		}
	}
	slices.SortFunc(out, func(a, b wire.QosJob) int { return strings.Compare(a.Job, b.Job) })
	return out
}

func (s *Service) registerQos(srv *wire.Server) {
	handle(srv, wire.OpQosSet, func(ctx context.Context, m *wire.QosSetReq) (wire.Message, error) {
		return &wire.Empty{}, s.QosSet(ctx, m)
	})
	handle(srv, wire.OpQosList, func(ctx context.Context, _ *wire.Empty) (wire.Message, error) {
		r, err := s.QosList(ctx)
		return &r, err
	})
}
