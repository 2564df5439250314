// Package metrics exports a Sluice server's numbers to Prometheus: per
// operation counts and latency histograms (like Lustre's md_stats), errors
// by class, per target bytes and operations, checksum failures, fill
// levels, and client connections. Everything is a decorator around the
// components (a wire.HandlerFunc wrapper, a net.Listener wrapper, a
// collector reading target.Service counters): no component imports this
// package.
//
// A Metrics has its own prometheus.Registry, never the global one, so
// that several servers in one process (tests) do not collide.
package metrics

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/target"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Metrics holds a server's metrics. It is safe for concurrent use.
type Metrics struct {
	reg      *prometheus.Registry
	opTime   *prometheus.HistogramVec
	opWait   *prometheus.HistogramVec
	opErrors *prometheus.CounterVec
	conns    prometheus.Gauge
	accepted prometheus.Counter

	mu struct {
		sync.Mutex
		recent []ErrorEvent // ring of the latest errors, oldest first
	}
}

// ErrorEvent is one failed request, for the dashboard's list of recent
// errors.
type ErrorEvent struct {
	Time  time.Time `json:"time"`
	Op    string    `json:"op"`
	Class string    `json:"class"`
	Msg   string    `json:"msg"`
}

const maxRecent = 50

// New returns Metrics with the Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.opTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_op_duration_seconds",
		Help: "Time to serve a wire operation, by op (metadata ops and chunk ops); the count is the number of operations.",
		// 10 µs .. ~5 s.
		Buckets: prometheus.ExponentialBuckets(10e-6, 2.5, 15),
	}, []string{"op", "kind"})
	m.opWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_op_queue_wait_seconds",
		Help:    "Time a wire operation waited between being received and being served (like Lustre's req_waittime), by op.",
		Buckets: prometheus.ExponentialBuckets(1e-6, 2.5, 15),
	}, []string{"op", "kind"})
	m.opErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_op_errors_total",
		Help: "Operations that failed, by op and error class.",
	}, []string{"op", "class"})
	m.conns = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_client_connections",
		Help: "Open client connections to the wire port (a client holds several).",
	})
	m.accepted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_client_connections_accepted_total",
		Help: "Client connections accepted on the wire port.",
	})
	m.reg.MustRegister(m.opTime, m.opWait, m.opErrors, m.conns, m.accepted,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry, to register more collectors or gather.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves /metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// RecentErrors returns the latest failed requests, newest last.
func (m *Metrics) RecentErrors() []ErrorEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]ErrorEvent(nil), m.mu.recent...)
}

// Wrap returns h instrumented: its time, and its error class if it fails,
// are recorded under op's name.
func (m *Metrics) Wrap(op wire.Op, h wire.HandlerFunc) wire.HandlerFunc {
	name, kind := OpName(op)
	obs := m.opTime.WithLabelValues(name, kind)
	wait := m.opWait.WithLabelValues(name, kind)
	return func(ctx context.Context, req *wire.Request) (wire.Response, error) {
		start := time.Now()
		if !req.Received.IsZero() {
			wait.Observe(start.Sub(req.Received).Seconds())
		}
		resp, err := h(ctx, req)
		obs.Observe(time.Since(start).Seconds())
		if err != nil {
			m.recordError(name, err)
		}
		return resp, err
	}
}

func (m *Metrics) recordError(op string, err error) {
	class := errs.CodeOf(err).String()
	m.opErrors.WithLabelValues(op, class).Inc()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.mu.recent) == maxRecent {
		m.mu.recent = append(m.mu.recent[:0], m.mu.recent[1:]...)
	}
	m.mu.recent = append(m.mu.recent, ErrorEvent{Time: time.Now(), Op: op, Class: class, Msg: err.Error()})
}

// Instrument wraps every handler registered on srv with Wrap. Call it once
// after every component has registered its handlers.
func (m *Metrics) Instrument(srv *wire.Server) {
	for op := range opNames {
		if h := srv.Handler(op); h != nil {
			srv.Handle(op, m.Wrap(op, h))
		}
	}
}

