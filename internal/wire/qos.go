package wire

// Quality of service (issue 18, docs/qos.md, ADR 0015): the identity chunk
// requests carry, and the settings `sluice qos` keeps in the metadata
// service and the heartbeat reply delivers to the targets.

import "github.com/sluice-fs/sluice/internal/qos"

// QosTag is who a chunk request is for: a job name and a priority class.
// Class is 0 when the sender gave none (an older client: the target counts
// it as training), otherwise 1 + the qos.Class (interactive 1, training 2,
// checkpoint 3, background 4). Appended to ChunkWriteReq and ChunkReadReq
// in version 2.4: a target decodes it only when present.
type QosTag struct {
	Job   string
	Class uint8
}

func (m *QosTag) Encode(e *Encoder) { e.String(m.Job); e.U8(m.Class) }
func (m *QosTag) Decode(d *Decoder) { m.Job = d.String(); m.Class = d.U8() }

// QosJob is one job's token bucket: Rate bytes per second, up to Burst.
type QosJob struct {
	Job         string
	Rate, Burst uint64
}

func (m *QosJob) Encode(e *Encoder) { e.String(m.Job); e.U64(m.Rate); e.U64(m.Burst) }
func (m *QosJob) Decode(d *Decoder) { m.Job = d.String(); m.Rate = d.U64(); m.Burst = d.U64() }

// QosUse is what a node's job asked of it lately: Demand bytes per
// second (its served rate plus the bytes it has waiting).
type QosUse struct {
	Job    string
	Demand uint64
}

func encodeQosUse(e *Encoder, us []QosUse) {
	e.Uvarint(uint64(len(us)))
	for _, u := range us {
		e.String(u.Job)
		e.U64(u.Demand)
	}
}

func decodeQosUse(d *Decoder) []QosUse {
	n := d.Count(9)
	if n == 0 {
		return nil
	}
	us := make([]QosUse, n)
	for i := range us {
		us[i].Job = d.String()
		us[i].Demand = d.U64()
	}
	return us
}

// QosConfig is the QoS settings: the weights of the classes, indexed by
// qos.Class (0: the default weight; fewer entries than classes leave the
// rest at their default), the jobs limited on the targets (bytes per
// second and bytes), sorted by name, and the jobs limited on the metadata
// service (MetaJobs: requests per second and requests; appended later,
// absent from an older service's reply), and the jobs limited in the
// whole cluster (ClusterJobs: bytes per second and bytes in all; appended
// in version 2.5). In a heartbeat's reply Jobs already holds the node's
// share of each cluster-wide limit (the smaller of it and the job's
// per-target limit).
type QosConfig struct {
	Weights     []uint32
	Jobs        []QosJob
	MetaJobs    []QosJob
	ClusterJobs []QosJob
}

func (m *QosConfig) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Weights)))
	for _, w := range m.Weights {
		e.U32(w)
	}
	encodeJobs(e, m.Jobs)
	encodeJobs(e, m.MetaJobs)
	encodeJobs(e, m.ClusterJobs)
}

// Scheduler returns the configuration of a scheduler from the settings:
// the classes' weights and the jobs' limits on the targets (in bytes), or
// with meta those on the metadata service (in requests).
func (m *QosConfig) Scheduler(meta bool) qos.Config {
	var cfg qos.Config
	for i, w := range m.Weights {
		if i < len(cfg.Weights) {
			cfg.Weights[i] = float64(w)
		}
	}
	jobs := m.Jobs
	if meta {
		jobs = m.MetaJobs
	}
	if len(jobs) > 0 {
		cfg.Jobs = make(map[string]qos.Limit, len(jobs))
		for _, j := range jobs {
			cfg.Jobs[j.Job] = qos.Limit{Rate: float64(j.Rate), Burst: float64(j.Burst)}
		}
	}
	return cfg
}

func encodeJobs(e *Encoder, jobs []QosJob) {
	e.Uvarint(uint64(len(jobs)))
	for i := range jobs {
		jobs[i].Encode(e)
	}
}

func decodeJobs(d *Decoder) []QosJob {
	n := d.Count(17)
	if n == 0 {
		return nil
	}
	jobs := make([]QosJob, n)
	for i := range jobs {
		jobs[i].Decode(d)
	}
	return jobs
}

func (m *QosConfig) Decode(d *Decoder) {
	m.Weights, m.Jobs, m.MetaJobs, m.ClusterJobs = nil, nil, nil, nil
	if n := d.Count(4); n > 0 {
		m.Weights = make([]uint32, n)
		for i := range m.Weights {
			m.Weights[i] = d.U32()
		}
	}
	m.Jobs = decodeJobs(d)
	if d.More() {
		m.MetaJobs = decodeJobs(d)
	}
	if d.More() {
		m.ClusterJobs = decodeJobs(d)
	}
}

// Kinds of QoS change (QosSetReq.Kind).
const (
	QosSetWeight     uint8 = 1 + iota // class Class gets weight Weight (0: the default)
	QosSetJob                         // job Job gets the limit Rate, Burst (bytes/s, bytes) on each target
	QosRemoveJob                      // job Job is no longer limited (on the targets nor on the metadata service)
	QosSetJobMeta                     // job Job gets the limit Rate, Burst (requests/s, requests) on the metadata service
	QosSetJobCluster                  // job Job gets the limit Rate, Burst (bytes/s, bytes) in the whole cluster
)

// QosSetReq changes one QoS setting (OpQosSet). Class is a qos.Class (not
// offset as in QosTag).
type QosSetReq struct {
	Kind   uint8
	Class  uint8
	Weight uint32
	Job    string
	Rate   uint64
	Burst  uint64
}

func (m *QosSetReq) Encode(e *Encoder) {
	e.U8(m.Kind)
	e.U8(m.Class)
	e.U32(m.Weight)
	e.String(m.Job)
	e.U64(m.Rate)
	e.U64(m.Burst)
}

func (m *QosSetReq) Decode(d *Decoder) {
	m.Kind = d.U8()
	m.Class = d.U8()
	m.Weight = d.U32()
	m.Job = d.String()
	m.Rate = d.U64()
	m.Burst = d.U64()
}
