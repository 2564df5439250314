// Package relayout moves file data between targets while the files stay in
// use: the rebalancer (a pass, or a loop inside sluice serve) and what it
// shares with sluice target drain. The decisions are pure functions of
// package placement (RebalancePlan, LayoutOn); this package gathers their
// inputs from a walk of the namespace and carries their moves out as
// online migrations (client.Migrate, ADR 0020).
package relayout

import (
	"cmp"
	"context"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/placement"
)

// ChainTable returns the replicated chains of ci as placement sees them.
func ChainTable(ci *client.ClusterInfo) []placement.Chain {
	var chains []placement.Chain
	for _, ch := range ci.Chains {
		c := placement.Chain{ID: placement.ChainID(ch.ID), Version: ch.Version}
		for _, r := range ch.Replicas {
			st := placement.Offline
			switch r.State {
			case placement.Serving.String():
				st = placement.Serving
			case placement.Syncing.String():
				st = placement.Syncing
			}
			c.Replicas = append(c.Replicas, placement.Replica{Target: placement.TargetID(r.Target), State: st})
		}
		chains = append(chains, c)
	}
	return chains
}

// PlacementOf returns a layout as the client reports it, as package
// placement has it.
func PlacementOf(l client.Layout) placement.Layout {
	pl := placement.Layout{StripeSize: uint32(l.StripeSize), StripeCount: uint16(l.StripeCount), Data: l.Data}
	if l.Replicas > 1 {
		pl.Replicas = uint8(l.Replicas)
	}
	for _, c := range l.Chains {
		pl.Chains = append(pl.Chains, placement.ChainID(c))
	}
	pl.Comps, _ = client.PlacementComps(l.Components) // from the service: in range
	return pl
}

// SlotPools returns the pool each slot of layout l must stay in: a
// progressive component's pool, else dir, the pool of the file's
// directory ("" for none). Nil when no slot has one.
func SlotPools(l placement.Layout, dir string) []string {
	n := len(l.Chains)
	out := make([]string, n)
	any := false
	if !l.Progressive() {
		for i := range out {
			out[i], any = dir, dir != ""
		}
	} else {
		slot := 0
		for _, c := range l.Comps {
			pool := cmp.Or(c.Pool, dir)
			for range c.StripeCount {
				if slot < n {
					out[slot], any = pool, any || pool != ""
				}
				slot++
			}
		}
	}
	if !any {
		return nil
	}
	return out
}

// DirPools answers the pool of a file's directory, asking the metadata
// service once per directory.
type DirPools struct {
	C *client.Client
	m map[string]string
}

// Of returns the pool of the directory holding file ("" for none).
func (d *DirPools) Of(ctx context.Context, file string) (string, error) {
	dir := path.Dir(file)
	if pool, ok := d.m[dir]; ok {
		return pool, nil
	}
	l, err := d.C.GetLayout(ctx, dir)
	if err != nil {
		return "", err
	}
	if d.m == nil {
		d.m = make(map[string]string)
	}
	d.m[dir] = l.Pool
	return l.Pool, nil
}

// Options tune a Rebalancer.
type Options struct {
	// Band is the width of the fill band around the mean, as a fraction
	// of capacity (0.1: within ±5 points).
	Band float64
	// MaxBytes bounds the bytes one pass moves (0: no limit).
	MaxBytes int64
	// Migrate tunes each migration (its Rate caps the first copy).
	Migrate client.MigrateOptions
	// OnPlan, if set, is called with the report of a pass once its plan is
	// made, before any move (Moves, Bytes and Fills are set).
	OnPlan func(Report)
	// OnMove, if set, is called after each file's migration (err nil when
	// it moved).
	OnMove func(name string, res client.MigrateResult, err error)
	Logger *slog.Logger
}

// Fill is one target's state in a pass: its chunk bytes before and as
// planned after, and its capacity.
type Fill struct {
	Target          uint32
	Capacity        int64
	Before, Planned int64
	Eligible        bool
}

// Report says what a pass found, planned and did.
type Report struct {
	Fills  []Fill
	Moves  []placement.Move
	Bytes  int64 // planned
	Moved  int64 // of those, in files that migrated
	Files  int   // migrated
	Failed int
	Took   time.Duration
}

// Spread returns the largest minus the smallest fill of the eligible
// targets, before the pass.
func (r Report) Spread() float64 {
	lo, hi, any := 1.0, 0.0, false
	for _, f := range r.Fills {
		if !f.Eligible || f.Capacity <= 0 {
			continue
		}
		x := float64(f.Before) / float64(f.Capacity)
		lo, hi, any = min(lo, x), max(hi, x), true
	}
	if !any {
		return 0
	}
	return hi - lo
}

// Totals are a Rebalancer's counters since it started.
type Totals struct {
	Passes, Files, Failed int64
	Bytes                 int64 // moved
	LastSpread            float64
	LastPass              time.Duration
}

// Rebalancer spreads chunks over the targets (see Pass).
type Rebalancer struct {
	c *client.Client
	o Options

	mu     sync.Mutex
	totals Totals
}

// New returns a Rebalancer working through c.
func New(c *client.Client, o Options) *Rebalancer {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Rebalancer{c: c, o: o}
}

// Totals returns the counters since New.
func (r *Rebalancer) Totals() Totals {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.totals
}