var opNames = map[wire.Op]string{
	wire.OpCluster: "cluster", wire.OpStatfs: "statfs", wire.OpResolve: "resolve", wire.OpLookup: "lookup",
	wire.OpGetAttr: "getattr", wire.OpSetAttr: "setattr", wire.OpCreate: "create", wire.OpMkdir: "mkdir",
	wire.OpSymlink: "symlink", wire.OpReadlink: "readlink", wire.OpUnlink: "unlink", wire.OpRmdir: "rmdir",
	wire.OpRename: "rename", wire.OpLink: "link", wire.OpReadDir: "readdir", wire.OpGetXattr: "getxattr",
	wire.OpSetXattr: "setxattr", wire.OpListXattr: "listxattr", wire.OpRemoveXattr: "removexattr",
	wire.OpGetLayout: "getlayout", wire.OpSetLayout: "setlayout", wire.OpCommitWrite: "commit_write",
	wire.OpRegister: "register_target", wire.OpMetaSync: "meta_sync",
	wire.OpWriteInline: "write_inline", wire.OpWriteInlineAttr: "write_inline_attr", wire.OpCommitWriteAttr: "commit_write_attr", wire.OpReadInline: "read_inline", wire.OpSetChunks: "set_chunks", wire.OpResolveRead: "resolve_read", wire.OpOpenIno: "open_ino", wire.OpPutFile: "put_file",
	wire.OpPoolList: "pool_list", wire.OpPoolChange: "pool_change", wire.OpSetPool: "set_pool",
	wire.OpChunkWrite: "chunk_write", wire.OpChunkRead: "chunk_read", wire.OpChunkSync: "chunk_sync",
	wire.OpChunkTruncate: "chunk_truncate", wire.OpChunkPunch: "chunk_punch", wire.OpChunkMap: "chunk_map", wire.OpChunkRemove: "chunk_remove", wire.OpTargetStat: "target_stat",
	// Online migration (ADR 0020).
	wire.OpMigrate: "migrate", wire.OpChunkFence: "chunk_fence", wire.OpTargetDrain: "target_drain", wire.OpTargetRemove: "target_remove",
	// Checkpoint absorb (ADR 0013) and the KV-cache store.
	wire.OpAbsorbGet: "absorb_get", wire.OpAbsorbSet: "absorb_set", wire.OpStagedAdd: "staged_add",
	wire.OpStagedDone: "staged_done", wire.OpStagedList: "staged_list",
	wire.OpTierList: "tier_list", wire.OpHsmGet: "hsm_get", wire.OpHsmUpdate: "hsm_update",
	wire.OpHsmClaim: "hsm_claim", wire.OpHsmRestored: "hsm_restored", wire.OpTierImport: "tier_import", wire.OpTierForget: "tier_forget", wire.OpTierImportDry: "tier_import_dry", wire.OpHsmStates: "hsm_states", wire.OpTouchAtime: "touch_atime", wire.OpStageReport: "stage_report", wire.OpWatch: "watch",
	wire.OpKVCreate: "kv_create", wire.OpKVStat: "kv_stat", wire.OpKVPut: "kv_put", wire.OpKVGet: "kv_get",
	wire.OpKVExists: "kv_exists", wire.OpKVDelete: "kv_delete", wire.OpKVList: "kv_list",
	// Cut generations (truncate against other clients' writes).
	wire.OpCutBegin: "cut_begin", wire.OpCutGen: "cut_gen", wire.OpCutEnd: "cut_end",
}

// OpName returns op's metric label and its kind ("meta" or "chunk").
func OpName(op wire.Op) (name, kind string) {
	kind = "meta"
	switch {
	case op < wire.OpChunkWrite:
	case op == wire.OpCommitWriteAttr, op == wire.OpTierImport, op == wire.OpHsmStates, op == wire.OpTouchAtime, op == wire.OpTierForget, op == wire.OpTierImportDry:
	default:
		kind = "chunk"
	}
	if n, ok := opNames[op]; ok {
		return n, kind
	}
	return "op_" + strconv.Itoa(int(op)), kind
}

