// Package server assembles the roles one sluice process runs. Run is
// `sluice serve`: the metadata service on the embedded pebble engine and
// several storage targets on local disk, all behind one wire listener.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/cluster"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/kvcache"
	"github.com/sluice-fs/sluice/internal/meta"
	"github.com/sluice-fs/sluice/internal/metrics"
	"github.com/sluice-fs/sluice/internal/mover"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/relayout"
	"github.com/sluice-fs/sluice/internal/target"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Options configure a single-node system.
type Options struct {
	// DataDir holds everything: meta/ (the pebble engine) and
	// targets/<id>/ (one chunk store per target).
	DataDir string
	// Listen is the TCP address to serve on (host:port; port 0 picks one).
	Listen string
	// Advertise is the address clients are told to reach the targets at;
	// default: the listener's address (127.0.0.1 if it listens on all).
	Advertise string
	// Targets is the number of storage targets created on first start
	// (default 4). A restart opens the targets the data dir has.
	Targets int
	// HTTP is the admin address (/healthz, /metrics, the dashboard,
	// /debug/pprof); empty: none.
	HTTP string
	// HTTPOptional makes a failure to bind HTTP a warning, not an error
	// (for a default address that another process may hold).
	HTTPOptional bool
	// AdminReady is called with the admin port's address once it serves.
	AdminReady func(addr string)
	// Metrics, if set, is called with the process's metrics before the
	// admin port serves, to add collectors (a mount's staging area).
	Metrics func(*metrics.Metrics)
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Ready is called with the served address once clients can connect.
	Ready func(addr string)
	// NoLocalCalls makes clients in this process (--mount, --s3) use
	// loopback TCP like any other client instead of calling the servers
	// directly.
	NoLocalCalls bool
	// Local, if set, is called with the local storage targets before
	// Ready (a mount in the same process reads their chunks directly).
	Local func(*target.Service)
	// MetaSync says when metadata commits become durable against a crash
	// of the machine (kv.SyncGroup, the default, or kv.SyncAlways);
	// MetaSyncWindow bounds the wait under SyncGroup (0: 5 ms). See
	// docs/adr/0006-metadata-durability-policy.md.
	MetaSync       kv.SyncMode
	MetaSyncWindow time.Duration
	// InlineMax is meta.Options.InlineMax: the most bytes of a file kept
	// in the metadata (0: the default, negative: none).
	InlineMax int
	// NoAudit is meta.Options.NoAudit: the audit trail off (--audit=false).
	NoAudit bool
	// MoverEvery, if positive, runs the object tier's mover (package
	// mover) in this process, a pass every MoverEvery.
	MoverEvery time.Duration
	// MoverLimits are that mover's caps (Releases 0: no cap; `sluice
	// serve` passes mover.DefaultReleases unless told otherwise).
	MoverLimits mover.Limits
	// MoverParallel is how many archives and releases it runs at once
	// (default 4).
	MoverParallel int
	// Rebalance runs the rebalancer (package relayout) in this process
	// when its Every is positive.
	Rebalance RebalanceOptions
	// QosOff turns the QoS scheduling of the targets and of the metadata
	// service off (both still count by class); QosInService is the
	// targets' bound on requests in service (target.Options),
	// MetaQosInService the metadata service's (meta.Options).
	QosOff           bool
	QosInService     int
	MetaQosInService int
	// QosCPUReserve is the number of CPUs (Go Ps) kept free of
	// checkpoint and background requests while interactive ones come
	// (qos.Reserve); 0: none.
	QosCPUReserve int
	// Precreate is each target's number of empty chunk files made ahead
	// of need (target.Options.Precreate; 0: none).
	Precreate int
	// FenceGrace is how long a removed chunk's fence stays
	// (target.Options.FenceGrace; 0: for good).
	FenceGrace time.Duration
	// NoDirectReads: do not hand the unreplicated chunks' files to
	// clients on this machine (DATA/direct.sock; ADR 0025).
	NoDirectReads bool
}

// Validate checks the options.
func (o *Options) Validate() error {
	if o.DataDir == "" {
		return errs.New(errs.Invalid, "serve: a data directory is required")
	}
	if o.Listen == "" {
		return errs.New(errs.Invalid, "serve: a listen address is required")
	}
	if o.Targets < 0 || o.Targets > placement.MaxStripeCount {
		return errs.New(errs.Invalid, "serve: --targets must be between 1 and %d", placement.MaxStripeCount)
	}
	return validateMetaSync(o.MetaSync, o.MetaSyncWindow)
}

func validateMetaSync(m kv.SyncMode, window time.Duration) error {
	if m != kv.SyncGroup && m != kv.SyncAlways {
		return errs.New(errs.Invalid, "--meta-sync must be group or always")
	}
	if window < 0 || window > kv.MaxSyncWindow {
		return errs.New(errs.Invalid, "--meta-sync-window must be between 0 and %v", kv.MaxSyncWindow)
	}
	return nil
}

