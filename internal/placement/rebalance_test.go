package placement

import (
	"fmt"
	"slices"
	"testing"
)

const gib = int64(1) << 30

// applyPlan checks a plan against its inputs and returns the targets'
// used bytes after it.
func applyPlan(t *testing.T, targets []TargetFill, files []FileSlots, plan []Move) map[TargetID]int64 {
	t.Helper()
	used := map[TargetID]int64{}
	eligible := map[TargetID]bool{}
	for _, tg := range targets {
		used[tg.ID] = tg.Used
		eligible[tg.ID] = tg.Eligible
	}
	byName := map[string]*FileSlots{}
	for i := range files {
		f := files[i]
		f.Layout.Chains = slices.Clone(f.Layout.Chains)
		byName[f.Name] = &f
	}
	for _, m := range plan {
		f := byName[m.Name]
		if f == nil || f.Layout.ReplicaCount() != 1 {
			t.Fatalf("move %+v: no such file of one replica", m)
		}
		if f.Layout.Chains[m.Slot] != ChainID(m.From) || f.Bytes[m.Slot] != m.Bytes {
			t.Fatalf("move %+v: slot holds chain %d with %d bytes", m, f.Layout.Chains[m.Slot], f.Bytes[m.Slot])
		}
		if !eligible[m.To] {
			t.Fatalf("move %+v: to a target that may not take data", m)
		}
		f.Layout.Chains[m.Slot] = ChainID(m.To)
		seen := map[ChainID]bool{}
		for _, c := range f.Layout.Chains {
			if seen[c] {
				t.Fatalf("move %+v: the file would use target %d twice: %v", m, c, f.Layout.Chains)
			}
			seen[c] = true
		}
		used[m.From] -= m.Bytes
		used[m.To] += m.Bytes
	}
	return used
}

func TestRebalancePlan(t *testing.T) {
	// Target 1 holds 12 one-stripe files of 1 GiB; 2-4 are empty; target
	// 5 is draining; two files of 2 replicas are never moved.
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
	files = append(files, FileSlots{Name: "/r", Layout: Layout{StripeSize: 1 << 20, StripeCount: 1, Replicas: 2, Chains: []ChainID{FirstReplicatedChain}}, Bytes: []int64{gib}})
	plan := RebalancePlan(targets, files, 0.05, 0)
	used := applyPlan(t, targets, files, plan)
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
	if p := RebalancePlan(targets, files, 0.05, 2*gib); len(p) != 2 {
		t.Errorf("plan under a 2 GiB limit: %v", p)
	}
	// Balanced already, or only one eligible target: nothing to do.
	balanced := []TargetFill{{ID: 1, Capacity: 10, Used: 5, Eligible: true}, {ID: 2, Capacity: 10, Used: 5, Eligible: true}}
	if p := RebalancePlan(balanced, nil, 0.1, 0); p != nil {
		t.Errorf("balanced: %v", p)
	}
	if p := RebalancePlan(targets[:1], files, 0.05, 0); p != nil {
		t.Errorf("one target: %v", p)
	}
	// A striped file does not get two stripes on one target.
	striped := []FileSlots{{Name: "/s", Layout: Layout{StripeSize: 1 << 20, StripeCount: 3, Chains: []ChainID{1, 2, 3}}, Bytes: []int64{4 * gib, 4 * gib, 4 * gib}}}
	fills := []TargetFill{
		{ID: 1, Capacity: 20 * gib, Used: 8 * gib, Eligible: true},
		{ID: 2, Capacity: 20 * gib, Used: 4 * gib, Eligible: true},
		{ID: 3, Capacity: 20 * gib, Used: 4 * gib, Eligible: true},
		{ID: 4, Capacity: 20 * gib, Eligible: true},
	}
	p := RebalancePlan(fills, striped, 0.05, 0)
	applyPlan(t, fills, striped, p)
	if len(p) != 1 || p[0].To != 4 || p[0].From != 1 {
		t.Errorf("striped file plan: %v, want its slot on 1 moved to 4", p)
	}
}