// Listener returns l counting its connections in
// sluice_client_connections. TCP connections keep their concrete methods
// (the wire server writes replies with writev through them).
func (m *Metrics) Listener(l net.Listener) net.Listener { return &listener{Listener: l, m: m} }

type listener struct {
	net.Listener
	m *Metrics
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.m.accepted.Inc()
	l.m.conns.Inc()
	if tc, ok := c.(*net.TCPConn); ok {
		return &tcpConn{TCPConn: tc, m: l.m}, nil
	}
	return &conn{Conn: c, m: l.m}, nil
}

// tcpConn embeds *net.TCPConn so that all its methods, writev included,
// stay promoted; only Close is decorated.
type tcpConn struct {
	*net.TCPConn
	m    *Metrics
	once sync.Once
}

func (c *tcpConn) Close() error {
	c.once.Do(c.m.conns.Dec)
	return c.TCPConn.Close()
}

type conn struct {
	net.Conn
	m    *Metrics
	once sync.Once
}

func (c *conn) Close() error {
	c.once.Do(c.m.conns.Dec)
	return c.Conn.Close()
}

// AddTargets exports the counters, fill levels and checksum failures of
// svc's targets, read at each scrape.
func (m *Metrics) AddTargets(svc *target.Service) {
	m.reg.MustRegister(&targetCollector{svc: svc}, qosCollector{targetQos, svc.QosStats})
}

// AddMetaQos exports the counters of the metadata service's QoS gate as
// sluice_meta_qos_* (meta.Service.QosStats).
func (m *Metrics) AddMetaQos(stats func() qos.GateStats) {
	m.reg.MustRegister(qosCollector{metaQos, stats})
}

// AddReserve exports a CPU reserve's counters (qos.Reserve):
// sluice_qos_cpu_reserve_slots, sluice_qos_cpu_reserve_held_total and
// sluice_qos_cpu_reserve_waited_total. A nil r (no reserve) exports none.
func (m *Metrics) AddReserve(r *qos.Reserve) {
	if r == nil {
		return
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_qos_cpu_reserve_slots", Help: "CPUs (Go Ps) that checkpoint and background requests may use while interactive ones come.",
		}, func() float64 { return float64(r.Stats().Slots) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_qos_cpu_reserve_held_total", Help: "Checkpoint and background requests that took a CPU slot because interactive ones came.",
		}, func() float64 { return float64(r.Stats().Held) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_qos_cpu_reserve_waited_total", Help: "Of those, the ones that waited for a slot before their body was read.",
		}, func() float64 { return float64(r.Stats().Waited) }),
	)
}

// CacheStatser is a component with a cache that counts its hits and
// misses (the metadata engine's read cache: kv.DB from OpenPebble).
type CacheStatser interface {
	CacheStats() (hits, misses uint64)
}

// AddCache exports a cache's hits and misses as
// sluice_cache_{hits,misses}_total{cache=name}; the hit rate is
// hits / (hits + misses).
func (m *Metrics) AddCache(name string, c CacheStatser) {
	labels := prometheus.Labels{"cache": name}
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_cache_hits_total", Help: "Lookups a cache answered.", ConstLabels: labels,
		}, func() float64 { h, _ := c.CacheStats(); return float64(h) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_cache_misses_total", Help: "Lookups a cache could not answer.", ConstLabels: labels,
		}, func() float64 { _, ms := c.CacheStats(); return float64(ms) }),
	)
}

// AddEngine exports what a metadata engine counts: its read cache
// (AddCache, as "metadata_read") and its group commit (AddCommits), where
// it has them (etcd has neither: it commits each transaction itself).
func (m *Metrics) AddEngine(db any) {
	if cs, ok := db.(CacheStatser); ok {
		m.AddCache("metadata_read", cs)
	}
	if cs, ok := db.(CommitStatser); ok {
		m.AddCommits(cs)
	}
}

