package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
)

// workFor returns the per-worker work of an IO500 phase that has any (all
// but find).
func (r *runner) workFor(phase string) (func(ctx context.Context, w int) error, error) {
	work := map[string]func(ctx context.Context, w int) error{
		"ior-easy-write": r.iorEasyWrite, "ior-easy-read": r.iorEasyRead,
		"ior-hard-write": r.iorHardWrite, "ior-hard-read": r.iorHardRead,
		"mdtest-easy-write": r.mdEasyWrite, "mdtest-easy-stat": r.mdEasyStat, "mdtest-easy-delete": r.mdEasyDelete,
		"mdtest-hard-write": r.mdHardWrite, "mdtest-hard-stat": r.mdHardStat,
		"mdtest-hard-read": r.mdHardRead, "mdtest-hard-delete": r.mdHardDelete,
	}[phase]
	if work == nil {
		return nil, fmt.Errorf("bench: phase %q has no per-worker work", phase)
	}
	return work, nil
}

// ServeWorkers is the loop of a worker process (sluice bench --procs): it
// runs workers [first, last) of cfg.Workers in the run directory runDir of
// fsys. For each line it reads from in, a phase name, it runs that phase's
// work for its workers and writes one line to out: "ok", or "error: " and
// the reason. It returns at the end of in.
func ServeWorkers(ctx context.Context, fsys FS, cfg Config, runDir string, first, last int, in io.Reader, out io.Writer) error {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if first < 0 || last > cfg.Workers || first >= last {
		return fmt.Errorf("bench: worker range [%d, %d) is not inside 0..%d", first, last, cfg.Workers)
	}
	r := &runner{fs: fsys, cfg: cfg, dir: runDir}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		phase := strings.TrimSpace(sc.Text())
		err := func() error {
			work, err := r.workFor(phase)
			if err != nil {
				return err
			}
			return parallel(ctx, last-first, func(ctx context.Context, i int) error { return work(ctx, first+i) })
		}()
		reply := "ok"
		if err != nil {
			reply = "error: " + strings.ReplaceAll(err.Error(), "\n", " ")
		}
		if _, err := fmt.Fprintln(out, reply); err != nil {
			return err
		}
	}
	return sc.Err()
}

// Split divides n workers among procs processes as evenly as possible and
// returns each process's [first, last).
func Split(n, procs int) [][2]int {
	out := make([][2]int, 0, procs)
	for p := range procs {
		out = append(out, [2]int{p * n / procs, (p + 1) * n / procs})
	}
	return out
}

// PipePool drives worker processes over their standard input and output
// with the ServeWorkers protocol. The caller starts the processes.
type PipePool struct {
	Procs []PipeProc
	// Wait, if set, is called by Close after the inputs are closed, to
	// reap the processes.
	Wait func() error
}

// PipeProc is one worker process's end of the protocol.
type PipeProc struct {
	PID int
	In  io.WriteCloser
	Out *bufio.Reader
}

// RunPhase sends phase to every process and waits for all their replies.
func (p *PipePool) RunPhase(ctx context.Context, phase string) error {
	errc := make(chan error, len(p.Procs))
	var wg sync.WaitGroup
	for _, pr := range p.Procs {
		wg.Go(func() {
			if _, err := fmt.Fprintln(pr.In, phase); err != nil {
				errc <- fmt.Errorf("worker process %d: %w", pr.PID, err)
				return
			}
			line, err := pr.Out.ReadString('\n')
			if err != nil {
				errc <- fmt.Errorf("worker process %d: %w", pr.PID, err)
				return
			}
			if line = strings.TrimSpace(line); line != "ok" {
				errc <- fmt.Errorf("worker process %d: %s", pr.PID, strings.TrimPrefix(line, "error: "))
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc // nil if none failed
}

// PIDs returns the worker processes' IDs.
func (p *PipePool) PIDs() []int {
	out := make([]int, len(p.Procs))
	for i, pr := range p.Procs {
		out[i] = pr.PID
	}
	return out
}

// Close ends the processes' input, so they exit, and reaps them.
func (p *PipePool) Close() error {
	for _, pr := range p.Procs {
		pr.In.Close()
	}
	if p.Wait != nil {
		return p.Wait()
	}
	return nil
}
