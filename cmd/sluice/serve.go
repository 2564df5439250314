package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/cli"
	"github.com/sluice-fs/sluice/internal/fusefs"
	"github.com/sluice-fs/sluice/internal/metrics"
	"github.com/sluice-fs/sluice/internal/mover"
	"github.com/sluice-fs/sluice/internal/server"
	"github.com/sluice-fs/sluice/internal/target"
)

func newServe() *cobra.Command {
	var o server.Options
	var verbose bool
	var mountpoint string
	var passthrough, writebackCache bool
	var stagingDir string
	var stagingReserve, stagingMax int64
	var mountClient client.Options
	var watchTimeout time.Duration
	var s3f s3Flags
	var moverArchiveRate, moverMaxArchive string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a complete single-node Sluice: metadata service and storage targets",
		Long: "serve runs the metadata service (on the embedded pebble engine) and several\n" +
			"storage targets (each a subdirectory of the data dir) in one process, behind\n" +
			"one TCP listener. It prints \"sluice: serving on ADDR\" when ready and shuts\n" +
			"down cleanly on SIGINT or SIGTERM. A restart on the same data dir finds everything.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			o.Ready = func(addr string) { fmt.Printf("sluice: serving on %s\n", addr) }
			o.AdminReady = func(addr string) { fmt.Printf("sluice: admin on %s\n", addr) }
			// The default admin port may be taken by another sluice serve:
			// then run without one. An explicit --http must work.
			o.HTTPOptional = !cmd.Flags().Changed("http")
			if moverArchiveRate != "" {
				n, err := cli.ParseSize(moverArchiveRate)
				if err != nil || n <= 0 {
					return fmt.Errorf("%w: serve: --mover-archive-rate %q: want bytes per second, e.g. 200M", errUsage, moverArchiveRate)
				}
				o.MoverLimits.ArchiveRate = n
			}
			if moverMaxArchive != "" {
				n, err := cli.ParseSize(moverMaxArchive)
				if err != nil || n < 0 {
					return fmt.Errorf("%w: serve: --mover-max-archive %q: want a size, e.g. 10G", errUsage, moverMaxArchive)
				}
				o.MoverLimits.ArchiveBytes = n
			}
			if o.MoverLimits.ReleaseRate < 0 {
				return fmt.Errorf("%w: serve: --mover-release-rate must not be negative", errUsage)
			}
			if o.MoverLimits.Releases < 0 || o.MoverParallel < 1 {
				return fmt.Errorf("%w: serve: --mover-max-releases must not be negative, --mover-parallel must be positive", errUsage)
			}

			if passthrough && writebackCache {
				return fmt.Errorf("%w: serve: --passthrough and --writeback-cache cannot be combined", errUsage)
			}
			run := server.Run
			if mountpoint != "" {
				run = func(ctx context.Context, o server.Options) error {
					mountClient.StagingDir, mountClient.StagingReserve, mountClient.StagingMax = stagingDir, stagingReserve, stagingMax
					mo := fusefs.Options{Mountpoint: mountpoint, Client: mountClient, WatchTimeout: watchTimeout, WritebackCache: writebackCache}
					return serveAndMount(ctx, o, mo, passthrough)
				}
			}
			return serveWithS3(cmd.Context(), o, &s3f, run)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DataDir, "data-dir", "./sluice-data", "directory for metadata and chunks")
	f.StringVar(&o.Listen, "listen", DefaultAddr, "TCP address to serve on (host:port)")
	f.StringVar(&o.Advertise, "advertise", "", "address clients use to reach this server (default: the listen address)")
	f.IntVar(&o.Targets, "targets", 4, "number of storage targets to create on first start")
	f.StringVar(&o.HTTP, "http", "127.0.0.1:9401", "admin HTTP address for /healthz, /metrics and /debug/pprof (empty: none)")
	f.StringVar(&mountpoint, "mount", "", "also mount the file system here with FUSE")
	f.StringVar(&stagingDir, "staging-dir", "", "with --mount: stage files under a directory with the absorb policy here (docs/checkpoint.md)")
	f.Var(sizeValue{&stagingReserve}, "staging-reserve", "with --mount: "+stagingReserveHelp)
	f.Var(sizeValue{&stagingMax}, "staging-max", "with --mount: "+stagingMaxHelp)
	f.BoolVar(&passthrough, "passthrough", false, "with --mount: let the kernel read files held whole by a local target straight from disk (FUSE passthrough; checksums checked at open, not per read)")
	layoutLeaseFlag(cmd, &mountClient.LayoutLease, "with --mount: ")
	f.BoolVar(&mountClient.NoAtime, "noatime", false, "with --mount: leave files' access times alone on reads through the mount (default: relatime, as sluice mount)")
	f.BoolVar(&writebackCache, "writeback-cache", false, "with --mount: let the kernel buffer writes, as sluice mount --writeback-cache (faster small writes; other mounts see size changes late; not with --passthrough)")
	f.DurationVar(&watchTimeout, "watch-timeout", 0, "with --mount: how long the kernel caches names and attributes while the mount follows the change feed, as sluice mount --watch-timeout (default 30s; negative: do not follow it)")
	f.BoolVar(&o.NoLocalCalls, "loopback-tcp", false, "make --mount and --s3 reach the servers over loopback TCP instead of in-process calls (for comparison)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
	qosFlags(cmd, &mountClient.Job, &mountClient.Class)
	f.BoolVar(&o.QosOff, "qos-off", false, "serve chunk reads and writes and namespace requests unscheduled, as they come (no QoS; for comparison)")
	f.IntVar(&o.QosInService, "qos-in-service", 0, "chunk reads and writes a target serves at once under QoS (default 8)")
	f.IntVar(&o.MetaQosInService, "meta-qos-in-service", 0, "namespace requests the metadata service serves at once under QoS (default 8)")
	qosReserveFlag(cmd, &o.QosCPUReserve)
	precreateFlag(cmd, &o.Precreate)
	fenceGraceFlag(cmd, &o.FenceGrace)
	noDirectReadsFlag(cmd, &o.NoDirectReads)
	metaSyncFlags(cmd, &o.MetaSync, &o.MetaSyncWindow)
	inlineMaxFlag(cmd, &o.InlineMax)
	auditFlag(cmd, &o.NoAudit)
	f.DurationVar(&o.MoverEvery, "mover-every", 0, "run the object tier's mover in this process, a pass every this long (0: off; sluice tier policy, docs/tier.md)")
	f.StringVar(&moverArchiveRate, "mover-archive-rate", "", "with --mover-every: bytes per second archives start at, at most (e.g. 200M; default no cap)")
	f.Float64Var(&o.MoverLimits.ReleaseRate, "mover-release-rate", 0, "with --mover-every: files per second releases start at, at most (default no cap)")
	f.IntVar(&o.MoverLimits.Releases, "mover-max-releases", mover.DefaultReleases, "with --mover-every: files one pass releases at most (0: no cap)")
	f.StringVar(&moverMaxArchive, "mover-max-archive", "", "with --mover-every: bytes one pass archives at most (e.g. 10G; default no cap)")
	f.IntVar(&o.MoverParallel, "mover-parallel", 4, "with --mover-every: archives and releases at once")
	rebalanceFlags(cmd, &o.Rebalance)
	s3f.register(cmd, "s3", "")
	return cmd
}

