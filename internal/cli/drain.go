package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/pause"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/relayout"
)

// DrainArgs are the arguments of sluice target drain.
type DrainArgs struct {
	Target uint32
	Stop   bool // only clear the draining mark
	Opts   client.MigrateOptions
	Quiet  bool
	// ChainWait bounds the wait for the target's chain replicas to move
	// (0: 10 minutes).
	ChainWait time.Duration
}

// Drain marks a target draining (new data goes elsewhere) and migrates
// every file whose layout names it (bytes there now or once it grows) to a layout of the same shape on other
// targets (in the pool of its directory, if any; fewer stripes if fewer
// targets can take them), one file at a time. It prints a line per file
// and a total; a file that fails is reported and the others go on.
func (e *Env) Drain(ctx context.Context, a DrainArgs) error {
	if a.Stop {
		if err := e.Client.SetDraining(ctx, a.Target, false); err != nil {
			return err
		}
		fmt.Fprintf(e.Stdout, "target %d takes new data again\n", a.Target)
		return nil
	}
	if err := e.Client.SetDraining(ctx, a.Target, true); err != nil {
		return err
	}
	// The metadata service moves the target's chain replicas (the chains'
	// other replicas copy the new ones their data); wait for that first.
	ci, err := e.waitChainsOff(ctx, a.Target, a.ChainWait)
	if err != nil {
		return err
	}
	chains := make(map[placement.ChainID]placement.Chain)
	for _, c := range relayout.ChainTable(ci) {
		chains[c.ID] = c
	}
	on := map[placement.TargetID]bool{placement.TargetID(a.Target): true}
	members := make(map[string][]uint32) // pool members, by directory's pool
	ps, err := e.Client.Pools(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		members[p.Name] = p.Targets
	}
	// eligible counts the targets that can take a stripe in a pool ("": all).
	eligible := func(pool string) int {
		n := 0
		for _, t := range ci.Targets {
			if t.Healthy && !t.Draining && (pool == "" || slices.Contains(members[pool], t.ID)) {
				n++
			}
		}
		return n
	}
	pools := relayout.DirPools{C: e.Client}
	var moved, failed int
	var bytes int64
	err = e.Client.Walk(ctx, "/", func(p string, fi *client.FileInfo, err error) error {
		if err != nil {
			failed++
			fmt.Fprintf(e.Stderr, "sluice target drain: %v\n", err)
			return nil
		}
		if !fi.Mode().IsRegular() {
			return ctx.Err()
		}
		l := fi.Attr().Layout
		if !placement.LayoutOn(relayout.PlacementOf(l), chains, on) {
			return ctx.Err()
		}
		pool, err := pools.Of(ctx, p)
		if err != nil {
			return err
		}
		spec := client.MigrateSpec{Pool: pool}
		if l.Replicas <= 1 && len(l.Components) == 0 {
			if n := eligible(pool); n > 0 && l.StripeCount > n {
				spec.StripeCount = n
			}
		}
		res, err := e.Client.Migrate(ctx, p, spec, a.Opts)
		if err != nil {
			failed++
			fmt.Fprintf(e.Stderr, "sluice target drain: %v\n", err)
			return ctx.Err()
		}
		moved++
		bytes += res.Bytes + res.Recopied
		if !a.Quiet {
			fmt.Fprintf(e.Stdout, "%s\t%s -> %s\n", p, formatLayout(res.Old), formatLayout(res.New))
		}
		return ctx.Err()
	})
	fmt.Fprintf(e.Stdout, "target %d: moved %d files (%d bytes) off it; %d failed\n", a.Target, moved, bytes, failed)
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d files could not be moved off target %d; run the drain again", failed, a.Target)
	}
	return nil
}

// waitChainsOff waits until no replicated chain has a replica on target
// (the cluster manager replaces them while it drains), printing progress,
// and returns the cluster as it is then.
func (e *Env) waitChainsOff(ctx context.Context, target uint32, limit time.Duration) (*client.ClusterInfo, error) {
	if limit <= 0 {
		limit = 10 * time.Minute
	}
	deadline := time.Now().Add(limit)
	last := time.Time{}
	for {
		ci, err := e.Client.Cluster(ctx)
		if err != nil {
			return nil, err
		}
		var on []uint32
		for _, c := range ci.Chains {
			if slices.ContainsFunc(c.Replicas, func(r client.ReplicaInfo) bool { return r.Target == target }) {
				on = append(on, c.ID)
			}
		}
		if len(on) == 0 {
			return ci, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("chains %v still have a replica on target %d after %v (a chain moves once another replica of it serves); run the drain again", on, target, limit)
		}
		if time.Since(last) >= 5*time.Second {
			fmt.Fprintf(e.Stdout, "target %d: %d chains still have a replica on it; moving them\n", target, len(on))
			last = time.Now()
		}
		if err := pause.For(ctx, 250*time.Millisecond); err != nil {
			return nil, err
		}
	}
}
