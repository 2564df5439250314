package placement

import (
	"cmp"
	"slices"
)

// minGain is the least lowering of the sum of squared fill distances
// that a move must bring (moves between targets as far from the mean on
// either side would change nothing but rounding).
const minGain = 1e-12

// TargetFill is what the rebalance planner knows of a target: its size and
// the bytes in use on it, and whether it may take data.
type TargetFill struct {
	ID       TargetID
	Capacity int64
	Used     int64
	Eligible bool // healthy, not draining: may receive chunks
}

// FileSlots is a file as the rebalance planner sees it: an identifier
// (its path), its layout, the bytes each slot holds and the pool each
// slot's chunk must stay in.
type FileSlots struct {
	Name   string
	Layout Layout
	Bytes  []int64 // per slot, from Layout.ChunkSize
	// Pools, if set, name per slot the pool its chain must lie in (""
	// for none): the directory's pool, or a progressive component's.
	Pools []string
}

// RebalanceInput is what the rebalance planner is given: the cluster and
// the namespace as a walk found them.
type RebalanceInput struct {
	Targets []TargetFill
	// Chains are the replicated chains (chains of one replica are their
	// targets). A replicated slot moves only to a chain of as many
	// replicas, all serving, on targets that may take data.
	Chains []Chain
	// Pools are the pools' members by name. A slot whose pool is not here
	// does not move.
	Pools map[string][]TargetID
	Files []FileSlots
	// Band is the width of the fill band around the mean (0.1: ±5 points).
	Band float64
	// MaxBytes bounds the bytes the plan moves (0: no limit).
	MaxBytes int64
}

// Move replaces chain From by chain To in slot Slot of file Name's layout
// (for one replica, chains are targets); Bytes is what moves. Off are the
// targets that lose the bytes and On those that gain them (the replicas
// of From not in To, and of To not in From).
type Move struct {
	Name     string
	Slot     int
	From, To ChainID
	Bytes    int64
	Off, On  []TargetID
}

