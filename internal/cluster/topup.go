package cluster

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
)

// topUps returns the chains to add so that each target that may take data
// is in as many chains of each replica count in use as that count, in the
// cluster and in each pool (placement.TopUpChains): a target that joined
// after the chains were formed, or came back after its replicas were
// replaced, gets chains of its own, which new files and the rebalancer
// then use. IDs are given from next on.
func (r *Manager) topUps(st clusterState, now time.Time, next placement.ChainID) []placement.Chain {
	var all []placement.NodeTarget
	for id, t := range st.targets {
		if st.draining[id] || st.removed[id] {
			continue
		}
		if nd, ok := st.nodes[t.Node]; ok && r.alive(nd, now) {
			all = append(all, placement.NodeTarget{ID: id, Node: t.Node})
		}
	}
	chains := make([]placement.Chain, 0, len(st.chains))
	for _, c := range st.chains {
		if m, ok := st.moves[c.ID]; ok {
			// A replica being moved counts once: as the new one.
			c = c.Clone()
			c.Leave(m.Old)
		}
		chains = append(chains, c)
	}
	slices.SortFunc(chains, func(a, b placement.Chain) int { return cmp.Compare(a.ID, b.ID) })
	var out []placement.Chain
	scope := func(targets []placement.NodeTarget, chains []placement.Chain) {
		var sizes []int
		for _, c := range chains {
			if n := len(c.Replicas); n >= 2 && !slices.Contains(sizes, n) {
				sizes = append(sizes, n)
			}
		}
		slices.Sort(sizes)
		for _, n := range sizes {
			add := placement.TopUpChains(targets, chains, n, next)
			next += placement.ChainID(len(add))
			out = append(out, add...)
		}
	}
	scope(all, chains)
	names := make([]string, 0, len(st.pools))
	for name := range st.pools {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		members := st.pools[name]
		var in []placement.NodeTarget
		for _, t := range all {
			if slices.Contains(members, t.ID) {
				in = append(in, t)
			}
		}
		scope(in, placement.PoolChains(append(slices.Clone(chains), out...), members))
	}
	return out
}

// topUpChains adds the chains topUps finds missing, if any (the cached
// state decides whether to look; the transaction decides what to add).
func (r *Manager) topUpChains(ctx context.Context) error {
	now := r.now()
	r.mu.Lock()
	need := len(r.topUps(r.mu.st, now, placement.FirstReplicatedChain)) > 0
	r.mu.Unlock()
	if !need {
		return nil
	}
	var made []placement.Chain
	err := r.db.Update(ctx, func(tx kv.Txn) error {
		st, err := loadState(tx)
		if err != nil {
			return err
		}
		next, err := getCounter(tx, keyNextChain, uint64(placement.FirstReplicatedChain))
		if err != nil {
			return err
		}
		made = r.topUps(st, now, placement.ChainID(next))
		if len(made) == 0 {
			return nil
		}
		addChains(tx, st, next, made)
		return nil
	})
	if err != nil {
		return fmt.Errorf("cluster: give new targets chains: %w", err)
	}
	for _, c := range made {
		r.log.Info("cluster: chain formed for a target in too few chains", "chain", c.String())
	}
	if len(made) == 0 {
		return nil
	}
	return r.reload(ctx)
}
