package server

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/cluster"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/kvcache"
	"github.com/sluice-fs/sluice/internal/meta"
	"github.com/sluice-fs/sluice/internal/metrics"
	"github.com/sluice-fs/sluice/internal/pause"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/target"
	"github.com/sluice-fs/sluice/internal/wire"
)

// MetaOptions configure `sluice meta`, a metadata service of a cluster.
type MetaOptions struct {
	// Listen is the TCP address to serve on.
	Listen string
	// DataDir holds the embedded engine (meta/) when Etcd is empty.
	DataDir string
	// Etcd are the endpoints of the etcd cluster that stores the metadata;
	// several metadata services share it. Empty: the embedded engine in
	// DataDir (then only one metadata service can run).
	Etcd []string
	// EtcdPrefix is the key prefix in etcd (default "sluice/").
	EtcdPrefix string
	// HeartbeatTimeout is how long a storage node may go without a
	// heartbeat before its targets leave their chains (default 5s).
	HeartbeatTimeout time.Duration
	// ReplaceAfter is how long a storage node may stay dead before its
	// replicas are rebuilt on other nodes (cluster.Options.ReplaceAfter;
	// 0: never).
	ReplaceAfter time.Duration
	// HTTP is the admin address; empty: none.
	HTTP   string
	Logger *slog.Logger
	// Ready is called with the served address once clients can connect.
	Ready func(addr string)
	// MetaSync and MetaSyncWindow: as in Options, for the embedded engine
	// (etcd syncs every commit).
	MetaSync       kv.SyncMode
	MetaSyncWindow time.Duration
	// InlineMax is meta.Options.InlineMax: the most bytes of a file kept
	// in the metadata (0: the default, negative: none).
	InlineMax int
	// QosOff and QosInService are the metadata service's
	// (meta.Options): namespace requests unscheduled, or how many are
	// served at once (0: the default).
	QosOff       bool
	QosInService int
	// QosCPUReserve is Options.QosCPUReserve.
	QosCPUReserve int
	// Rebalance runs the rebalancer in this process when its Every is
	// positive (run it on one metadata service of a cluster).
	Rebalance RebalanceOptions
	// NoAudit is meta.Options.NoAudit: the audit trail off (--audit=false).
	NoAudit bool
}