// RebalancePlan picks chunk moves that bring every eligible target's fill
// (used/capacity) to within Band/2 of the mean fill of the eligible
// targets, moving at most MaxBytes. Greedy, as a scheduler would: while a
// target is above the band or below it, the fullest target above the mean
// that can give something gives its largest chunk that can go to a chain
// of the same replica count, inside the slot's pool and not yet used by
// the file, whose gaining targets stay below the band's top, choosing the
// chain that lowers the sum of the squared distances of the fills from the
// mean most (a move that would not lower it is not made); each chunk moves
// at most once; it stops when every target is within the band, or no
// target above the mean can give. A replicated chunk counts on
// every replica's target, so moving it to another chain relieves every
// replica it leaves. It does no I/O.
func RebalancePlan(in RebalanceInput) []Move {
	files := slices.Clone(in.Files) // the plan's view of the layouts changes; the caller's does not
	used := make(map[TargetID]int64, len(in.Targets))
	capacity := make(map[TargetID]int64)
	var eligible []TargetID
	ok := make(map[TargetID]bool)
	var sumUsed, sumCap int64
	for _, t := range in.Targets {
		used[t.ID] = t.Used
		if !t.Eligible || t.Capacity <= 0 {
			continue
		}
		capacity[t.ID] = t.Capacity
		eligible = append(eligible, t.ID)
		ok[t.ID] = true
		sumUsed += t.Used
		sumCap += t.Capacity
	}
	if len(eligible) < 2 || sumCap == 0 {
		return nil
	}
	mean := float64(sumUsed) / float64(sumCap)
	fill := func(t TargetID) float64 { return float64(used[t]) / float64(capacity[t]) }
	room := func(t TargetID) int64 { return int64((mean+in.Band/2)*float64(capacity[t])) - used[t] }

	// Every chain's targets; the chains that may take a chunk, by replica
	// count.
	members := make(map[ChainID][]TargetID)
	dests := make(map[int][]ChainID)
	for _, t := range eligible {
		members[ChainID(t)] = []TargetID{t}
		dests[1] = append(dests[1], ChainID(t))
	}
	for _, c := range in.Chains {
		var ts []TargetID
		healthy := true
		for _, r := range c.Replicas {
			ts = append(ts, r.Target)
			healthy = healthy && r.State == Serving && ok[r.Target]
		}
		members[c.ID] = ts
		if healthy && len(ts) >= 2 {
			dests[len(ts)] = append(dests[len(ts)], c.ID)
		}
	}
	for _, ds := range dests {
		slices.Sort(ds)
	}
	targetsOf := func(id ChainID) []TargetID {
		if id < FirstReplicatedChain {
			return []TargetID{TargetID(id)}
		}
		return members[id]
	}

	// The chunks on each target, largest first.
	type chunkRef struct {
		file, slot int
		bytes      int64
	}
	on := make(map[TargetID][]chunkRef)
	for fi, f := range files {
		r := f.Layout.ReplicaCount()
		for slot, ch := range f.Layout.Chains {
			if slot >= len(f.Bytes) || f.Bytes[slot] <= 0 {
				continue
			}
			ts := targetsOf(ch)
			if len(ts) != r {
				continue // a chain unknown, or of another size: leave it
			}
			for _, t := range ts {
				on[t] = append(on[t], chunkRef{fi, slot, f.Bytes[slot]})
			}
		}
	}
	for _, list := range on {
		slices.SortFunc(list, func(a, b chunkRef) int {
			return cmp.Or(cmp.Compare(b.bytes, a.bytes), cmp.Compare(a.file, b.file), cmp.Compare(a.slot, b.slot))
		})
	}

	// change is how much the sum over the targets of (fill - mean)^2
	// changes when t gains (sign 1) or loses (-1) b bytes: negative when
	// the move brings it nearer the mean. Factored so that a chunk small
	// beside the capacity still counts.
	change := func(t TargetID, b int64, sign float64) float64 {
		c := capacity[t]
		if c <= 0 {
			return 0 // not eligible: outside the mean
		}
		x := float64(b) / float64(c)
		return x * (sign*2*(float64(used[t])/float64(c)-mean) + x)
	}

	// dest returns the chain that chunk c, leaving src, improves the
	// balance most by moving to, if any does.
	dest := func(c chunkRef, src TargetID) (Move, bool) {
		f := &files[c.file]
		cur := f.Layout.Chains[c.slot]
		curT := targetsOf(cur)
		var pool []TargetID
		if c.slot < len(f.Pools) && f.Pools[c.slot] != "" {
			var known bool
			if pool, known = in.Pools[f.Pools[c.slot]]; !known {
				return Move{}, false
			}
		}
		var best Move
		bestDelta := -minGain
		for _, d := range dests[len(curT)] {
			dT := targetsOf(d)
			if d == cur || slices.Contains(f.Layout.Chains, d) || slices.Contains(dT, src) {
				continue
			}
			if pool != nil && slices.ContainsFunc(dT, func(t TargetID) bool { return !slices.Contains(pool, t) }) {
				continue
			}
			var gain, lose []TargetID
			delta, fits := 0.0, true
			for _, t := range dT {
				if slices.Contains(curT, t) {
					continue
				}
				if c.bytes > room(t) {
					fits = false
					break
				}
				gain = append(gain, t)
				delta += change(t, c.bytes, 1)
			}
			if !fits {
				continue
			}
			for _, t := range curT {
				if !slices.Contains(dT, t) {
					lose = append(lose, t)
					delta += change(t, c.bytes, -1)
				}
			}
			if delta < bestDelta {
				best = Move{Name: f.Name, Slot: c.slot, From: cur, To: d, Bytes: c.bytes, Off: lose, On: gain}
				bestDelta = delta
			}
		}
		return best, bestDelta < -minGain
	}

	moved := make(map[[2]int]bool) // (file, slot) already moved once
	var plan []Move
	var total int64
	for {
		// While a target is outside the band, the fullest target above
		// the mean that can give something gives its largest chunk that
		// brings the targets nearer the mean.
		slices.SortFunc(eligible, func(a, b TargetID) int { return cmp.Or(cmp.Compare(fill(b), fill(a)), cmp.Compare(a, b)) })
		if fill(eligible[0]) <= mean+in.Band/2 && fill(eligible[len(eligible)-1]) >= mean-in.Band/2 {
			return plan
		}
		var best *Move
		for _, src := range eligible {
			if fill(src) <= mean {
				break
			}
			for _, c := range on[src] {
				if moved[[2]int{c.file, c.slot}] || (in.MaxBytes > 0 && total+c.bytes > in.MaxBytes) {
					continue
				}
				if m, found := dest(c, src); found {
					moved[[2]int{c.file, c.slot}] = true
					f := &files[c.file]
					f.Layout.Chains = slices.Clone(f.Layout.Chains)
					f.Layout.Chains[c.slot] = m.To
					best = &m
					break
				}
			}
			if best != nil {
				break
			}
		}
		if best == nil {
			return plan
		}
		for _, t := range best.Off {
			used[t] -= best.Bytes
		}
		for _, t := range best.On {
			used[t] += best.Bytes
		}
		total += best.Bytes
		plan = append(plan, *best)
	}
}