// CommitStatser is a metadata engine that commits transactions in groups
// (kv.DB from OpenPebble or OpenMemory).
type CommitStatser interface {
	CommitStats() kv.CommitStats
}

// AddCommits exports a metadata engine's group-commit counters as
// sluice_kv_*_total: transactions per group is commits / groups, and
// groups per sync shows how many commits one fdatasync covered.
func (m *Metrics) AddCommits(c CommitStatser) {
	for _, k := range []struct {
		name, help string
		v          func(kv.CommitStats) uint64
	}{
		{"sluice_kv_commit_groups_total", "Groups of transactions the metadata engine committed, one batch each.",
			func(s kv.CommitStats) uint64 { return s.Groups }},
		{"sluice_kv_commits_total", "Transactions the metadata engine committed.",
			func(s kv.CommitStats) uint64 { return s.Commits }},
		{"sluice_kv_commit_leader_groups_total", "Groups a lone writer processed on its own goroutine, without a hand-off (also groups whose transactions were all rejected).",
			func(s kv.CommitStats) uint64 { return s.Leads }},
		{"sluice_kv_conflicts_total", "Transactions rejected at commit because what they read had changed (they are retried).",
			func(s kv.CommitStats) uint64 { return s.Conflicts }},
		{"sluice_kv_exact_validations_total", "Transactions whose reads were checked one by one at commit.",
			func(s kv.CommitStats) uint64 { return s.Exact }},
		{"sluice_kv_syncs_total", "Syncs of the metadata engine's commit log made apart from its commits (--meta-sync group: at the end of a window, and for fsync and S3 PUTs; 0 with --meta-sync always).",
			func(s kv.CommitStats) uint64 { return s.Syncs }},
	} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: k.name, Help: k.help},
			func() float64 { return float64(k.v(c.CommitStats())) }))
	}
}

// PoolLister lists the pools of targets (cluster.Manager).
type PoolLister interface {
	Pools(ctx context.Context) ([]wire.PoolInfo, error)
}

var (
	descPoolCap  = prometheus.NewDesc("sluice_pool_capacity_bytes", "Size of the file systems of the pool's targets.", []string{"pool"}, nil)
	descPoolUsed = prometheus.NewDesc("sluice_pool_used_bytes", "Bytes used on the file systems of the pool's targets.", []string{"pool"}, nil)
	descPoolTgts = prometheus.NewDesc("sluice_pool_targets", "Targets in the pool.", []string{"pool"}, nil)
)

// AddPools exports each pool's capacity, use and number of targets as
// sluice_pool_{capacity_bytes,used_bytes,targets}{pool=name}; fill is
// used / capacity.
func (m *Metrics) AddPools(pl PoolLister) { m.reg.MustRegister(poolCollector{pl}) }

type poolCollector struct{ pl PoolLister }

func (pc poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPoolCap
	ch <- descPoolUsed
	ch <- descPoolTgts
}

func (pc poolCollector) Collect(ch chan<- prometheus.Metric) {
	ps, err := pc.pl.Pools(context.Background()) // a cached snapshot: no I/O
	if err != nil {
		return
	}
	for _, p := range ps {
		ch <- prometheus.MustNewConstMetric(descPoolCap, prometheus.GaugeValue, float64(p.Capacity), p.Name)
		ch <- prometheus.MustNewConstMetric(descPoolUsed, prometheus.GaugeValue, float64(p.Used), p.Name)
		ch <- prometheus.MustNewConstMetric(descPoolTgts, prometheus.GaugeValue, float64(len(p.Targets)), p.Name)
	}
}