// RunMeta serves a metadata service until ctx is done.
func RunMeta(ctx context.Context, opts MetaOptions) (err error) {
	if opts.Listen == "" {
		return errs.New(errs.Invalid, "meta: a listen address is required")
	}
	if len(opts.Etcd) == 0 && opts.DataDir == "" {
		return errs.New(errs.Invalid, "meta: give --etcd endpoints or a --data-dir for the embedded engine")
	}
	if err := validateMetaSync(opts.MetaSync, opts.MetaSyncWindow); err != nil {
		return err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var closers cleanup
	defer closers.run(&err)
	var db kv.DB
	if len(opts.Etcd) > 0 {
		db, err = kv.OpenEtcd(ctx, kv.EtcdOptions{Endpoints: opts.Etcd, Prefix: opts.EtcdPrefix, Logger: log})
		if err != nil {
			return fmt.Errorf("meta: open etcd at %v: %w", opts.Etcd, err)
		}
	} else {
		unlock, err := lockDir("meta", opts.DataDir)
		if err != nil {
			return err
		}
		closers.add(func() error { unlock(); return nil })
		if db, err = kv.OpenPebble(filepath.Join(opts.DataDir, "meta"), &kv.PebbleOptions{Logger: log, Sync: opts.MetaSync, SyncWindow: opts.MetaSyncWindow}); err != nil {
			return fmt.Errorf("meta: open metadata store: %w", err)
		}
	}
	closers.add(db.Close)

	rt, err := cluster.New(ctx, cluster.Options{DB: db, Logger: log, HeartbeatTimeout: opts.HeartbeatTimeout, ReplaceAfter: opts.ReplaceAfter})
	if err != nil {
		return err
	}
	closers.add(rt.Close)
	ms, err := meta.New(ctx, meta.Options{DB: db, Targets: rt, Logger: log, InlineMax: opts.InlineMax, NoAudit: opts.NoAudit, SharedDB: len(opts.Etcd) > 0, QosOff: opts.QosOff, QosInService: opts.QosInService})
	if err != nil {
		return fmt.Errorf("meta: start metadata service: %w", err)
	}
	closers.add(ms.Close)

	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("meta: listen on %s: %w", opts.Listen, err)
	}
	srv := &wire.Server{Logger: log}
	reserve := cpuReserve(srv, opts.QosCPUReserve, opts.QosOff)
	reserve.limitedBy(ms.QosLimited)
	ms.Register(srv)
	mx := metrics.New()
	mx.AddReserve(reserve.reserve())
	mx.AddPools(rt)
	mx.AddStage(ms)
	mx.AddMoverRecord(moverRecord(ms))
	mx.AddMetaQos(ms.QosStats)
	mx.AddEngine(db)
	mx.Instrument(srv)
	ln = mx.Listener(ln)
	serveErr := closers.serve(srv, ln)

	closers.goRun(ctx, func(ctx context.Context) { rt.Run(ctx) }, func(ctx context.Context) { ms.Run(ctx) })

	if opts.HTTP != "" {
		a, err := startAdmin(opts.HTTP, log, mx)
		if err != nil {
			return err
		}
		closers.add(a.Close)
	}
	addr := advertised(ln.Addr().(*net.TCPAddr))
	engine := "pebble " + opts.DataDir + ", sync " + metaSyncString(opts.MetaSync, opts.MetaSyncWindow)
	if len(opts.Etcd) > 0 {
		engine = "etcd " + strings.Join(opts.Etcd, ",")
	}
	if opts.Rebalance.Every > 0 {
		if err := startRebalancer(ctx, addr, opts.Rebalance, log, mx, &closers); err != nil {
			return fmt.Errorf("meta: %w", err)
		}
	}
	log.Info("sluice metadata service serving", "addr", addr, "engine", engine, "fsid", ms.FSID())
	if opts.Ready != nil {
		opts.Ready(addr)
	}
	return waitServe(ctx, log, srv, serveErr)
}

// waitServe waits for ctx or a server failure, then shuts srv down.
func waitServe(ctx context.Context, log *slog.Logger, srv *wire.Server, serveErr <-chan error) error {
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if !errors.Is(err, wire.ErrServerClosed) {
			return err
		}
	}
	log.Info("sluice shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	return nil
}

// TargetOptions configure `sluice target`, a storage node.
type TargetOptions struct {
	// DataDir holds the node's name (NODE) and its targets (targets/<id>).
	DataDir string
	// Listen is the TCP address to serve on; Advertise the address the
	// metadata service gives out for it (default: the listener's).
	Listen, Advertise string
	// Meta are the metadata services' addresses.
	Meta []string
	// Targets is the number of targets to make on the first start
	// (default 4).
	Targets int
	// Node names the node (default: the name in DataDir/NODE, or a new
	// random one stored there).
	Node string
	// Fence: see target.AgentOptions (default 2s).
	Fence time.Duration
	// HTTP is the admin address; empty: none.
	HTTP   string
	Logger *slog.Logger
	Ready  func(addr string)
	// QosOff and QosInService are the targets' (target.Options).
	QosOff       bool
	QosInService int
	// QosCPUReserve is Options.QosCPUReserve.
	QosCPUReserve int
	// Precreate is each target's number of empty chunk files made ahead
	// of need (target.Options.Precreate; 0: none).
	Precreate int
	// FenceGrace is how long a removed chunk's fence stays
	// (target.Options.FenceGrace; 0: for good).
	FenceGrace time.Duration
	// NoDirectReads is Options.NoDirectReads.
	NoDirectReads bool
}

