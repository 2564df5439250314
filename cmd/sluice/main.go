// Command sluice is the one binary of the Sluice file system: it runs the
// servers (serve) and the command-line tools (ls, cp, ...).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/cli"
	"github.com/sluice-fs/sluice/internal/errs"
)

// DefaultAddr is where sluice serve listens and the tools connect by default.
const DefaultAddr = "127.0.0.1:9400"

// errUsage marks an error in how the command was called (exit code 2).
var errUsage = errors.New("usage")

// EnvCPUProfile names a file that any sluice command writes a Go CPU
// profile of its whole run to (for `go tool pprof`): a diagnostic for the
// client side of a command, as the admin port's /debug/pprof is for a
// server. A "%p" in it stands for the process ID.
const EnvCPUProfile = "SLUICE_CPUPROFILE"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile, perr := startCPUProfile(os.Getenv(EnvCPUProfile))
	if perr != nil {
		fmt.Fprintf(os.Stderr, "sluice: $%s: %v\n", EnvCPUProfile, perr)
		os.Exit(1)
	}
	err := newRoot().ExecuteContext(ctx)
	stopProfile()
	stop()
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "sluice") {
			msg = "sluice: " + msg
		}
		// Name the error's class when the message does not already.
		if c := errs.CodeOf(err); c != errs.Internal && !strings.Contains(msg, c.String()) {
			msg += " (" + c.String() + ")"
		}
		fmt.Fprintln(os.Stderr, strings.ReplaceAll(msg, "\n", " "))
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// annotGC is the annotation that marks a command whose process stands
// for a user's program ("program": sluice bench and its workers, which
// measure what an application linking the client library gets): it
// keeps Go's default collector. Every other command is one of Sluice's
// own processes, whose collector serverGC tunes.
const annotGC = "gc"

// serverGCPercent is the garbage collector's target (GOGC) of Sluice's
// own processes unless GOGC is set in the environment: a new collection
// starts once the heap has grown by 4x its live size since the last one,
// instead of Go's default 1x (ADR 0026).
const serverGCPercent = 400

// gcPercent returns the collector's target for a command annotated
// annot, or false where the process keeps what Go chose: GOGC set in the
// environment (envSet), or a command that stands for a user's program.
func gcPercent(annot string, envSet bool) (int, bool) {
	if envSet || annot == "program" {
		return 0, false
	}
	return serverGCPercent, true
}

// globals are the flags every client command shares.
type globals struct {
	server         string
	stagingDir     string // client staging directory (bench --staging-dir)
	stagingReserve int64  // bytes of it to allocate at start (bench --staging-reserve)
	stagingMax     int64  // bytes staged and not drained it holds at most (bench --staging-max)
	qosJob         string // QoS identity of the client (bench --qos-job, --qos-class)
	qosClass       string
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Sluice: a parallel file system for AI training and inference",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		_, envSet := os.LookupEnv("GOGC")
		if p, ok := gcPercent(cmd.Annotations[annotGC], envSet); ok {
			debug.SetGCPercent(p)
		}
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w: %s: %v", errUsage, c.CommandPath(), err)
	})
	root.PersistentFlags().StringVar(&g.server, "server", "",
		"metadata service address host:port (default $SLUICE_SERVER, else "+DefaultAddr+")")
	root.AddCommand(
		newServe(), newMeta(), newTarget(g),
		newLs(g), newStat(g), newMkdir(g), newCp(g), newCat(g), newRm(g), newMv(g), newLn(g),
		newLayout(g), newPool(g), newMount(g), newUmount(), newGateway(g), newBench(g), newBenchWorker(g), newStatus(g), newDamaged(g), newMigrate(g), newRebalance(g), newTop(), newFsx(g),
		newCheckpoint(g), newKV(g), newAudit(g),
		newTier(g), newHsm(g), newStage(g), newQos(g), newMover(g), newProfile(g), newAdvise(g),
	)
	return root
}

// env connects to the server named by --server or $SLUICE_SERVER.
func (g *globals) env(ctx context.Context) (*cli.Env, func(), error) {
	addr := g.server
	if addr == "" {
		addr = os.Getenv("SLUICE_SERVER")
	}
	if addr == "" {
		addr = DefaultAddr
	}
	// The CLI's reads (hsm, migrate, checkpoint verify, stage, cp...)
	// leave files' access times alone, as tools reading with O_NOATIME
	// do: the mover's least-recently-used order is the users' reads.
	c, err := client.New(ctx, client.Options{Server: addr, StagingDir: g.stagingDir, StagingReserve: g.stagingReserve, StagingMax: g.stagingMax, Job: g.qosJob, Class: g.qosClass, NoAtime: true})
	if err != nil {
		return nil, nil, err
	}
	return &cli.Env{Client: c, Stdout: os.Stdout, Stderr: os.Stderr}, func() { c.Close() }, nil
}

// run wraps a client command: connect, run fn, close.
func (g *globals) run(fn func(ctx context.Context, e *cli.Env) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		e, done, err := g.env(cmd.Context())
		if err != nil {
			return err
		}
		defer done()
		return fn(cmd.Context(), e)
	}
}

// runBackground is run for the system's own data movement (migrate,
// drain, rebalance): its chunk I/O is scheduled in the background QoS
// class unless --qos-class or $SLUICE_QOS_CLASS names another, so that
// the jobs' reads and writes go first on busy targets (docs/qos.md).
func (g *globals) runBackground(fn func(ctx context.Context, e *cli.Env) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if g.qosClass == "" && os.Getenv(client.EnvQosClass) == "" {
			g.qosClass = "background"
		}
		return g.run(fn)(cmd, args)
	}
}

func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%w: %s takes %d arguments, got %d", errUsage, cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}

func minArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return fmt.Errorf("%w: %s needs at least %d argument(s)", errUsage, cmd.CommandPath(), n)
		}
		return nil
	}
}

// startCPUProfile starts a CPU profile to file path (nothing when path is
// empty) and returns what stops it.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	// "%p" stands for the process ID, so that the processes of one run
	// (a server, its mounts) each write their own.
	path = strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid()))
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
