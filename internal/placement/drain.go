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

// LayoutOn reports whether a file of the given size with layout l has
// bytes on a target in set: a slot holding bytes on a one-replica chain
// that is such a target, or on a replicated chain (looked up in chains) with
// a replica on one. A chain missing from chains counts as on set: the
// caller cannot tell.
func LayoutOn(l Layout, size int64, chains map[ChainID]Chain, set map[TargetID]bool) bool {
	for slot, id := range l.Chains {
		if l.StripeSize != 0 && l.StripeCount != 0 && l.ChunkSize(slot, size) == 0 {
			continue // no bytes in this slot
		}
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
