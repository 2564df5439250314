package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

const gib = int64(1) << 30

// applyPlan checks a plan against its inputs (each move takes a slot from
// the chain it is on to a healthy chain of as many replicas, in the slot's
// pool, not used by the file yet; Off and On are the chains' differences;
// no target that gains ends above the band; no slot moves twice; the total
// is within MaxBytes) and returns the targets' used bytes after it.
func applyPlan(t *testing.T, in RebalanceInput, plan []Move) map[TargetID]int64 {
	t.Helper()
	used := map[TargetID]int64{}
	eligible := map[TargetID]bool{}
	var sumUsed, sumCap int64
	capacity := map[TargetID]int64{}
	for _, tg := range in.Targets {
		used[tg.ID] = tg.Used
		capacity[tg.ID] = tg.Capacity
		if tg.Eligible && tg.Capacity > 0 {
			eligible[tg.ID] = true
			sumUsed += tg.Used
			sumCap += tg.Capacity
		}
	}
	limit := float64(sumUsed)/float64(sumCap) + in.Band/2
	chains := map[ChainID]Chain{}
	for _, c := range in.Chains {
		chains[c.ID] = c
	}
	targetsOf := func(id ChainID) ([]TargetID, bool) {
		if id < FirstReplicatedChain {
			return []TargetID{TargetID(id)}, eligible[TargetID(id)]
		}
		c, ok := chains[id]
		healthy := ok
		var ts []TargetID
		for _, r := range c.Replicas {
			ts = append(ts, r.Target)
			healthy = healthy && r.State == Serving && eligible[r.Target]
		}
		return ts, healthy
	}
	byName := map[string]*FileSlots{}
	for i := range in.Files {
		f := in.Files[i]
		f.Layout.Chains = slices.Clone(f.Layout.Chains)
		byName[f.Name] = &f
	}
	moved := map[string]bool{}
	var total int64
	for _, m := range plan {
		f := byName[m.Name]
		if f == nil {
			t.Fatalf("move %+v: no such file", m)
		}
		key := fmt.Sprint(m.Name, "/", m.Slot)
		if moved[key] {
			t.Fatalf("move %+v: the slot moved before", m)
		}
		moved[key] = true
		if f.Layout.Chains[m.Slot] != m.From || f.Bytes[m.Slot] != m.Bytes {
			t.Fatalf("move %+v: slot holds chain %d with %d bytes", m, f.Layout.Chains[m.Slot], f.Bytes[m.Slot])
		}
		from, _ := targetsOf(m.From)
		to, healthy := targetsOf(m.To)
		if !healthy || len(to) != f.Layout.ReplicaCount() {
			t.Fatalf("move %+v: to chain %v, which may not take a chunk of %d replicas", m, to, f.Layout.ReplicaCount())
		}
		if m.Slot < len(f.Pools) && f.Pools[m.Slot] != "" {
			for _, tg := range to {
				if !slices.Contains(in.Pools[f.Pools[m.Slot]], tg) {
					t.Fatalf("move %+v: target %d is outside the slot's pool %q", m, tg, f.Pools[m.Slot])
				}
			}
		}
		var off, on []TargetID
		for _, tg := range from {
			if !slices.Contains(to, tg) {
				off = append(off, tg)
			}
		}
		for _, tg := range to {
			if !slices.Contains(from, tg) {
				on = append(on, tg)
			}
		}
		if !slices.Equal(off, m.Off) || !slices.Equal(on, m.On) {
			t.Fatalf("move %+v: off %v on %v, want %v %v", m, m.Off, m.On, off, on)
		}
		f.Layout.Chains[m.Slot] = m.To
		seen := map[ChainID]bool{}
		for _, c := range f.Layout.Chains {
			if seen[c] {
				t.Fatalf("move %+v: the file would use chain %d twice: %v", m, c, f.Layout.Chains)
			}
			seen[c] = true
		}
		spread := func() float64 { // the sum of (fill - mean)^2, which each move must lower
			x := 0.0
			for tg := range eligible {
				d := float64(used[tg])/float64(capacity[tg]) - (limit - in.Band/2)
				x += d * d
			}
			return x
		}
		before := spread()
		for _, tg := range off {
			used[tg] -= m.Bytes
		}
		for _, tg := range on {
			used[tg] += m.Bytes
			if f := float64(used[tg]) / float64(capacity[tg]); f > limit+1e-9 {
				t.Fatalf("move %+v: target %d ends at fill %.4f, above the band's top %.4f", m, tg, f, limit)
			}
		}
		if after := spread(); after >= before {
			t.Fatalf("move %+v: the sum of squared distances from the mean went from %g to %g", m, before, after)
		}
		total += m.Bytes
	}
	if in.MaxBytes > 0 && total > in.MaxBytes {
		t.Fatalf("the plan moves %d bytes, over the limit of %d", total, in.MaxBytes)
	}
	return used
}

