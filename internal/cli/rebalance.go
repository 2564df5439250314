package cli

import (
	"context"
	"fmt"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/relayout"
)

// RebalanceArgs are the arguments of sluice rebalance.
type RebalanceArgs struct {
	Band     float64 // fill band, as a fraction (0.1: within ±5 points of the mean)
	MaxBytes int64   // bytes to move at most (0: no limit)
	DryRun   bool
	Opts     client.MigrateOptions
	Quiet    bool
}

// Rebalance makes one pass of the rebalancer (package relayout): it prints
// the targets' chunk bytes and fills before and as planned, then each
// file it moves (or, with DryRun, each planned move).
func (e *Env) Rebalance(ctx context.Context, a RebalanceArgs) error {
	o := relayout.Options{Band: a.Band, MaxBytes: a.MaxBytes, Migrate: a.Opts}
	if !a.Quiet {
		o.OnMove = func(name string, res client.MigrateResult, err error) {
			if err != nil {
				fmt.Fprintf(e.Stderr, "sluice rebalance: %v\n", err)
				return
			}
			fmt.Fprintf(e.Stdout, "%s\t%v -> %v\n", name, res.Old.Chains, res.New.Chains)
		}
	}
	o.OnPlan = func(plan relayout.Report) {
		fmt.Fprintln(e.Stdout, "TARGET\tBYTES\tFILL\tPLANNED")
		for _, f := range plan.Fills {
			pct := func(u int64) float64 { return 100 * float64(u) / float64(max(f.Capacity, 1)) }
			fmt.Fprintf(e.Stdout, "%d\t%s\t%.2f%%\t%.2f%%\n", f.Target, human(f.Before), pct(f.Before), pct(f.Planned))
		}
		fmt.Fprintf(e.Stdout, "plan: %d chunk moves, %s\n", len(plan.Moves), human(plan.Bytes))
		if a.DryRun {
			for _, m := range plan.Moves {
				fmt.Fprintf(e.Stdout, "%s\tslot %d: %s -> %s (%s; targets %v -> %v)\n", m.Name, m.Slot, chainText(m.From), chainText(m.To), human(m.Bytes), m.Off, m.On)
			}
		}
	}
	done, err := relayout.New(e.Client, o).Pass(ctx, a.DryRun)
	if err != nil || a.DryRun || len(done.Moves) == 0 {
		return err
	}
	fmt.Fprintf(e.Stdout, "moved %d files (%s); %d failed\n", done.Files, human(done.Moved), done.Failed)
	if done.Failed > 0 {
		return fmt.Errorf("%d files could not be moved (they keep their layout); run the rebalance again", done.Failed)
	}
	return nil
}

// chainText names a chain as the rebalancer's plan prints it: "target N"
// for a chain of one replica, else "chain N".
func chainText(id placement.ChainID) string {
	if id < placement.FirstReplicatedChain {
		return fmt.Sprintf("target %d", id)
	}
	return fmt.Sprintf("chain %d", id)
}