// RunTarget serves a storage node until ctx is done: it registers with the
// metadata service (getting IDs for new targets), serves its targets and
// heart-beats.
func RunTarget(ctx context.Context, opts TargetOptions) (err error) {
	if opts.DataDir == "" || opts.Listen == "" || len(opts.Meta) == 0 {
		return errs.New(errs.Invalid, "target: --data-dir, --listen and --meta are required")
	}
	if opts.Targets == 0 {
		opts.Targets = 4
	}
	if opts.Targets < 1 || opts.Targets > placement.MaxStripeCount {
		return errs.New(errs.Invalid, "target: --targets must be between 1 and %d", placement.MaxStripeCount)
	}
	if opts.Fence == 0 {
		opts.Fence = 2 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	unlock, err := lockDir("target", opts.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	node, err := nodeName(opts.DataDir, opts.Node)
	if err != nil {
		return err
	}
	var closers cleanup
	defer closers.run(&err)

	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("target: listen on %s: %w", opts.Listen, err)
	}
	addr := opts.Advertise
	if addr == "" {
		addr = advertised(ln.Addr().(*net.TCPAddr))
	}
	rm := target.NewRemoteMeta(opts.Meta)
	closers.add(rm.Close)

	have, err := targetIDs(opts.DataDir, 0)
	if err != nil {
		ln.Close()
		return err
	}
	want := 0
	if len(have) == 0 {
		want = opts.Targets
	}
	var reg wire.RegisterResp
	for attempt := 0; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		reg, err = rm.Register(rctx, &wire.RegisterReq{Node: node, Addr: addr, Have: have, Want: uint32(want)})
		cancel()
		if err == nil || errs.CodeOf(err) != errs.Unavailable || ctx.Err() != nil {
			break
		}
		if attempt == 0 {
			log.Warn("target: waiting for a metadata service", "meta", opts.Meta, "err", err)
		}
		_ = pause.For(ctx, 500*time.Millisecond) // ctx's end stops the loop after the next try
	}
	if err != nil {
		ln.Close()
		return fmt.Errorf("target: register node %s: %w", node, err)
	}
	ids := append(have, reg.IDs...)
	targets, err := target.OpenDir(opts.DataDir, ids, target.Options{Logger: log, QosOff: opts.QosOff, QosInService: opts.QosInService, Precreate: opts.Precreate, FenceGrace: opts.FenceGrace})
	if err != nil {
		ln.Close()
		return fmt.Errorf("target: open targets: %w", err)
	}
	closers.add(targets.Close)

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
	mx := metrics.New()
	mx.AddTargets(targets)
	mx.AddReserve(reserve.reserve())
	mx.Instrument(srv)
	ln = mx.Listener(ln)
	serveErr := closers.serve(srv, ln)

	agent := target.NewAgent(targets, fsStamper{rm, opts.DataDir}, target.AgentOptions{Node: node, Addr: addr, Incarnation: incarnation, Fence: opts.Fence, Logger: log})
	if err := agent.Beat(ctx); err != nil {
		log.Warn("target: first heartbeat failed; retrying", "err", err)
	}
	closers.goRun(ctx, agent.Run)

	if opts.HTTP != "" {
		a, err := startAdmin(opts.HTTP, log, mx)
		if err != nil {
			return err
		}
		closers.add(a.Close)
	}
	log.Info("sluice storage node serving", "addr", addr, "node", node, "targets", ids, "meta", opts.Meta)
	if opts.Ready != nil {
		opts.Ready(addr)
	}
	return waitServe(ctx, log, srv, serveErr)
}

