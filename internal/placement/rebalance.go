package placement

import (
	"cmp"
	"slices"
)

// TargetFill is what the rebalance planner knows of a target: its size and
// the bytes in use on it, and whether it may take data.
type TargetFill struct {
	ID       TargetID
	Capacity int64
	Used     int64
	Eligible bool // healthy, not draining: may receive chunks
}

// FileSlots is a file as the rebalance planner sees it: an identifier
// (its path), its layout (one replica) and the bytes each slot holds.
type FileSlots struct {
	Name   string
	Layout Layout
	Bytes  []int64 // per slot, from Layout.ChunkSize
}

// Move replaces chain From by chain To in slot Slot of file Name's layout
// (one-replica chains: targets); Bytes is what moves.
type Move struct {
	Name     string
	Slot     int
	From, To TargetID
	Bytes    int64
}

// RebalancePlan picks chunk moves that bring every eligible target's fill
// (used/capacity) to within band/2 of the mean fill of the eligible
// targets, moving at most maxBytes (0: no limit). Greedy, as a scheduler
// would: the fullest target above the band gives its largest chunk that
// fits (not bigger than what brings it to the mean, nor than what the
// emptiest target can take below the mean) to the emptiest target that the
// file does not use yet; it stops when no target is above the band, or no
// such move exists. Only files of one replica are moved (replicated chains
// are not touched). It does no I/O: targets and files are the cluster and
// the namespace as a walk found them.
func RebalancePlan(targets []TargetFill, files []FileSlots, band float64, maxBytes int64) []Move {
	files = slices.Clone(files) // the plan's view of the layouts changes; the caller's does not
	used := make(map[TargetID]int64)
	capacity := make(map[TargetID]int64)
	var eligible []TargetID
	var sumUsed, sumCap int64
	for _, t := range targets {
		if !t.Eligible || t.Capacity <= 0 {
			continue
		}
		used[t.ID], capacity[t.ID] = t.Used, t.Capacity
		eligible = append(eligible, t.ID)
		sumUsed += t.Used
		sumCap += t.Capacity
	}
	if len(eligible) < 2 || sumCap == 0 {
		return nil
	}
	mean := float64(sumUsed) / float64(sumCap)
	fill := func(t TargetID) float64 { return float64(used[t]) / float64(capacity[t]) }
	// The chunks on each target, largest first.
	type chunkRef struct {
		file, slot int
		bytes      int64
	}
	on := make(map[TargetID][]chunkRef)
	for fi, f := range files {
		if f.Layout.ReplicaCount() != 1 {
			continue
		}
		for slot, ch := range f.Layout.Chains {
			if slot < len(f.Bytes) && f.Bytes[slot] > 0 && ch < FirstReplicatedChain {
				on[TargetID(ch)] = append(on[TargetID(ch)], chunkRef{fi, slot, f.Bytes[slot]})
			}
		}
	}
	for _, list := range on {
		slices.SortFunc(list, func(a, b chunkRef) int {
			return cmp.Or(cmp.Compare(b.bytes, a.bytes), cmp.Compare(a.file, b.file), cmp.Compare(a.slot, b.slot))
		})
	}
	uses := func(fi int, t TargetID) bool { return slices.Contains(files[fi].Layout.Chains, ChainID(t)) }
	moved := make(map[[2]int]bool) // (file, slot) already moved once
	var plan []Move
	var total int64
	for {
		// The fullest target above the band.
		slices.SortFunc(eligible, func(a, b TargetID) int { return cmp.Or(cmp.Compare(fill(b), fill(a)), cmp.Compare(a, b)) })
		src := eligible[0]
		if fill(src) <= mean+band/2 {
			return plan
		}
		excess := used[src] - int64(mean*float64(capacity[src]))
		var best *Move
		for _, c := range on[src] {
			if moved[[2]int{c.file, c.slot}] || c.bytes >= 2*excess || (maxBytes > 0 && total+c.bytes > maxBytes) {
				continue
			}
			// The emptiest target the file does not use that can take it
			// and stay within the band.
			for i := len(eligible) - 1; i > 0; i-- {
				dst := eligible[i]
				room := int64((mean+band/2)*float64(capacity[dst])) - used[dst]
				if dst == src || uses(c.file, dst) || c.bytes > room {
					continue
				}
				best = &Move{Name: files[c.file].Name, Slot: c.slot, From: src, To: dst, Bytes: c.bytes}
				break
			}
			if best != nil {
				moved[[2]int{c.file, c.slot}] = true
				files[c.file].Layout.Chains = slices.Clone(files[c.file].Layout.Chains)
				files[c.file].Layout.Chains[c.slot] = ChainID(best.To)
				break
			}
		}
		if best == nil {
			return plan
		}
		used[best.From] -= best.Bytes
		used[best.To] += best.Bytes
		total += best.Bytes
		plan = append(plan, *best)
	}
}