// metaSyncString describes the metadata sync policy for the log.
func metaSyncString(m kv.SyncMode, window time.Duration) string {
	if m == kv.SyncAlways {
		return m.String()
	}
	if window == 0 {
		window = kv.DefaultSyncWindow
	}
	return fmt.Sprintf("%v (window %v)", m, window)
}

// Run serves until ctx is done, then shuts down cleanly.
func Run(ctx context.Context, opts Options) (err error) {
	if err := opts.Validate(); err != nil {
		return err
	}
	if opts.Targets == 0 {
		opts.Targets = 4
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	unlock, err := lockDir("serve", opts.DataDir)
	if err != nil {
		return err
	}
	defer unlock()

	var closers cleanup
	defer closers.run(&err)

	db, err := kv.OpenPebble(filepath.Join(opts.DataDir, "meta"), &kv.PebbleOptions{Logger: log, Sync: opts.MetaSync, SyncWindow: opts.MetaSyncWindow})
	if err != nil {
		return fmt.Errorf("serve: open metadata store: %w", err)
	}
	closers.add(db.Close)

	ids, err := targetIDs(opts.DataDir, opts.Targets)
	if err != nil {
		return err
	}
	targets, err := target.OpenDir(opts.DataDir, ids, target.Options{Logger: log, QosOff: opts.QosOff, QosInService: opts.QosInService, Precreate: opts.Precreate, FenceGrace: opts.FenceGrace})
	if err != nil {
		return fmt.Errorf("serve: open targets: %w", err)
	}
	closers.add(targets.Close)

	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("serve: listen on %s: %w", opts.Listen, err)
	}
	addr := opts.Advertise
	if addr == "" {
		addr = advertised(ln.Addr().(*net.TCPAddr))
	}

	// Serve the targets at once: registering them with the metadata
	// service below contacts them. Metadata ops are registered later; no
	// client connects before Ready.
	srv := &wire.Server{Logger: log}
	reserve := cpuReserve(srv, opts.QosCPUReserve, opts.QosOff)
	reserve.limitedBy(targets.QosLimited)
	targets.Register(srv)
	startDirect(targets, opts.DataDir, opts.NoDirectReads, log, &closers)
	kvs, err := kvcache.Open(opts.DataDir, ids)
	if err != nil {
		return fmt.Errorf("open the KV-cache stores: %w", err)
	}
	closers.add(kvs.Close)
	kvs.Register(srv)
	// Metrics decorate the listener (connections), the targets (a
	// collector) and, once all are registered, the handlers.
	mx := metrics.New()
	mx.AddTargets(targets)
	mx.AddReserve(reserve.reserve())
	mx.AddEngine(db)
	ln = mx.Listener(ln)
	serveErr := closers.serve(srv, ln)
	if !opts.NoLocalCalls {
		// The mount and the gateway of this process call the servers
		// directly (see wire.ServeLocal).
		srv.ServeLocal(addr)
	}

	rt, err := cluster.New(ctx, cluster.Options{DB: db, Logger: log})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	closers.add(rt.Close)
	for _, id := range ids {
		if err := rt.RegisterTarget(ctx, id, addr); err != nil {
			return fmt.Errorf("serve: register target %d: %w", id, err)
		}
	}
	// The local targets heart-beat like a storage node's, straight into
	// the cluster manager.
	local := &localMeta{rt: rt}
	agent := target.NewAgent(targets, fsStamper{local, opts.DataDir}, target.AgentOptions{Node: cluster.LocalNode, Addr: addr, Incarnation: incarnation, Logger: log})
	ms, err := meta.New(ctx, meta.Options{DB: db, Targets: rt, Logger: log, InlineMax: opts.InlineMax, NoAudit: opts.NoAudit, QosOff: opts.QosOff, QosInService: opts.MetaQosInService})
	if err != nil {
		return fmt.Errorf("serve: start metadata service: %w", err)
	}
	reserve.limitedBy(ms.QosLimited)
	local.ms = ms
	if err := agent.Beat(ctx); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	closers.add(ms.Close)
	ms.Register(srv)
	mx.AddPools(rt)
	mx.AddStage(ms)
	mx.AddMoverRecord(moverRecord(ms))
	mx.AddMetaQos(ms.QosStats)
	mx.AddRestores(ms)
	mx.AddCuts(ms)
	mx.Instrument(srv)

	closers.goRun(ctx, func(ctx context.Context) { rt.Run(ctx) }, agent.Run, func(ctx context.Context) { ms.Run(ctx) })
	if opts.MoverEvery > 0 {
		mc, err := client.New(ctx, client.Options{Server: addr, NoAtime: true})
		if err != nil {
			return fmt.Errorf("serve: tier mover: %w", err)
		}
		closers.add(mc.Close)
		mv := mover.New(mc, mover.Options{Logger: log, Limits: opts.MoverLimits, Parallel: opts.MoverParallel})
		mx.AddMover(mv)
		closers.goRun(ctx, func(ctx context.Context) { mv.Run(ctx, opts.MoverEvery) })
	}
	if opts.Rebalance.Every > 0 {
		if err := startRebalancer(ctx, addr, opts.Rebalance, log, mx, &closers); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}

	if opts.Metrics != nil {
		opts.Metrics(mx)
	}
	if opts.HTTP != "" {
		a, err := startAdmin(opts.HTTP, log, mx)
		switch {
		case err != nil && opts.HTTPOptional:
			log.Warn("running without an admin port", "err", err)
		case err != nil:
			return err
		default:
			closers.add(a.Close)
			log.Info("admin port", "addr", a.Addr())
			if opts.AdminReady != nil {
				opts.AdminReady(a.Addr())
			}
		}
	}
	log.Info("sluice serving", "addr", addr, "data_dir", opts.DataDir, "targets", len(ids), "fsid", ms.FSID(), "meta_sync", metaSyncString(opts.MetaSync, opts.MetaSyncWindow))
	if opts.Local != nil {
		opts.Local(targets)
	}
	if opts.Ready != nil {
		opts.Ready(addr)
	}
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if !errors.Is(err, wire.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	log.Info("sluice shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	return nil
}

// incarnation tells this process's heartbeats from an earlier one's.
var incarnation = uint64(time.Now().UnixNano())

// targetIDs returns the targets the data dir has, or 1..n for a new one.
func targetIDs(dataDir string, n int) ([]placement.TargetID, error) {
	ents, err := os.ReadDir(filepath.Join(dataDir, "targets"))
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("serve: list targets: %w", err)
	}
	var ids []placement.TargetID
	for _, e := range ents {
		if id, err := strconv.ParseUint(e.Name(), 10, 32); err == nil && e.IsDir() {
			ids = append(ids, placement.TargetID(id))
		}
	}
	if len(ids) == 0 {
		for i := 1; i <= n; i++ {
			ids = append(ids, placement.TargetID(i))
		}
	}
	slices.Sort(ids)
	return ids, nil
}

func advertised(a *net.TCPAddr) string {
	if a.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port))
	}
	return a.String()
}