func TestRebalancePlan(t *testing.T) {
	// Target 1 holds 12 one-stripe files of 1 GiB; 2-4 are empty; target
	// 5 is draining.
	targets := []TargetFill{
		{ID: 1, Capacity: 20 * gib, Used: 12 * gib, Eligible: true},
		{ID: 2, Capacity: 20 * gib, Eligible: true},
		{ID: 3, Capacity: 20 * gib, Eligible: true},
		{ID: 4, Capacity: 20 * gib, Eligible: true},
		{ID: 5, Capacity: 20 * gib, Eligible: false},
	}
	var files []FileSlots
	for i := range 12 {
		files = append(files, FileSlots{Name: fmt.Sprintf("/f%d", i), Layout: Layout{StripeSize: 1 << 20, StripeCount: 1, Chains: []ChainID{1}}, Bytes: []int64{gib}})
	}
	in := RebalanceInput{Targets: targets, Files: files, Band: 0.05}
	plan := RebalancePlan(in)
	used := applyPlan(t, in, plan)
	for id := TargetID(1); id <= 4; id++ {
		if f := float64(used[id]) / float64(20*gib); f < 0.15-0.025-1e-9 || f > 0.15+0.025+1e-9 {
			t.Errorf("target %d at %.3f after the plan, want 0.15 ± 0.025 (plan %v)", id, f, plan)
		}
	}
	if len(plan) != 9 {
		t.Errorf("plan of %d moves, want 9 (3 GiB on each target): %v", len(plan), plan)
	}
	if !slices.Equal(files[0].Layout.Chains, []ChainID{1}) {
		t.Errorf("the plan changed the caller's layouts: %v", files[0].Layout.Chains)
	}

	// A byte limit stops it early.
	lim := in
	lim.MaxBytes = 2 * gib
	if p := RebalancePlan(lim); len(p) != 2 {
		t.Errorf("plan under a 2 GiB limit: %v", p)
	}
	// Balanced already, or only one eligible target: nothing to do.
	balanced := []TargetFill{{ID: 1, Capacity: 10, Used: 5, Eligible: true}, {ID: 2, Capacity: 10, Used: 5, Eligible: true}}
	if p := RebalancePlan(RebalanceInput{Targets: balanced, Band: 0.1}); p != nil {
		t.Errorf("balanced: %v", p)
	}
	one := in
	one.Targets = targets[:1]
	if p := RebalancePlan(one); p != nil {
		t.Errorf("one target: %v", p)
	}
	// A striped file does not get two stripes on one target.
	striped := RebalanceInput{Band: 0.05, Files: []FileSlots{{Name: "/s", Layout: Layout{StripeSize: 1 << 20, StripeCount: 3, Chains: []ChainID{1, 2, 3}}, Bytes: []int64{4 * gib, 4 * gib, 4 * gib}}},
		Targets: []TargetFill{
			{ID: 1, Capacity: 20 * gib, Used: 8 * gib, Eligible: true},
			{ID: 2, Capacity: 20 * gib, Used: 4 * gib, Eligible: true},
			{ID: 3, Capacity: 20 * gib, Used: 4 * gib, Eligible: true},
			{ID: 4, Capacity: 20 * gib, Eligible: true},
		}}
	p := RebalancePlan(striped)
	applyPlan(t, striped, p)
	if len(p) != 1 || p[0].To != 4 || p[0].From != 1 {
		t.Errorf("striped file plan: %v, want its slot on 1 moved to 4", p)
	}
}

