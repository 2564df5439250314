package placement

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
