package placement

import "slices"

// AvoidTargets returns the chains with no replica on a target in avoid
// (in their order): the chains a new file may use while those targets
// drain.
func AvoidTargets(chains []Chain, avoid map[TargetID]bool) []Chain {
	if len(avoid) == 0 {
		return chains
	}
	out := make([]Chain, 0, len(chains))
	for _, c := range chains {
		if !c.OnAny(avoid) {
			out = append(out, c)
		}
	}
	return out
}

// OnAny reports whether a replica of c is on a target in set.
func (c Chain) OnAny(set map[TargetID]bool) bool {
	for _, r := range c.Replicas {
		if set[r.Target] {
			return true
		}
	}
	return false
}

// LayoutOn reports whether layout l names a target in set: a one-replica
// chain that is such a target, or a replicated chain (looked up in chains)
// with a replica on one. A chain missing from chains counts as on set (the
// caller cannot tell). Slots a small file has no bytes in count too: the
// file writes there once it grows.
func LayoutOn(l Layout, chains map[ChainID]Chain, set map[TargetID]bool) bool {
	for _, id := range l.Chains {
		if id < FirstReplicatedChain {
			if set[TargetID(id)] {
				return true
			}
			continue
		}
		c, ok := chains[id]
		if !ok || c.OnAny(set) {
			return true
		}
	}
	return false
}

// MaxChainMembers bounds a chain's replicas: MaxReplicas, and one more
// while a draining target's replica is moved (the new replica joins before
// the old one leaves).
const MaxChainMembers = MaxReplicas + 1

// Join adds target nt at the end of the write path as a syncing replica:
// the chain's tail copies it the data and it serves once synced, while
// every other replica goes on as it was. It reports whether the chain
// changed (not if nt is a member, or the chain has MaxChainMembers).
func (c *Chain) Join(nt TargetID) bool {
	if _, in := c.State(nt); in || len(c.Replicas) >= MaxChainMembers {
		return false
	}
	c.Replicas = append(slices.Clone(c.Replicas), Replica{Target: nt, State: Offline})
	return c.setState(nt, Syncing)
}

// Leave takes target t out of the chain for good, if another replica
// serves. It reports whether the chain changed.
func (c *Chain) Leave(t TargetID) bool {
	i := slices.IndexFunc(c.Replicas, func(r Replica) bool { return r.Target == t })
	if i < 0 {
		return false
	}
	others := 0
	for j, r := range c.Replicas {
		if j != i && r.State == Serving {
			others++
		}
	}
	if others == 0 {
		return false
	}
	c.Replicas = slices.Delete(slices.Clone(c.Replicas), i, i+1)
	c.Version++
	return true
}

// DrainMove is the move of a draining target's replica under way: in
// chain Chain, target New joined as syncing to take the place of Old,
// which serves until New does.
type DrainMove struct {
	Chain    ChainID
	Old, New TargetID
}

// DrainPlan is what PlanDrain decides for one pass.
type DrainPlan struct {
	// Start are new moves: New joins chain Chain (at Version) as syncing.
	Start []Replacement
	// Finish are moves whose new replica serves: Old leaves the chain.
	Finish []DrainMove
	// Abandon are moves to give up: their new replica went offline or
	// left, or Old no longer drains. New leaves the chain if it is still
	// a member that does not serve; the record goes.
	Abandon []DrainMove
}

// PlanDrain decides, without I/O, the next steps of moving the replicas of
// draining targets off them, making before breaking: a new replica joins
// the chain as syncing (the chain's tail copies it the data) while the
// draining one goes on serving, and only once the new one serves does the
// draining one leave; the chain never has fewer serving replicas than
// before. moves are the moves under way. New moves start in chains with a
// serving replica on a draining target, no syncing replica and no move
// under way, the new target chosen as PlanReplacements chooses it; at most
// max chains sync at once (max counts what may start; 0: none).
func PlanDrain(chains []Chain, targets []Candidate, draining map[TargetID]bool, moves []DrainMove, pools [][]TargetID, max int) DrainPlan {
	var p DrainPlan
	byID := make(map[ChainID]Chain, len(chains))
	for _, c := range chains {
		byID[c.ID] = c
	}
	moving := make(map[ChainID]bool, len(moves))
	for _, m := range moves {
		moving[m.Chain] = true
		c, ok := byID[m.Chain]
		if !ok {
			p.Abandon = append(p.Abandon, m)
			continue
		}
		_, oldIn := c.State(m.Old)
		stNew, newIn := c.State(m.New)
		switch {
		case !oldIn || !newIn || stNew == Offline || !draining[m.Old]:
			p.Abandon = append(p.Abandon, m)
		case stNew == Serving:
			p.Finish = append(p.Finish, m)
		}
	}
	if max <= 0 {
		return p
	}
	want := func(c Chain, r Replica) bool {
		return !moving[c.ID] && draining[r.Target] && r.State == Serving &&
			!slices.ContainsFunc(c.Replicas, func(x Replica) bool { return x.State == Syncing }) &&
			len(c.Replicas) < MaxChainMembers
	}
	p.Start = PlanReplacements(chains, targets, want, pools, max)
	return p
}
