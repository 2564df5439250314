package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
)

// replaceDead carries out re-replication: the offline replicas of nodes
// dead for ReplaceAfter are replaced, as placement.PlanReplacements
// decides, by syncing replicas on other nodes; the chains' tails then copy
// them the data (the resync of a returning node) and they serve once
// synced. At most MaxSyncing chains sync at a time. The old target is out
// of the chain for good: when its node returns, its copies of the chain's
// chunks are stale and unused.
func (r *Manager) replaceDead(ctx context.Context) error {
	if r.replace <= 0 {
		return nil
	}
	ts, err := r.List(ctx)
	if err != nil {
		return err
	}
	now := r.now()
	r.mu.Lock()
	deadNode := make(map[string]bool)
	for name, n := range r.mu.st.nodes {
		if r.deadLong(n, now) {
			deadNode[name] = true
		}
	}
	targetNode := make(map[placement.TargetID]string, len(r.mu.st.targets))
	for id, t := range r.mu.st.targets {
		targetNode[id] = t.Node
	}
	var chains []placement.Chain
	syncing := 0
	for _, c := range r.mu.st.chains {
		chains = append(chains, c.Clone())
		for _, rep := range c.Replicas {
			if rep.State == placement.Syncing {
				syncing++
				break
			}
		}
	}
	var pools [][]placement.TargetID
	for _, m := range r.mu.st.pools {
		pools = append(pools, m)
	}
	r.mu.Unlock()
	if len(deadNode) == 0 || syncing >= r.maxSync {
		return nil
	}
	cands := make([]placement.Candidate, len(ts))
	for i, t := range ts {
		cands[i] = placement.Candidate{ID: t.ID, Node: t.Node, Healthy: t.Healthy, Free: t.Capacity - t.Used}
	}
	dead := func(t placement.TargetID) bool { return deadNode[targetNode[t]] }
	plan := placement.PlanReplacements(chains, cands, placement.DeadReplica(dead), pools, r.maxSync-syncing)
	stillDead := func(tx kv.Txn, p placement.Replacement) (bool, error) {
		// The old target's node must still be dead.
		v, err := tx.Get(nodeKey(targetNode[p.Old]))
		if err != nil && !errors.Is(err, kv.ErrNotFound) {
			return false, err
		}
		if err == nil {
			if n, derr := decodeNodeRecord(v); derr == nil && !r.deadLong(n, now) {
				return false, nil
			}
		}
		return true, nil
	}
	done, err := r.applyReplacements(ctx, plan, stillDead)
	if err != nil {
		return fmt.Errorf("cluster: replace the replicas of dead nodes: %w", err)
	}
	for _, p := range done {
		r.log.Warn("cluster: re-replicating: a dead node's replica replaced", "chain", p.Chain, "old", p.Old, "node", targetNode[p.Old], "new", p.New, "dead_for_over", r.replace)
	}
	return nil
}