// TestRebalanceReplicated: a node joins a 3-node cluster of 2-replica
// chains and heads and follows chains of its own (TopUpChains); the plan
// moves chunks to them, relieving every replica a chunk leaves, until
// every target is within the band. A chain with a replica that is not
// serving receives nothing.
func TestRebalanceReplicated(t *testing.T) {
	var all []NodeTarget
	for id := TargetID(1); id <= 6; id++ {
		all = append(all, NodeTarget{ID: id, Node: fmt.Sprintf("n%d", (id+1)/2)})
	}
	chains, err := FormChains(all, []TargetID{1, 2, 3, 4, 5, 6}, 2, map[TargetID]int{}, FirstReplicatedChain)
	if err != nil {
		t.Fatal(err)
	}
	var targets []TargetFill
	for id := TargetID(1); id <= 8; id++ {
		targets = append(targets, TargetFill{ID: id, Capacity: 100 * gib, Eligible: true})
	}
	var files []FileSlots
	for i := range 120 {
		c := chains[i%len(chains)]
		files = append(files, FileSlots{Name: fmt.Sprintf("/r%d", i), Layout: Layout{StripeSize: 1 << 20, StripeCount: 1, Replicas: 2, Chains: []ChainID{c.ID}}, Bytes: []int64{gib / 2}})
		for _, r := range c.Replicas {
			targets[r.Target-1].Used += gib / 2
		}
	}
	all = append(all, NodeTarget{ID: 7, Node: "n4"}, NodeTarget{ID: 8, Node: "n4"})
	chains = append(chains, TopUpChains(all, chains, 2, FirstReplicatedChain+ChainID(len(chains)))...)
	in := RebalanceInput{Targets: targets, Chains: chains, Files: files, Band: 0.05}
	plan := RebalancePlan(in)
	used := applyPlan(t, in, plan)
	mean := float64(120*gib) / float64(800*gib)
	for id, u := range used {
		if f := float64(u) / float64(100*gib); f < mean-0.025-1e-9 || f > mean+0.025+1e-9 {
			t.Errorf("target %d at fill %.3f after the plan, want %.3f ± 0.025", id, f, mean)
		}
	}
	t.Logf("%d moves; GiB used after: %v", len(plan), used)

	// The same with the new chains syncing a replica: they take nothing.
	for i := 6; i < len(chains); i++ {
		chains[i].Replicas[1].State = Syncing
	}
	in.Chains = chains
	for _, m := range RebalancePlan(in) {
		if m.To >= chains[6].ID {
			t.Fatalf("move %+v to a chain whose replica is syncing", m)
		}
	}
}

// TestRebalancePools: chunks of a slot with a pool move only inside it; a
// slot whose pool is unknown stays.
func TestRebalancePools(t *testing.T) {
	targets := []TargetFill{
		{ID: 1, Capacity: 10 * gib, Used: 8 * gib, Eligible: true},
		{ID: 2, Capacity: 10 * gib, Eligible: true},
		{ID: 3, Capacity: 10 * gib, Eligible: true},
		{ID: 4, Capacity: 10 * gib, Eligible: true},
	}
	var files []FileSlots
	for i := range 4 {
		// Progressive: slot 0 in pool "fast" ({1, 2}), slot 1 anywhere.
		files = append(files, FileSlots{Name: fmt.Sprintf("/p%d", i), Layout: Layout{StripeSize: 1 << 20, StripeCount: 2, Chains: []ChainID{1, 3}},
			Bytes: []int64{gib, gib}, Pools: []string{"fast", ""}})
	}
	for i := range 4 {
		files = append(files, FileSlots{Name: fmt.Sprintf("/q%d", i), Layout: Layout{StripeSize: 1 << 20, StripeCount: 1, Chains: []ChainID{1}},
			Bytes: []int64{gib}, Pools: []string{"gone"}})
	}
	targets[2].Used = 4 * gib
	in := RebalanceInput{Targets: targets, Files: files, Band: 0.05, Pools: map[string][]TargetID{"fast": {1, 2}}}
	plan := RebalancePlan(in)
	applyPlan(t, in, plan)
	toTwo := 0
	for _, m := range plan {
		if m.Name[1] == 'q' {
			t.Errorf("move %+v of a slot whose pool is unknown", m)
		}
		if m.Slot == 0 && m.To == 2 {
			toTwo++
		}
	}
	if toTwo == 0 {
		t.Errorf("no pooled slot moved to the pool's other target: %v", plan)
	}
}

