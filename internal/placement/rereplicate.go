package placement

import (
	"cmp"
	"slices"
)

// Re-replication: a chain whose replica sits on a node that has been dead
// for longer than the cluster's limit gets that replica replaced by a
// target of another live node, which joins as Syncing (the chain's tail
// copies it the data, as for a returning node) and serves once synced.

// Candidate is what PlanReplacements knows of a target.
type Candidate struct {
	ID      TargetID
	Node    string
	Healthy bool // its node heart-beats
	Free    int64
}

// Replacement is one step of re-replication: in chain Chain (at version
// Version), offline target Old is replaced by target New.
type Replacement struct {
	Chain    ChainID
	Version  uint64
	Old, New TargetID
}

// PlanReplacements decides, without I/O, which replicas to replace and by
// which targets. A replica is replaced when want says so (re-replication:
// it is Offline and its target's node has been silent too long, see
// DeadReplica; or PlanDrain's choice for a draining target). The new
// target is
// healthy, has free space, is on a node that holds no other replica of the
// chain, belongs to every pool that holds all of the chain's targets (a
// chain made inside a pool stays inside it), and is in the fewest chains
// (then the lowest ID). At most max replacements are returned (0: no
// limit), one per chain, in chain ID order; chains with no eligible target
// are left as they are (they run degraded, as before).
func PlanReplacements(chains []Chain, targets []Candidate, want func(Chain, Replica) bool, pools [][]TargetID, max int) []Replacement {
	node := make(map[TargetID]string, len(targets))
	for _, t := range targets {
		node[t.ID] = t.Node
	}
	load := make(map[TargetID]int)
	for _, c := range chains {
		for _, r := range c.Replicas {
			load[r.Target]++
		}
	}
	sorted := slices.Clone(chains)
	slices.SortFunc(sorted, func(a, b Chain) int { return cmp.Compare(a.ID, b.ID) })
	var out []Replacement
	for _, c := range sorted {
		if max > 0 && len(out) >= max {
			break
		}
		i := slices.IndexFunc(c.Replicas, func(r Replica) bool { return want(c, r) })
		if i < 0 {
			continue
		}
		old := c.Replicas[i].Target
		used := make(map[string]bool)
		var members []TargetID
		for _, r := range c.Replicas {
			members = append(members, r.Target)
			if r.Target != old {
				used[node[r.Target]] = true
			}
		}
		var within [][]TargetID
		for _, p := range pools {
			if !slices.ContainsFunc(members, func(t TargetID) bool { return !slices.Contains(p, t) }) {
				within = append(within, p)
			}
		}
		best, found := TargetID(0), false
		for _, t := range targets {
			if !t.Healthy || t.Free <= 0 || used[t.Node] || slices.Contains(members, t.ID) {
				continue
			}
			if slices.ContainsFunc(within, func(p []TargetID) bool { return !slices.Contains(p, t.ID) }) {
				continue
			}
			if !found || load[t.ID] < load[best] || load[t.ID] == load[best] && t.ID < best {
				best, found = t.ID, true
			}
		}
		if !found {
			continue
		}
		load[best]++
		load[old]--
		out = append(out, Replacement{Chain: c.ID, Version: c.Version, Old: old, New: best})
	}
	return out
}

// Replace puts target nt in place of offline target old, as a syncing
// replica (after the other syncing ones). It reports whether the chain
// changed; it does not if old is not an offline member or nt is a member.
// (A draining target's serving replica is not replaced but moved: the new
// one joins first, see Join and PlanDrain.)
func (c *Chain) Replace(old, nt TargetID) bool {
	st, ok := c.State(old)
	if !ok || st != Offline {
		return false
	}
	if _, in := c.State(nt); in {
		return false
	}
	for i := range c.Replicas {
		if c.Replicas[i].Target == old {
			c.Replicas = slices.Clone(c.Replicas)
			c.Replicas[i].Target = nt
			break
		}
	}
	return c.setState(nt, Syncing) // offline -> syncing: bumps Version
}

// Unavailable returns, sorted, the chains that can serve no reads: a
// replicated chain none of whose serving replicas is on a healthy target
// (its last replica is lost while that node is away), or a one-replica
// chain (chain t is target t) whose target is not healthy. Files with data
// on them cannot be read until a replica returns.
func Unavailable(chains []Chain, targets []TargetID, healthy func(TargetID) bool) []ChainID {
	var out []ChainID
	for _, t := range targets {
		if !healthy(t) {
			out = append(out, ChainID(t))
		}
	}
	for _, c := range chains {
		if !slices.ContainsFunc(c.Replicas, func(r Replica) bool { return r.State == Serving && healthy(r.Target) }) {
			out = append(out, c.ID)
		}
	}
	slices.Sort(out)
	return out
}

// DeadReplica is PlanReplacements' want for re-replication: an offline
// replica whose target dead says is on a node silent too long.
func DeadReplica(dead func(TargetID) bool) func(Chain, Replica) bool {
	return func(_ Chain, r Replica) bool { return r.State == Offline && dead(r.Target) }
}
