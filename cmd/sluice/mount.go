package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fusefs"
	"github.com/sluice-fs/sluice/internal/metrics"
	"github.com/sluice-fs/sluice/internal/server"
)

// absorbSource returns the staging counts of the mount's client in cur
// (none before the mount connected and after it ended), for
// metrics.AddAbsorb.
func absorbSource(cur *atomic.Pointer[client.Client]) func() (client.StagingStats, bool) {
	return func() (client.StagingStats, bool) {
		c := cur.Load()
		if c == nil {
			return client.StagingStats{}, false
		}
		return c.Staging()
	}
}

// readyFDEnv names the descriptor on which a background mount process
// tells its parent "ok" once mounted, or why it failed.
const readyFDEnv = "SLUICE_MOUNT_READY_FD"

func newMount(g *globals) *cobra.Command {
	var o fusefs.Options
	var background, allowOther, verbose bool
	var logFile, httpAddr string
	cmd := &cobra.Command{
		Use:   "mount [flags] MOUNTPOINT",
		Short: "Mount the file system on a directory with FUSE",
		Long: "mount serves the file system at MOUNTPOINT through FUSE until it is unmounted\n" +
			"(sluice umount MOUNTPOINT) or the process gets SIGINT or SIGTERM, which unmount\n" +
			"cleanly. It runs in the foreground unless -d is given. As root it mounts\n" +
			"directly; other users need fusermount3 (Debian package fuse3).",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Mountpoint = args[0]
			o.Server = g.addr()
			if cmd.Flags().Changed("allow-other") {
				o.AllowOther = &allowOther
			}
			readyFD := os.Getenv(readyFDEnv)
			if background && readyFD == "" {
				return mountInBackground(logFile)
			}
			logOut := io.Writer(os.Stderr)
			if logFile != "" {
				f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
				if err != nil {
					return err
				}
				defer f.Close()
				logOut = f
			}
			level := slog.LevelInfo
			if verbose || o.Debug {
				level = slog.LevelDebug
			}
			o.Logger = slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
			var ready *os.File
			if readyFD != "" {
				fd, err := strconv.Atoi(readyFD)
				if err != nil {
					return fmt.Errorf("%w: bad %s=%q", errUsage, readyFDEnv, readyFD)
				}
				ready = os.NewFile(uintptr(fd), "ready")
				defer ready.Close()
			}
			o.Ready = func() {
				if ready != nil {
					ready.WriteString("ok")
					ready.Close()
					ready = nil
					return
				}
				fmt.Fprintf(os.Stderr, "sluice: mounted %s on %s\n", o.Server, o.Mountpoint)
			}
			if httpAddr != "" {
				// Bound before the mount, so that a taken port fails it.
				var cur atomic.Pointer[client.Client]
				mx := metrics.New()
				mx.AddAbsorb(absorbSource(&cur))
				a, err := server.StartAdmin(httpAddr, o.Logger, mx, false)
				if err != nil {
					if ready != nil {
						fmt.Fprint(ready, err)
					}
					return err
				}
				defer a.Close()
				fmt.Fprintf(os.Stderr, "sluice: admin on %s\n", a.Addr())
				o.Started = cur.Store
				defer cur.Store(nil)
			}
			err := fusefs.Run(cmd.Context(), o)
			if err != nil && ready != nil {
				fmt.Fprint(ready, err)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&background, "background", "d", false, "detach: return once mounted and serve in the background")
	f.StringVar(&logFile, "log-file", "", "append log messages to this file (a background mount logs nowhere otherwise)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
	f.StringVar(&httpAddr, "http", "", "serve /metrics (Prometheus: the staging area's sluice_absorb_*, the Go runtime and the process), /healthz and /debug/pprof on this address, e.g. 127.0.0.1:9402 (port 0 picks one; default: none)")
	f.BoolVar(&o.Debug, "debug-fuse", false, "log every FUSE request (slow)")
	f.DurationVar(&o.AttrTimeout, "attr-timeout", 0, "how long the kernel caches attributes (default 1s, --watch-timeout while the change feed is live; negative: no caching)")
	f.DurationVar(&o.EntryTimeout, "entry-timeout", 0, "how long the kernel caches name lookups (default 1s, --watch-timeout while the change feed is live; negative: no caching)")
	f.DurationVar(&o.NegativeTimeout, "negative-timeout", 0, "how long the kernel caches that a name does not exist (default 1s, --watch-timeout while the change feed is live; negative: no caching)")
	f.DurationVar(&o.WatchTimeout, "watch-timeout", 0, "how long the kernel caches names and attributes while the mount follows the metadata service's change feed, which drops what other clients change (default 30s; negative: do not follow it)")
	f.DurationVar(&o.OpTimeout, "op-timeout", 0, "fail an operation with ETIMEDOUT/EIO when the servers do not answer within this (default 30s)")
	f.BoolVar(&o.WritebackCache, "writeback-cache", false, "let the kernel buffer writes (faster small writes; other mounts see size changes late)")
	f.BoolVar(&o.SyncOnClose, "sync-on-close", false, "make the last close of a file wait until its data is durable")
	f.BoolVar(&allowOther, "allow-other", false, "let other users access the mount (default: on when run as root)")
	f.IntVar(&o.ReadAheadKB, "read-ahead-kb", 0, "kernel read-ahead of the mount in KiB (default 8192; root only; -1: kernel default)")
	f.DurationVar(&o.OrphanGrace, "orphan-grace", 0, "free the unlinked-open files of a mount on another host whose heartbeat stopped this long ago (default 10m)")
	f.IntVar(&o.Client.WriteBuffer, "write-buffer", 0, "write-back buffer per open file in bytes (default 8 MiB)")
	f.IntVar(&o.Client.ReadAhead, "client-read-ahead", 0, "client read-ahead window per file in bytes (default 16 MiB; negative: off)")
	layoutLeaseFlag(cmd, &o.Client.LayoutLease, "")
	qosFlags(cmd, &o.Client.Job, &o.Client.Class)
	f.BoolVar(&o.Client.DirectRead, "direct-read", false, "read the chunks of unreplicated chains held on this machine straight from their files, "+
		"checking every block in the mount (also $"+client.EnvDirectRead+"=1; docs/adr/0025-direct-reads.md)")
	f.BoolVar(&o.PassthroughLocal, "passthrough", false, "let the kernel read files held whole by one chunk of an unreplicated target on this machine straight from the chunk's file "+
		"(FUSE passthrough, Linux 6.9+, root; implies --direct-read; docs/fuse.md#passthrough)")
	f.BoolVar(&o.Client.NoAtime, "noatime", false, "leave files' access times alone on reads (by default an open for reading sets an access time older than a day to now, as relatime does; the tier mover releases least recently used files first)")
	f.BoolVar(&o.Client.TierNoRestoreOnRead, "no-restore-on-read", false, "reads of released files come from the object tier every time instead of restoring the file in the background (docs/tier.md)")
	f.IntVar(&o.Client.TierReadRestores, "read-restores", 0, fmt.Sprintf("restores that reads of released files start run at most this many at once, the others queued; reads never wait for them (default %d; negative: no limit; docs/tier.md)", client.DefaultTierReadRestores))
	f.StringVar(&o.Client.StagingDir, "staging-dir", "", "local directory where files under a directory with the absorb policy are staged before they drain to the targets (docs/checkpoint.md; empty: the policy is ignored; in memory, e.g. /dev/shm: a machine restart loses what has not drained)")
	f.Var(sizeValue{&o.Client.StagingReserve}, "staging-reserve", stagingReserveHelp)
	f.Var(sizeValue{&o.Client.StagingMax}, "staging-max", stagingMaxHelp)
	return cmd
}

// addr is the metadata service address from --server, $SLUICE_SERVER or
// the default.
func (g *globals) addr() string {
	if g.server != "" {
		return g.server
	}
	if a := os.Getenv("SLUICE_SERVER"); a != "" {
		return a
	}
	return DefaultAddr
}

// mountInBackground runs this same command again as a detached process
// and waits until it reports that the file system is mounted.
func mountInBackground(logFile string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	child := exec.Command(exe, os.Args[1:]...)
	child.Env = append(os.Environ(), readyFDEnv+"=3")
	child.ExtraFiles = []*os.File{w}
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		w.Close()
		return err
	}
	w.Close()
	msg, _ := io.ReadAll(r) // until the child reports or exits
	if string(msg) == "ok" {
		pid := child.Process.Pid
		child.Process.Release()
		fmt.Fprintf(os.Stderr, "sluice: mounted in the background (pid %d)\n", pid)
		return nil
	}
	child.Wait()
	if len(msg) == 0 {
		hint := ""
		if logFile != "" {
			hint = "; see " + logFile
		}
		return fmt.Errorf("mount: the background process exited (%v)%s", child.ProcessState, hint)
	}
	return fmt.Errorf("%s", strings.TrimPrefix(string(msg), "sluice: "))
}