// TestRebalanceRandom checks the plan's rules (applyPlan) on random
// clusters: targets of random size and fill, 1- to 3-replica chains,
// pools, files of 1 to 4 slots; and that the fullest target never ends
// fuller than it started.
func TestRebalanceRandom(t *testing.T) {
	moves := 0
	defer func() {
		if moves == 0 {
			t.Errorf("no random cluster gave a move")
		}
		t.Logf("%d moves in all", moves)
	}()
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		nt := 2 + rng.IntN(9)
		var targets []TargetFill
		for id := 1; id <= nt; id++ {
			targets = append(targets, TargetFill{ID: TargetID(id), Capacity: int64(1+rng.IntN(4)) * 10 * gib, Eligible: rng.IntN(8) != 0})
		}
		var chains []Chain
		for i := range rng.IntN(12) {
			r := 2 + rng.IntN(2)
			perm := rng.Perm(nt)
			if r > nt {
				continue
			}
			c := Chain{ID: FirstReplicatedChain + ChainID(i), Version: 1}
			for _, p := range perm[:r] {
				st := Serving
				if rng.IntN(10) == 0 {
					st = Syncing
				}
				c.Replicas = append(c.Replicas, Replica{Target: TargetID(p + 1), State: st})
			}
			chains = append(chains, c)
		}
		pools := map[string][]TargetID{"p": {1, 2}}
		var files []FileSlots
		for i := range rng.IntN(40) {
			f := FileSlots{Name: fmt.Sprintf("/f%d", i), Layout: Layout{StripeSize: 1 << 20}}
			replicated := len(chains) > 0 && rng.IntN(2) == 0
			r := 1
			if replicated {
				r = len(chains[rng.IntN(len(chains))].Replicas)
				f.Layout.Replicas = uint8(r)
			}
			for range 1 + rng.IntN(4) {
				var ch ChainID
				if replicated {
					c := chains[rng.IntN(len(chains))]
					if len(c.Replicas) != r {
						continue
					}
					ch = c.ID
				} else {
					ch = ChainID(1 + rng.IntN(nt))
				}
				if slices.Contains(f.Layout.Chains, ch) {
					continue
				}
				f.Layout.Chains = append(f.Layout.Chains, ch)
				b := int64(rng.IntN(3)) * gib / 2
				f.Bytes = append(f.Bytes, b)
				pool := ""
				if rng.IntN(4) == 0 {
					pool = "p"
				}
				f.Pools = append(f.Pools, pool)
				for _, tg := range chainTargets(ch, chains) {
					targets[tg-1].Used += b
				}
			}
			if len(f.Layout.Chains) > 0 {
				f.Layout.StripeCount = uint16(len(f.Layout.Chains))
				files = append(files, f)
			}
		}
		in := RebalanceInput{Targets: targets, Chains: chains, Pools: pools, Files: files, Band: 0.02 + rng.Float64()/5}
		if rng.IntN(3) == 0 {
			in.MaxBytes = int64(rng.IntN(8)) * gib
		}
		plan := RebalancePlan(in)
		moves += len(plan)
		used := applyPlan(t, in, plan)
		top := func(u func(TargetID) int64) float64 {
			x := 0.0
			for _, tg := range targets {
				if tg.Eligible {
					x = max(x, float64(u(tg.ID))/float64(tg.Capacity))
				}
			}
			return x
		}
		b := top(func(id TargetID) int64 { return targets[id-1].Used })
		a := top(func(id TargetID) int64 { return used[id] })
		if a > b+1e-9 {
			t.Fatalf("seed %d: the fullest eligible target went from %.4f to %.4f: %v", seed, b, a, plan)
		}
	}
}

// chainTargets returns the targets of chain id (a target for one replica).
func chainTargets(id ChainID, chains []Chain) []TargetID {
	if id < FirstReplicatedChain {
		return []TargetID{TargetID(id)}
	}
	for _, c := range chains {
		if c.ID == id {
			var ts []TargetID
			for _, r := range c.Replicas {
				ts = append(ts, r.Target)
			}
			return ts
		}
	}
	return nil
}