// replaceDraining moves the replicas on draining targets to other
// targets, making before breaking (placement.PlanDrain): a new replica
// joins the chain as syncing while the draining one goes on serving, the
// chain's tail copies it the data, and the draining replica leaves in the
// transaction that makes the new one serving (SyncDone; here too, should
// that have been missed). A move whose new replica goes offline or leaves,
// or whose target stops draining, is abandoned. At most MaxSyncing chains
// sync at a time, counting re-replication's.
func (r *Manager) replaceDraining(ctx context.Context) error {
	ts, err := r.List(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	draining := make(map[placement.TargetID]bool, len(r.mu.st.draining))
	for id := range r.mu.st.draining {
		draining[id] = true
	}
	var chains []placement.Chain
	syncing := 0
	for _, c := range r.mu.st.chains {
		chains = append(chains, c.Clone())
		if slices.ContainsFunc(c.Replicas, func(rep placement.Replica) bool { return rep.State == placement.Syncing }) {
			syncing++
		}
	}
	moves := make([]placement.DrainMove, 0, len(r.mu.st.moves))
	for _, m := range r.mu.st.moves {
		moves = append(moves, m)
	}
	var pools [][]placement.TargetID
	for _, m := range r.mu.st.pools {
		pools = append(pools, m)
	}
	r.mu.Unlock()
	if len(draining) == 0 && len(moves) == 0 {
		return nil
	}
	cands := make([]placement.Candidate, len(ts))
	for i, t := range ts {
		cands[i] = placement.Candidate{ID: t.ID, Node: t.Node, Healthy: t.Healthy && !t.Draining, Free: t.Capacity - t.Used}
	}
	plan := placement.PlanDrain(chains, cands, draining, moves, pools, max(r.maxSync-syncing, 0))
	if len(plan.Start)+len(plan.Finish)+len(plan.Abandon) == 0 {
		return nil
	}
	var started []placement.Replacement
	var finished, abandoned []placement.DrainMove
	err = r.db.Update(ctx, func(tx kv.Txn) error {
		started, finished, abandoned = started[:0], finished[:0], abandoned[:0]
		st, err := loadState(tx)
		if err != nil {
			return err
		}
		changed := make(map[placement.ChainID]placement.Chain)
		chain := func(id placement.ChainID) (placement.Chain, bool) {
			if c, ok := changed[id]; ok {
				return c, true
			}
			c, ok := st.chains[id]
			return c, ok
		}
		for _, p := range plan.Start {
			c, ok := chain(p.Chain)
			if !ok || c.Version != p.Version || !st.draining[p.Old] || st.moves[p.Chain] != (placement.DrainMove{}) || !c.Join(p.New) {
				continue
			}
			changed[c.ID] = c
			m := placement.DrainMove{Chain: c.ID, Old: p.Old, New: p.New}
			tx.Set(moveKey(c.ID), encodeMove(m))
			started = append(started, p)
		}
		for _, m := range plan.Finish {
			c, ok := chain(m.Chain)
			if st.moves[m.Chain] != m {
				continue
			}
			if ok {
				if stNew, in := c.State(m.New); !in || stNew != placement.Serving || !c.Leave(m.Old) {
					continue
				}
				changed[c.ID] = c
			}
			tx.Delete(moveKey(m.Chain))
			finished = append(finished, m)
		}
		for _, m := range plan.Abandon {
			if st.moves[m.Chain] != m {
				continue
			}
			if c, ok := chain(m.Chain); ok {
				if stNew, in := c.State(m.New); in && stNew != placement.Serving && c.Leave(m.New) {
					changed[c.ID] = c
				}
			}
			tx.Delete(moveKey(m.Chain))
			abandoned = append(abandoned, m)
		}
		if len(started)+len(finished)+len(abandoned) == 0 {
			return nil
		}
		tx.RequireSync()
		out := make([]placement.Chain, 0, len(changed))
		for _, c := range changed {
			out = append(out, c)
		}
		if len(out) == 0 {
			return nil
		}
		return putChains(tx, out...)
	})
	if err != nil {
		return fmt.Errorf("cluster: move the replicas of draining targets: %w", err)
	}
	for _, p := range started {
		r.log.Info("cluster: draining: a new replica joins, syncing", "chain", p.Chain, "old", p.Old, "new", p.New)
	}
	for _, m := range finished {
		r.log.Info("cluster: draining: a replica moved", "chain", m.Chain, "old", m.Old, "new", m.New)
	}
	for _, m := range abandoned {
		r.log.Warn("cluster: draining: a replica's move abandoned (its new replica went away, or the target no longer drains)", "chain", m.Chain, "old", m.Old, "new", m.New)
	}
	if len(started)+len(finished)+len(abandoned) == 0 {
		return nil
	}
	return r.reload(ctx)
}

// applyReplacements carries out a plan in one transaction: each
// replacement whose chain is still at the planned version and for which
// ok still holds swaps the old target for the new one as syncing. It
// returns the replacements made, and reloads the state if any.
func (r *Manager) applyReplacements(ctx context.Context, plan []placement.Replacement, ok func(kv.Txn, placement.Replacement) (bool, error)) ([]placement.Replacement, error) {
	if len(plan) == 0 {
		return nil, nil
	}
	var done []placement.Replacement
	err := r.db.Update(ctx, func(tx kv.Txn) error {
		done = done[:0]
		var changed []placement.Chain
		for _, p := range plan {
			if still, err := ok(tx, p); err != nil {
				return err
			} else if !still {
				continue
			}
			v, err := tx.Get(chainKey(p.Chain))
			if errors.Is(err, kv.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			c, err := decodeChain(v)
			if err != nil {
				return err
			}
			if c.Version != p.Version || !c.Replace(p.Old, p.New) {
				continue
			}
			changed = append(changed, c)
			done = append(done, p)
		}
		if len(changed) == 0 {
			return nil
		}
		return putChains(tx, changed...)
	})
	if err != nil || len(done) == 0 {
		return nil, err
	}
	return done, r.reload(ctx)
}

// deadLong reports whether node n has been silent for ReplaceAfter.
func (r *Manager) deadLong(n nodeRecord, now time.Time) bool {
	return n.LastSeen != 0 && now.Sub(time.Unix(0, n.LastSeen)) >= r.replace
}
