package cli

import (
	"context"
	"fmt"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/placement"
)

// RebalanceArgs are the arguments of sluice rebalance.
type RebalanceArgs struct {
	Band     float64 // fill band, as a fraction (0.1: within ±5 points of the mean)
	MaxBytes int64   // bytes to move at most (0: no limit)
	DryRun   bool
	Opts     client.MigrateOptions
	Quiet    bool
}

// Rebalance walks the namespace, adds up the bytes each target holds,
// plans chunk moves that bring every target's fill within the band around
// the mean (placement.RebalancePlan: files of one replica outside pools),
// and carries them out as migrations, one file at a time, at the rate
// given. It prints the fills before and (as planned) after, and each move.
func (e *Env) Rebalance(ctx context.Context, a RebalanceArgs) error {
	ci, err := e.Client.Cluster(ctx)
	if err != nil {
		return err
	}
	chains := chainTable(ci)
	byChain := make(map[placement.ChainID]placement.Chain, len(chains))
	for _, c := range chains {
		byChain[c.ID] = c
	}
	used := make(map[placement.TargetID]int64)
	var files []placement.FileSlots
	pools := dirPools{c: e.Client}
	err = e.Client.Walk(ctx, "/", func(p string, fi *client.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return ctx.Err()
		}
		pl := placementOf(fi.Attr().Layout)
		if len(pl.Chains) == 0 || pl.StripeSize == 0 {
			return ctx.Err()
		}
		bytes := make([]int64, len(pl.Chains))
		for slot, ch := range pl.Chains {
			bytes[slot] = pl.ChunkSize(slot, fi.Size())
			if ch < placement.FirstReplicatedChain {
				used[placement.TargetID(ch)] += bytes[slot]
			} else {
				for _, r := range byChain[ch].Replicas {
					used[r.Target] += bytes[slot]
				}
			}
		}
		pool, err := pools.of(ctx, p)
		if err != nil {
			return err
		}
		if pool == "" { // files of a pool stay in it: not moved
			files = append(files, placement.FileSlots{Name: p, Layout: pl, Bytes: bytes})
		}
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	var fills []placement.TargetFill
	for _, t := range ci.Targets {
		fills = append(fills, placement.TargetFill{ID: placement.TargetID(t.ID), Capacity: t.Capacity, Used: used[placement.TargetID(t.ID)],
			Eligible: t.Healthy && !t.Draining})
	}
	plan := placement.RebalancePlan(fills, files, a.Band, a.MaxBytes)
	after := make(map[placement.TargetID]int64)
	for id, u := range used {
		after[id] = u
	}
	var total int64
	for _, m := range plan {
		after[m.From] -= m.Bytes
		after[m.To] += m.Bytes
		total += m.Bytes
	}
	fmt.Fprintln(e.Stdout, "TARGET\tBYTES\tFILL\tPLANNED")
	for _, f := range fills {
		pct := func(u int64) float64 { return 100 * float64(u) / float64(max(f.Capacity, 1)) }
		fmt.Fprintf(e.Stdout, "%d\t%s\t%.2f%%\t%.2f%%\n", f.ID, human(f.Used), pct(f.Used), pct(after[f.ID]))
	}
	fmt.Fprintf(e.Stdout, "plan: %d chunk moves, %s\n", len(plan), human(total))
	if a.DryRun || len(plan) == 0 {
		for _, m := range plan {
			fmt.Fprintf(e.Stdout, "%s\tslot %d: target %d -> %d (%s)\n", m.Name, m.Slot, m.From, m.To, human(m.Bytes))
		}
		return nil
	}
	// One migration per file, with all of its slots' moves.
	byFile := make(map[string][]placement.Move)
	var order []string
	for _, m := range plan {
		if byFile[m.Name] == nil {
			order = append(order, m.Name)
		}
		byFile[m.Name] = append(byFile[m.Name], m)
	}
	layouts := make(map[string]placement.Layout, len(files))
	for _, f := range files {
		layouts[f.Name] = f.Layout
	}
	var failed int
	for _, name := range order {
		l := layouts[name]
		spec := client.MigrateSpec{StripeSize: int64(l.StripeSize)}
		for _, c := range l.Chains {
			spec.Chains = append(spec.Chains, uint32(c))
		}
		for _, m := range byFile[name] {
			spec.Chains[m.Slot] = uint32(m.To)
		}
		res, err := e.Client.Migrate(ctx, name, spec, a.Opts)
		if err != nil {
			failed++
			fmt.Fprintf(e.Stderr, "sluice rebalance: %v\n", err)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		if !a.Quiet {
			fmt.Fprintf(e.Stdout, "%s\t%v -> %v\n", name, res.Old.Chains, res.New.Chains)
		}
	}
	fmt.Fprintf(e.Stdout, "moved %d files; %d failed\n", len(order)-failed, failed)
	if failed > 0 {
		return fmt.Errorf("%d files could not be moved (they keep their layout); run the rebalance again", failed)
	}
	return nil
}