// Pass walks the namespace, adds up the chunk bytes each target holds
// (each replica of a replicated chain counted on its target), plans moves
// with placement.RebalancePlan (each slot kept in its pool, replicated
// slots moved between chains of as many replicas) and,
// unless dryRun, carries each file's moves out as one migration with the
// new chains, one file at a time.
func (r *Rebalancer) Pass(ctx context.Context, dryRun bool) (Report, error) {
	start := time.Now()
	var rep Report
	ci, err := r.c.Cluster(ctx)
	if err != nil {
		return rep, err
	}
	chains := ChainTable(ci)
	byChain := make(map[placement.ChainID]placement.Chain, len(chains))
	for _, c := range chains {
		byChain[c.ID] = c
	}
	members := make(map[string][]placement.TargetID)
	ps, err := r.c.Pools(ctx)
	if err != nil {
		return rep, err
	}
	for _, p := range ps {
		for _, t := range p.Targets {
			members[p.Name] = append(members[p.Name], placement.TargetID(t))
		}
	}
	used := make(map[placement.TargetID]int64)
	var files []placement.FileSlots
	pools := DirPools{C: r.c}
	err = r.c.Walk(ctx, "/", func(p string, fi *client.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return ctx.Err()
		}
		pl := PlacementOf(fi.Attr().Layout)
		if len(pl.Chains) == 0 || pl.StripeSize == 0 {
			return ctx.Err()
		}
		bytes := make([]int64, len(pl.Chains))
		for slot, ch := range pl.Chains {
			bytes[slot] = pl.ChunkSize(slot, fi.Size())
			if ch < placement.FirstReplicatedChain {
				used[placement.TargetID(ch)] += bytes[slot]
			} else {
				for _, rp := range byChain[ch].Replicas {
					used[rp.Target] += bytes[slot]
				}
			}
		}
		pool, err := pools.Of(ctx, p)
		if err != nil {
			return err
		}
		files = append(files, placement.FileSlots{Name: p, Layout: pl, Bytes: bytes, Pools: SlotPools(pl, pool)})
		return ctx.Err()
	})
	if err != nil {
		return rep, err
	}
	var fills []placement.TargetFill
	for _, t := range ci.Targets {
		fills = append(fills, placement.TargetFill{ID: placement.TargetID(t.ID), Capacity: t.Capacity,
			Used: used[placement.TargetID(t.ID)], Eligible: t.Healthy && !t.Draining})
	}
	rep.Moves = placement.RebalancePlan(placement.RebalanceInput{Targets: fills, Chains: chains, Pools: members,
		Files: files, Band: r.o.Band, MaxBytes: r.o.MaxBytes})
	after := make(map[placement.TargetID]int64, len(used))
	for id, u := range used {
		after[id] = u
	}
	for _, m := range rep.Moves {
		for _, t := range m.Off {
			after[t] -= m.Bytes
		}
		for _, t := range m.On {
			after[t] += m.Bytes
		}
		rep.Bytes += m.Bytes
	}
	for _, f := range fills {
		rep.Fills = append(rep.Fills, Fill{Target: uint32(f.ID), Capacity: f.Capacity, Before: f.Used, Planned: after[f.ID], Eligible: f.Eligible})
	}
	if r.o.OnPlan != nil {
		r.o.OnPlan(rep)
	}
	if !dryRun {
		r.carryOut(ctx, files, &rep)
	}
	rep.Took = time.Since(start)
	if !dryRun {
		r.mu.Lock()
		r.totals.Passes++
		r.totals.Files += int64(rep.Files)
		r.totals.Failed += int64(rep.Failed)
		r.totals.LastSpread = rep.Spread()
		r.totals.LastPass = rep.Took
		r.totals.Bytes += rep.Moved
		r.mu.Unlock()
	}
	return rep, ctx.Err()
}

// carryOut migrates each file of the plan to its new chains.
func (r *Rebalancer) carryOut(ctx context.Context, files []placement.FileSlots, rep *Report) {
	layouts := make(map[string]placement.Layout, len(files))
	for _, f := range files {
		layouts[f.Name] = f.Layout
	}
	byFile := make(map[string][]placement.Move)
	var order []string
	for _, m := range rep.Moves {
		if byFile[m.Name] == nil {
			order = append(order, m.Name)
		}
		byFile[m.Name] = append(byFile[m.Name], m)
	}
	for _, name := range order {
		if ctx.Err() != nil {
			return
		}
		l := layouts[name]
		var spec client.MigrateSpec
		if !l.Progressive() { // a progressive file keeps its components, with the chains given
			spec.StripeSize = int64(l.StripeSize)
		}
		for _, c := range l.Chains {
			spec.Chains = append(spec.Chains, uint32(c))
		}
		for _, m := range byFile[name] {
			spec.Chains[m.Slot] = uint32(m.To)
		}
		res, err := r.c.Migrate(ctx, name, spec, r.o.Migrate)
		if err != nil {
			rep.Failed++
			r.o.Logger.Warn("rebalance: move failed; the file keeps its layout", "file", name, "err", err)
		} else {
			rep.Files++
			for _, m := range byFile[name] {
				rep.Moved += m.Bytes
			}
		}
		if r.o.OnMove != nil {
			r.o.OnMove(name, res, err)
		}
	}
}

// Run makes a pass every interval until ctx ends, logging what each did.
func (r *Rebalancer) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rep, err := r.Pass(ctx, false)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.o.Logger.Warn("rebalance: pass failed", "err", err)
		case len(rep.Moves) > 0:
			r.o.Logger.Info("rebalance: pass", "moves", len(rep.Moves), "bytes", rep.Bytes, "files", rep.Files, "failed", rep.Failed, "spread", rep.Spread(), "took", rep.Took)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
