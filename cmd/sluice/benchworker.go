package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/bench"
)

// benchFS opens a bench target: a local directory, or sluice:PATH through
// the client library. done releases it.
func benchFS(ctx context.Context, g *globals, target string) (fsys bench.FS, done func(), err error) {
	p, ok := strings.CutPrefix(target, "sluice:")
	if !ok {
		return bench.DirFS{Root: target}, func() {}, nil
	}
	e, done, err := g.env(ctx)
	if err != nil {
		return nil, nil, err
	}
	// A client's staging reserve is allocated long before its first
	// checkpoint in a training job: so too before the bench's.
	if err := e.Client.WaitStagingReserve(ctx); err != nil {
		done()
		return nil, nil, err
	}
	return bench.ClientFS{Client: e.Client, Root: p, Addr: g.addr()}, done, nil
}

// startWorkerProcs starts procs `sluice bench-worker` processes for the
// IO500 workers of one run and returns the pool that drives them.
func startWorkerProcs(ctx context.Context, g *globals, target string, cfg bench.Config, runDir string, procs int) (bench.WorkerPool, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	pool := &bench.PipePool{}
	var cmds []*exec.Cmd
	pool.Wait = func() error {
		var errs []error
		for _, c := range cmds {
			if err := c.Wait(); err != nil {
				errs = append(errs, fmt.Errorf("worker process %d: %w", c.Process.Pid, err))
			}
		}
		return errors.Join(errs...)
	}
	for _, r := range bench.Split(cfg.Workers, procs) {
		c := exec.CommandContext(ctx, exe, "bench-worker", "--server", g.addr(), "--target", target, "--run-dir", runDir,
			"--first", strconv.Itoa(r[0]), "--last", strconv.Itoa(r[1]), "--config", string(cfgJSON))
		c.Stderr = os.Stderr
		c.Env = append(os.Environ(), qosEnv(g.qosJob, g.qosClass)...)
		in, err := c.StdinPipe()
		if err != nil {
			pool.Close()
			return nil, err
		}
		out, err := c.StdoutPipe()
		if err != nil {
			pool.Close()
			return nil, err
		}
		if err := c.Start(); err != nil {
			pool.Close()
			return nil, fmt.Errorf("start worker process: %w", err)
		}
		cmds = append(cmds, c)
		pool.Procs = append(pool.Procs, bench.PipeProc{PID: c.Process.Pid, In: in, Out: bufio.NewReader(out)})
	}
	return pool, nil
}

// newBenchWorker is the hidden command a `sluice bench --procs` run starts
// for each worker process.
func newBenchWorker(g *globals) *cobra.Command {
	var target, runDir, cfgJSON string
	var first, last int
	cmd := &cobra.Command{
		Use:         "bench-worker",
		Annotations: map[string]string{annotGC: "program"},
		Short:       "Run IO500 workers for sluice bench --procs (internal)",
		Hidden:      true,
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg bench.Config
			if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
				return fmt.Errorf("%w: bench-worker --config: %v", errUsage, err)
			}
			fsys, done, err := benchFS(cmd.Context(), g, target)
			if err != nil {
				return err
			}
			defer done()
			return bench.ServeWorkers(cmd.Context(), fsys, cfg, runDir, first, last, os.Stdin, os.Stdout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&target, "target", "", "bench target (DIR or sluice:PATH)")
	f.StringVar(&runDir, "run-dir", "", "the run directory, relative to the target")
	f.IntVar(&first, "first", 0, "first worker index")
	f.IntVar(&last, "last", 0, "one past the last worker index")
	f.StringVar(&cfgJSON, "config", "", "the IO500 configuration, as JSON")
	return cmd
}
