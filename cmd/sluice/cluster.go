package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
	"github.com/sluice-fs/sluice/internal/server"
)

func roleLogger(verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// splitAddrs splits a comma-separated address list.
func splitAddrs(s string) []string {
	var out []string
	for a := range strings.SplitSeq(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func newMeta() *cobra.Command {
	var o server.MetaOptions
	var etcd string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "meta",
		Short: "Run a metadata service of a multi-node cluster",
		Long: "meta runs a metadata service. With --etcd it stores the namespace and the\n" +
			"cluster state in etcd, and several meta processes can share it (clients use any\n" +
			"of them); without, it uses the embedded engine in --data-dir (one service only).\n" +
			"Storage nodes (sluice target) register with it. It prints \"sluice: serving on ADDR\"\n" +
			"when ready.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Logger = roleLogger(verbose)
			o.Etcd = splitAddrs(etcd)
			o.Ready = func(addr string) { fmt.Printf("sluice: serving on %s\n", addr) }
			return server.RunMeta(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", DefaultAddr, "TCP address to serve on (host:port)")
	f.StringVar(&o.DataDir, "data-dir", "", "directory of the embedded metadata engine (without --etcd)")
	f.StringVar(&etcd, "etcd", "", "comma-separated etcd client URLs (e.g. http://127.0.0.1:2379)")
	f.StringVar(&o.EtcdPrefix, "etcd-prefix", "sluice/", "key prefix of this file system in etcd")
	f.DurationVar(&o.HeartbeatTimeout, "heartbeat-timeout", 5*time.Second, "a storage node silent this long leaves its chains")
	f.DurationVar(&o.ReplaceAfter, "replace-after", 10*time.Minute, "a storage node dead this long has its replicas rebuilt on other nodes (0: never)")
	f.StringVar(&o.HTTP, "http", "", "admin HTTP address for /healthz, /metrics and /debug/pprof (empty: none)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
	metaSyncFlags(cmd, &o.MetaSync, &o.MetaSyncWindow)
	inlineMaxFlag(cmd, &o.InlineMax)
	f.BoolVar(&o.QosOff, "qos-off", false, "serve namespace requests unscheduled, as they come (no QoS; for comparison)")
	f.IntVar(&o.QosInService, "qos-in-service", 0, "namespace requests served at once under QoS (default 8)")
	qosReserveFlag(cmd, &o.QosCPUReserve)
	rebalanceFlags(cmd, &o.Rebalance)
	auditFlag(cmd, &o.NoAudit)
	cmd.AddCommand(newMetaMigrate())
	return cmd
}

func newMetaMigrate() *cobra.Command {
	var dataDir, etcd, prefix string
	cmd := &cobra.Command{
		Use:   "migrate --data-dir DIR --etcd URLS",
		Short: "Copy a stopped sluice serve's metadata into etcd",
		Long: "migrate copies the metadata of a stopped single-node system (the embedded engine in\n" +
			"DIR/meta) into etcd under --etcd-prefix, which must be empty. Then run\n" +
			"`sluice meta --etcd URLS` and, for the data, `sluice target --data-dir DIR --node local`:\n" +
			"the same file system, now with its metadata in etcd.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := server.MigrateToEtcd(cmd.Context(), dataDir, splitAddrs(etcd), prefix, roleLogger(false))
			if err != nil {
				return err
			}
			fmt.Printf("sluice: copied %d metadata keys from %s to etcd %s (prefix %q)\n", n, dataDir, etcd, prefix)
			fmt.Printf("next: sluice meta --etcd %s --etcd-prefix %s; sluice target --data-dir %s --node local --meta ADDR\n", etcd, prefix, dataDir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "./sluice-data", "data dir of the stopped sluice serve")
	f.StringVar(&etcd, "etcd", "", "comma-separated etcd client URLs")
	f.StringVar(&prefix, "etcd-prefix", "sluice/", "key prefix of the file system in etcd (must be empty)")
	return cmd
}

func newTarget(g *globals) *cobra.Command {
	var o server.TargetOptions
	var metaAddrs string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "target",
		Short: "Run a storage node of a multi-node cluster",
		Long: "target runs a storage node: it serves the chunk stores of its targets\n" +
			"(subdirectories of --data-dir, one per disk in production), registers with the\n" +
			"metadata services named by --meta and heart-beats to them. On the first start it\n" +
			"makes --targets targets. It prints \"sluice: serving on ADDR\" when ready.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Logger = roleLogger(verbose)
			o.Meta = splitAddrs(metaAddrs)
			o.Ready = func(addr string) { fmt.Printf("sluice: serving on %s\n", addr) }
			return server.RunTarget(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DataDir, "data-dir", "./sluice-target", "directory for the node's targets")
	f.StringVar(&o.Listen, "listen", "127.0.0.1:9410", "TCP address to serve on (host:port)")
	f.StringVar(&o.Advertise, "advertise", "", "address clients use to reach this node (default: the listen address)")
	f.StringVar(&metaAddrs, "meta", DefaultAddr, "comma-separated metadata service addresses")
	f.IntVar(&o.Targets, "targets", 4, "number of targets to create on first start")
	f.StringVar(&o.Node, "node", "", "node name (default: stored in the data dir, or a new random one)")
	f.BoolVar(&o.QosOff, "qos-off", false, "serve chunk reads and writes unscheduled, as they come (no QoS; for comparison)")
	f.IntVar(&o.QosInService, "qos-in-service", 0, "chunk reads and writes this node serves at once under QoS (default 8)")
	qosReserveFlag(cmd, &o.QosCPUReserve)
	precreateFlag(cmd, &o.Precreate)
	fenceGraceFlag(cmd, &o.FenceGrace)
	noDirectReadsFlag(cmd, &o.NoDirectReads)
	f.DurationVar(&o.Fence, "fence", 2*time.Second, "refuse replicated-chain requests after this long without reaching a metadata service (keep it below the meta's --heartbeat-timeout)")
	f.StringVar(&o.HTTP, "http", "", "admin HTTP address for /healthz, /metrics and /debug/pprof (empty: none)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
	cmd.AddCommand(newTargetDrain(g), newTargetRm(g))
	return cmd
}

func newTargetDrain(g *globals) *cobra.Command {
	var a cli.DrainArgs
	var rate string
	cmd := &cobra.Command{
		Use:   "drain ID",
		Short: "Move every file's data off a target (it then takes no new data)",
		Long: "Marks target ID draining, so that new files and chains avoid it, and migrates\n" +
			"every file with bytes on it to a layout of the same shape on other targets (in\n" +
			"its directory's pool; fewer stripes if fewer targets can take them), one file at a\n" +
			"time while the files stay in use (sluice migrate, ADR 0020). Run it again to\n" +
			"retry files that failed; --stop clears the mark.",
		Args: exactArgs(1),
		PreRun: func(_ *cobra.Command, args []string) {
			id, err := strconv.ParseUint(args[0], 10, 32)
			if err == nil {
				a.Target = uint32(id)
			}
		},
	}
	cmd.RunE = g.runBackground(func(ctx context.Context, e *cli.Env) error {
		if a.Target == 0 {
			return fmt.Errorf("%w: target ID must be a positive number (sluice status lists them)", errUsage)
		}
		if rate != "" {
			var err error
			if a.Opts.Rate, err = cli.ParseSize(rate); err != nil {
				return fmt.Errorf("%w: --rate: %v", errUsage, err)
			}
		}
		return e.Drain(ctx, a)
	})
	f := cmd.Flags()
	f.BoolVar(&a.Stop, "stop", false, "clear the draining mark (new data may go to the target again)")
	f.StringVar(&rate, "rate", "", "read at most this many bytes per second per file, e.g. 200M (default: no cap)")
	f.BoolVarP(&a.Quiet, "quiet", "q", false, "print only the total")
	return cmd
}

func newTargetRm(g *globals) *cobra.Command {
	var id uint64
	var idErr error
	cmd := &cobra.Command{
		Use:   "rm ID",
		Short: "Remove a drained target that holds no data",
		Long: "Removes target ID from the file system once sluice target drain has moved\n" +
			"everything off it: it is no longer listed, placed on or put in chains. It refuses\n" +
			"a target that is not draining, still holds chunks (as its node last reported) or\n" +
			"a chain replica, or is in a pool. Its node may keep the directory, unused.",
		Args:   exactArgs(1),
		PreRun: func(_ *cobra.Command, args []string) { id, idErr = strconv.ParseUint(args[0], 10, 32) },
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		if idErr != nil || id == 0 {
			return fmt.Errorf("%w: target ID must be a positive number (sluice status lists them)", errUsage)
		}
		if err := e.Client.RemoveTarget(ctx, uint32(id)); err != nil {
			return err
		}
		fmt.Fprintf(e.Stdout, "target %d removed\n", id)
		return nil
	})
	return cmd
}