// nodeName returns the node's name: given, stored in dir/NODE, or new.
func nodeName(dir, given string) (string, error) {
	path := filepath.Join(dir, "NODE")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		stored := strings.TrimSpace(string(b))
		if given != "" && given != stored {
			return "", errs.New(errs.Invalid, "target: data dir %s belongs to node %q, not %q", dir, stored, given)
		}
		return stored, nil
	case !os.IsNotExist(err):
		return "", fmt.Errorf("target: read node name: %w", err)
	}
	name := given
	if name == "" {
		var r [4]byte
		if _, err := crand.Read(r[:]); err != nil {
			return "", err
		}
		host, _ := os.Hostname()
		name = host + "-" + hex.EncodeToString(r[:])
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(name+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("target: store node name: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("target: store node name: %w", err)
	}
	return name, nil
}

// cleanup runs the functions added to it in reverse order, keeping the
// first error: the teardown of a role, built up as it starts.
type cleanup []func() error

func (c *cleanup) add(f func() error) { *c = append(*c, f) }

// run runs the functions, newest first, and stores the first error in
// *err unless it already holds one.
func (c cleanup) run(err *error) {
	for i := len(c) - 1; i >= 0; i-- {
		if cerr := c[i](); cerr != nil && *err == nil {
			*err = cerr
		}
	}
}

// serve runs srv on ln in the background; the returned channel gets
// Serve's result. Its teardown (close srv, wait for Serve) goes into c.
func (c *cleanup) serve(srv *wire.Server, ln net.Listener) <-chan error {
	serveErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { serveErr <- srv.Serve(ln) })
	c.add(func() error { srv.Close(); wg.Wait(); return nil })
	return serveErr
}

// goRun runs fns in the background with a context of their own, which the
// teardown cancels before waiting for them.
func (c *cleanup) goRun(ctx context.Context, fns ...func(context.Context)) {
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(func() { fn(runCtx) })
	}
	c.add(func() error { stop(); wg.Wait(); return nil })
}

// MigrateToEtcd copies the metadata of a stopped single-node system (the
// embedded engine in dataDir/meta) into etcd under prefix, which must hold
// nothing yet. Afterwards `sluice meta --etcd` serves the same file system
// and `sluice target --data-dir dataDir --node local` serves its targets.
// It returns the number of keys copied.
func MigrateToEtcd(ctx context.Context, dataDir string, etcd []string, prefix string, log *slog.Logger) (int, error) {
	if dataDir == "" || len(etcd) == 0 {
		return 0, errs.New(errs.Invalid, "migrate: --data-dir and --etcd are required")
	}
	if _, err := os.Stat(filepath.Join(dataDir, "meta")); err != nil {
		return 0, errs.New(errs.NotFound, "migrate: %s has no metadata store (meta/): %v", dataDir, err)
	}
	unlock, err := lockDir("migrate", dataDir)
	if err != nil {
		return 0, err
	}
	defer unlock()
	src, err := kv.OpenPebble(filepath.Join(dataDir, "meta"), &kv.PebbleOptions{Logger: log})
	if err != nil {
		return 0, fmt.Errorf("migrate: open metadata store: %w", err)
	}
	defer src.Close()
	dst, err := kv.OpenEtcd(ctx, kv.EtcdOptions{Endpoints: etcd, Prefix: prefix, Logger: log})
	if err != nil {
		return 0, fmt.Errorf("migrate: open etcd at %v: %w", etcd, err)
	}
	defer dst.Close()
	n, err := kv.Copy(ctx, dst, src, 100)
	if err != nil {
		return n, fmt.Errorf("migrate: %w (empty the etcd prefix %q before trying again)", err, prefix)
	}
	return n, nil
}

// startDirect serves direct reads on DATA/direct.sock unless off. A
// socket that cannot be made (a path too long for a Unix socket, say) is
// logged: clients then read through the network as without it.
func startDirect(targets *target.Service, dataDir string, off bool, log *slog.Logger, closers *cleanup) {
	if off {
		return
	}
	stop, err := targets.ServeDirect(filepath.Join(dataDir, "direct.sock"))
	if err != nil {
		log.Warn("running without direct reads", "err", err)
		return
	}
	closers.add(func() error { stop(); return nil })
}