var (
	tLabels  = []string{"target"}
	descRB   = prometheus.NewDesc("sluice_target_read_bytes_total", "Bytes read from the target.", tLabels, nil)
	descRO   = prometheus.NewDesc("sluice_target_read_ops_total", "Chunk reads served by the target.", tLabels, nil)
	descWB   = prometheus.NewDesc("sluice_target_write_bytes_total", "Bytes written to the target.", tLabels, nil)
	descWO   = prometheus.NewDesc("sluice_target_write_ops_total", "Chunk writes served by the target.", tLabels, nil)
	descSO   = prometheus.NewDesc("sluice_target_sync_ops_total", "Chunk syncs served by the target.", tLabels, nil)
	descRmO  = prometheus.NewDesc("sluice_target_remove_ops_total", "Chunk removals served by the target.", tLabels, nil)
	descErr  = prometheus.NewDesc("sluice_target_errors_total", "Requests to the target that failed.", tLabels, nil)
	descLate = prometheus.NewDesc("sluice_target_late_refused_total", "Chunk writes, truncates, punches and fences refused because they arrived after their sender's deadline (held on the network or in a queue; ADR 0031).", tLabels, nil)
	descGarb = prometheus.NewDesc("sluice_target_garbled_writes_total", "Chunk writes refused because their data did not match the CRC32C the sender computed (garbled in transit).", tLabels, nil)
	descSent = prometheus.NewDesc("sluice_target_read_sent_unread_total", "Chunk reads whose data the target sent from the page cache without reading it (sendfile; the client checks it against the stored checksums).", tLabels, nil)
	descCsum = prometheus.NewDesc("sluice_target_checksum_failures_total", "Blocks whose CRC32C did not match on read.", tLabels, nil)
	descFen  = prometheus.NewDesc("sluice_target_fences", "Chunk fences the target holds (frozen chunks, and removed ones within --chunk-fence-grace).", tLabels, nil)
	descFenX = prometheus.NewDesc("sluice_target_fences_expired_total", "Fences of removed chunks the target dropped after --chunk-fence-grace.", tLabels, nil)
	descCap  = prometheus.NewDesc("sluice_target_capacity_bytes", "Size of the file system the target is on.", tLabels, nil)
	descFree = prometheus.NewDesc("sluice_target_free_bytes", "Free bytes on the file system the target is on.", tLabels, nil)
	descUsed = prometheus.NewDesc("sluice_target_used_bytes", "Logical bytes in the target's chunks.", tLabels, nil)
	descChk  = prometheus.NewDesc("sluice_target_chunks", "Chunks on the target.", tLabels, nil)
	descUp   = prometheus.NewDesc("sluice_target_up", "1 if the target's store answers a stat, else 0.", tLabels, nil)
)

type targetCollector struct{ svc *target.Service }

func (tc *targetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRB, descRO, descWB, descWO, descSO, descRmO, descErr, descGarb, descLate, descSent, descCsum, descFen, descFenX, descCap, descFree, descUsed, descChk, descUp} {
		ch <- d
	}
}

func (tc *targetCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, id string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), id)
	}
	gauge := func(d *prometheus.Desc, v float64, id string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, id)
	}
	for _, t := range tc.svc.Targets() {
		id := strconv.FormatUint(uint64(t), 10)
		if s, ok := tc.svc.Stats(t); ok {
			counter(descRB, s.ReadBytes, id)
			counter(descRO, s.ReadOps, id)
			counter(descWB, s.WriteBytes, id)
			counter(descWO, s.WriteOps, id)
			counter(descSO, s.SyncOps, id)
			counter(descRmO, s.RemoveOps, id)
			counter(descErr, s.Errors, id)
			counter(descGarb, s.Garbled, id)
			counter(descLate, s.LateOps, id)
			counter(descSent, s.SentUnread, id)
		}
		st, ok := tc.svc.Store(t)
		if !ok {
			continue
		}
		counter(descCsum, st.Corruptions(), id)
		if held, expired, ok := tc.svc.Fences(t); ok {
			gauge(descFen, float64(held), id)
			counter(descFenX, expired, id)
		}
		capacity, used, free, chunks, err := st.Stat()
		if err != nil {
			gauge(descUp, 0, id)
			continue
		}
		gauge(descUp, 1, id)
		gauge(descCap, float64(capacity), id)
		gauge(descFree, float64(free), id)
		gauge(descUsed, float64(used), id)
		gauge(descChk, float64(chunks), id)
	}
}