// serveAndMount runs the servers and a FUSE mount of them with mo (its
// server, logger and readiness filled in here; with passthrough, reads of
// files held whole by a local target pass through). On shutdown the mount
// goes first, so that open files are written back while the servers still
// run.
func serveAndMount(ctx context.Context, o server.Options, mo fusefs.Options, passthrough bool) error {
	srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSrv()
	mctx, stopMount := context.WithCancel(ctx)
	defer stopMount()
	mountErr := make(chan error, 1)
	var local fusefs.LocalData
	var cur atomic.Pointer[client.Client] // the mount's, for its staging metrics
	o.Metrics = func(mx *metrics.Metrics) { mx.AddAbsorb(absorbSource(&cur)) }
	mo.Started = cur.Store
	if passthrough {
		o.Local = func(t *target.Service) { local = t }
	}
	ready := o.Ready
	o.Ready = func(addr string) {
		if ready != nil {
			ready(addr)
		}
		go func() {
			mo.Server, mo.Logger, mo.Passthrough = addr, o.Logger, local
			mo.Ready = func() { fmt.Printf("sluice: mounted on %s\n", mo.Mountpoint) }
			mountErr <- fusefs.Run(mctx, mo)
			stopSrv()
		}()
	}
	err := server.Run(srvCtx, o)
	stopMount()
	select {
	case merr := <-mountErr:
		if err == nil {
			err = merr
		}
	case <-time.After(time.Minute):
	}
	return err
}
