package placement

import (
	"slices"
	"testing"
)

func TestAvoidTargets(t *testing.T) {
	chains := []Chain{
		{ID: FirstReplicatedChain, Replicas: []Replica{{Target: 1}, {Target: 2}}},
		{ID: FirstReplicatedChain + 1, Replicas: []Replica{{Target: 3}, {Target: 4}}},
		{ID: FirstReplicatedChain + 2, Replicas: []Replica{{Target: 4}, {Target: 2}}},
	}
	got := AvoidTargets(chains, map[TargetID]bool{2: true})
	if len(got) != 1 || got[0].ID != FirstReplicatedChain+1 {
		t.Fatalf("AvoidTargets(2) = %v, want only the chain on 3 and 4", got)
	}
	if got := AvoidTargets(chains, nil); len(got) != 3 {
		t.Fatalf("AvoidTargets(none) dropped chains: %v", got)
	}
}

func TestLayoutOn(t *testing.T) {
	rc := FirstReplicatedChain
	chains := map[ChainID]Chain{rc: {ID: rc, Replicas: []Replica{{Target: 5}, {Target: 6}}}}
	two := Layout{StripeSize: MinStripeSize, StripeCount: 2, Chains: []ChainID{1, 2}}
	for _, c := range []struct {
		name string
		l    Layout
		set  map[TargetID]bool
		want bool
	}{
		{"one-replica chain", two, map[TargetID]bool{2: true}, true},
		{"other targets", two, map[TargetID]bool{3: true}, false},
		{"replicated chain with a replica there", Layout{StripeSize: MinStripeSize, StripeCount: 1, Replicas: 2, Chains: []ChainID{rc}}, map[TargetID]bool{6: true}, true},
		{"replicated chain elsewhere", Layout{StripeSize: MinStripeSize, StripeCount: 1, Replicas: 2, Chains: []ChainID{rc}}, map[TargetID]bool{1: true}, false},
		{"unknown chain", Layout{StripeSize: MinStripeSize, StripeCount: 1, Replicas: 2, Chains: []ChainID{rc + 9}}, map[TargetID]bool{1: true}, true},
		{"no chains (a directory's layout)", Layout{StripeSize: MinStripeSize}, map[TargetID]bool{1: true}, false},
	} {
		if got := LayoutOn(c.l, chains, c.set); got != c.want {
			t.Errorf("%s: LayoutOn = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestJoinLeave: a replica joins as syncing at the end of the write path,
// not past MaxChainMembers nor twice; the last serving replica never
// leaves.
func TestJoinLeave(t *testing.T) {
	c := chain(Serving, Serving) // targets 1, 2
	if !c.Join(5) || c.Version != 2 || len(c.Replicas) != 3 || c.Replicas[2] != (Replica{5, Syncing}) {
		t.Fatalf("Join: %v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Join(5) || c.Join(1) {
		t.Fatalf("a member joined again: %v", c)
	}
	if !c.Join(6) || c.Join(7) {
		t.Fatalf("Join past %d members: %v", MaxChainMembers, c)
	}
	if !c.Leave(1) || c.Leave(1) || c.Version != 4 || !slices.Equal(c.Readers(), []TargetID{2}) {
		t.Fatalf("Leave: %v", c)
	}
	if c.Leave(2) {
		t.Fatalf("the last serving replica left: %v", c)
	}
	if !c.Leave(6) {
		t.Fatalf("a syncing replica could not leave: %v", c)
	}
}

// TestPlanDrain walks a drain of target 1 through its steps: the move
// starts (a new target joins, target 1 goes on serving), waits while the
// new replica syncs, finishes once it serves, and is abandoned if the new
// replica goes offline or target 1 stops draining. At every step the
// chain has at least the serving replicas it had.
func TestPlanDrain(t *testing.T) {
	chains := []Chain{chain(Serving, Serving)} // targets 1 (n1), 2 (n2)
	cands := []Candidate{{ID: 1, Node: "n1", Healthy: false, Free: 1}, {ID: 2, Node: "n2", Healthy: true, Free: 1},
		{ID: 3, Node: "n3", Healthy: true, Free: 1}, {ID: 4, Node: "n2", Healthy: true, Free: 1}}
	draining := map[TargetID]bool{1: true}
	p := PlanDrain(chains, cands, draining, nil, nil, 4)
	if len(p.Start) != 1 || p.Start[0].Old != 1 || p.Start[0].New != 3 || len(p.Finish)+len(p.Abandon) != 0 {
		t.Fatalf("start: %+v", p)
	}
	if PlanDrain(chains, cands, draining, nil, nil, 0).Start != nil {
		t.Fatal("a move started with no sync slot free")
	}
	c := chains[0]
	c.Join(3)
	moves := []DrainMove{{Chain: c.ID, Old: 1, New: 3}}
	if len(c.Readers()) != 2 {
		t.Fatalf("serving replicas while syncing: %v", c)
	}
	if p := PlanDrain([]Chain{c}, cands, draining, moves, nil, 4); len(p.Start)+len(p.Finish)+len(p.Abandon) != 0 {
		t.Fatalf("while syncing: %+v", p)
	}
	synced := c.Clone()
	synced.FinishSync(3, synced.Version)
	p = PlanDrain([]Chain{synced}, cands, draining, moves, nil, 4)
	if len(p.Finish) != 1 || len(p.Start) != 0 {
		t.Fatalf("once synced: %+v", p)
	}
	synced.Leave(1)
	if !slices.Equal(synced.Readers(), []TargetID{2, 3}) {
		t.Fatalf("after the move: %v", synced)
	}
	// The new replica's node dies, or the drain stops: abandoned.
	off := c.Clone()
	off.TakeOffline(3)
	if p := PlanDrain([]Chain{off}, cands, draining, moves, nil, 4); len(p.Abandon) != 1 || len(p.Start) != 0 {
		t.Fatalf("new replica offline: %+v", p)
	}
	if p := PlanDrain([]Chain{c}, cands, map[TargetID]bool{}, moves, nil, 4); len(p.Abandon) != 1 {
		t.Fatalf("drain stopped: %+v", p)
	}
	// A chain already resyncing a replica waits.
	busy := chain(Serving, Serving)
	busy.StartSync(2)
	if p := PlanDrain([]Chain{busy}, cands, draining, nil, nil, 4); len(p.Start) != 0 {
		t.Fatalf("a move started in a chain that is syncing: %+v", p)
	}
}