// qosDescs are the metrics of one QoS gate (docs/qos.md): the targets'
// (sluice_qos_*, cost in bytes) or the metadata service's
// (sluice_meta_qos_*, cost in requests).
type qosDescs struct {
	queued, served, cost, wait, jobQueued, jobCost, limited *prometheus.Desc
}

func newQosDescs(prefix, what, costName, costHelp string) qosDescs {
	return qosDescs{
		queued:    prometheus.NewDesc(prefix+"_queued", what+" waiting in the QoS scheduler, by class.", []string{"class"}, nil),
		served:    prometheus.NewDesc(prefix+"_served_total", what+" the QoS scheduler let through, by class.", []string{"class"}, nil),
		cost:      prometheus.NewDesc(prefix+"_served_"+costName+"_total", costHelp+" let through, by class.", []string{"class"}, nil),
		wait:      prometheus.NewDesc(prefix+"_wait_seconds", "Time "+strings.ToLower(what[:1])+what[1:]+" waited in the QoS scheduler, by class.", []string{"class"}, nil),
		jobQueued: prometheus.NewDesc(prefix+"_job_queued", what+" waiting, by job (at most 32 jobs; the rest as _other).", []string{"job"}, nil),
		jobCost:   prometheus.NewDesc(prefix+"_job_served_"+costName+"_total", costHelp+" let through, by job (at most 32 jobs; the rest as _other).", []string{"job"}, nil),
		limited:   prometheus.NewDesc(prefix+"_limited_jobs", "Jobs with a rate limit in the QoS settings applied.", nil, nil),
	}
}

var (
	targetQos = newQosDescs("sluice_qos", "Chunk reads and writes", "bytes", "Bytes of the chunk reads and writes")
	metaQos   = newQosDescs("sluice_meta_qos", "Namespace requests to the metadata service", "requests", "Namespace requests")
)

// qosCollector exports a QoS gate's counters.
type qosCollector struct {
	d     qosDescs
	stats func() qos.GateStats
}

func (qc qosCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{qc.d.queued, qc.d.served, qc.d.cost, qc.d.wait, qc.d.jobQueued, qc.d.jobCost, qc.d.limited} {
		ch <- d
	}
}

func (qc qosCollector) Collect(ch chan<- prometheus.Metric) {
	st := qc.stats()
	ch <- prometheus.MustNewConstMetric(qc.d.limited, prometheus.GaugeValue, float64(st.LimitedJobs))
	for name, c := range st.Classes {
		ch <- prometheus.MustNewConstMetric(qc.d.queued, prometheus.GaugeValue, float64(c.Queued), name)
		ch <- prometheus.MustNewConstMetric(qc.d.served, prometheus.CounterValue, float64(c.Served), name)
		ch <- prometheus.MustNewConstMetric(qc.d.cost, prometheus.CounterValue, float64(c.ServedBytes), name)
		buckets := make(map[float64]uint64, len(qos.WaitBuckets))
		var cum uint64
		for i, le := range qos.WaitBuckets {
			cum += c.WaitCounts[i]
			buckets[le] = cum
		}
		cum += c.WaitCounts[len(qos.WaitBuckets)]
		ch <- prometheus.MustNewConstHistogram(qc.d.wait, cum, c.WaitSum, buckets, name)
	}
	for _, j := range st.Jobs {
		ch <- prometheus.MustNewConstMetric(qc.d.jobQueued, prometheus.GaugeValue, float64(j.Queued), j.Job)
		ch <- prometheus.MustNewConstMetric(qc.d.jobCost, prometheus.CounterValue, float64(j.ServedBytes), j.Job)
	}
}