// lockDir creates the data dir if needed and takes an exclusive lock on
// it, so that two servers never share one. role names the command in
// errors.
func lockDir(role, dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: create data dir: %w", role, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: lock data dir: %w", role, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, errs.New(errs.Busy, "%s: data dir %s is in use by another sluice process", role, dir)
	}
	return func() { f.Close() }, nil
}

// localMeta is the metadata service of this process as the local targets'
// agent sees it.
type localMeta struct {
	rt *cluster.Manager
	ms *meta.Service
}

func (l *localMeta) Register(ctx context.Context, req *wire.RegisterReq) (wire.RegisterResp, error) {
	return l.rt.Register(ctx, req)
}

func (l *localMeta) Heartbeat(ctx context.Context, req *wire.HeartbeatReq) (wire.HeartbeatResp, error) {
	r, err := l.rt.Heartbeat(ctx, req)
	if err != nil {
		return r, err
	}
	q, err := l.ms.QosFor(ctx, req.Node)
	r.Qos = &q
	return r, err
}

func (l *localMeta) Cluster(ctx context.Context) (*wire.ClusterInfo, error) {
	info, err := l.ms.Cluster(ctx)
	return &info, err
}

func (l *localMeta) SyncDone(ctx context.Context, req *wire.SyncDoneReq) error {
	return l.rt.SyncDone(ctx, req)
}

// RebalanceOptions configure a rebalancer run by a server process: a
// pass every Every (0: none), moving chunks until the targets' fill is
// within Band (a fraction; 0: 0.1) of the mean, each migration's first
// copy reading at most Rate bytes per second (0: no cap).
type RebalanceOptions struct {
	Every time.Duration
	Band  float64
	Rate  int64
}

// startRebalancer runs a rebalancer over a client of the metadata service
// at addr, in the background QoS class, with its metrics in mx.
func startRebalancer(ctx context.Context, addr string, o RebalanceOptions, log *slog.Logger, mx *metrics.Metrics, closers *cleanup) error {
	rc, err := client.New(ctx, client.Options{Server: addr, Class: "background", NoAtime: true})
	if err != nil {
		return fmt.Errorf("rebalancer: %w", err)
	}
	closers.add(rc.Close)
	band := o.Band
	if band <= 0 {
		band = 0.1
	}
	rb := relayout.New(rc, relayout.Options{Band: band, Logger: log, Migrate: client.MigrateOptions{Rate: o.Rate}})
	mx.AddRebalancer(rb)
	closers.goRun(ctx, func(ctx context.Context) { rb.Run(ctx, o.Every) })
	return nil
}
