package placement

import (
	"slices"
	"testing"
)

func TestPlanReplacements(t *testing.T) {
	t.Parallel()
	// Nodes a, b, c, d with two targets each: a=1,2 b=3,4 c=5,6 d=7,8.
	targets := func(down ...string) []Candidate {
		var out []Candidate
		for i, n := range []string{"a", "a", "b", "b", "c", "c", "d", "d"} {
			out = append(out, Candidate{ID: TargetID(i + 1), Node: n, Healthy: !slices.Contains(down, n), Free: 100})
		}
		return out
	}
	chain := func(id ChainID, rs ...Replica) Chain { return Chain{ID: id, Version: 3, Replicas: rs} }
	srv := func(t TargetID) Replica { return Replica{Target: t, State: Serving} }
	off := func(t TargetID) Replica { return Replica{Target: t, State: Offline} }
	deadNode := func(nodes ...string) func(TargetID) bool {
		return func(t TargetID) bool {
			n := []string{"", "a", "a", "b", "b", "c", "c", "d", "d"}[t]
			return slices.Contains(nodes, n)
		}
	}
	const c1, c2, c3 = FirstReplicatedChain, FirstReplicatedChain + 1, FirstReplicatedChain + 2
	for _, tc := range []struct {
		name    string
		chains  []Chain
		targets []Candidate
		dead    func(TargetID) bool
		pools   [][]TargetID
		max     int
		want    []Replacement
	}{
		{
			name:    "node not dead long enough: nothing",
			chains:  []Chain{chain(c1, srv(1), off(3))},
			targets: targets("b"), dead: deadNode(),
		},
		{
			name:    "offline replica on a dead node: least loaded target of a node not in the chain",
			chains:  []Chain{chain(c1, srv(1), off(3)), chain(c2, srv(5), srv(2))},
			targets: targets("b"), dead: deadNode("b"),
			// nodes a (1) and b (dead) excluded; 5 and 6 on c, 7 and 8 on d: 6, 7, 8 carry no chain, lowest is 6
			want: []Replacement{{Chain: c1, Version: 3, Old: 3, New: 6}},
		},
		{
			name:    "serving replicas are never replaced",
			chains:  []Chain{chain(c1, srv(1), srv(3))},
			targets: targets("b"), dead: deadNode("b"),
		},
		{
			name:    "a chain inside a pool stays inside it",
			chains:  []Chain{chain(c1, srv(1), off(3))},
			targets: targets("b"), dead: deadNode("b"),
			pools: [][]TargetID{{1, 3, 8}, {1, 2, 3, 4, 5, 6, 7, 8}},
			want:  []Replacement{{Chain: c1, Version: 3, Old: 3, New: 8}},
		},
		{
			name:    "no eligible target: left degraded",
			chains:  []Chain{chain(c1, srv(1), off(3))},
			targets: targets("b", "c", "d"), dead: deadNode("b"),
		},
		{
			name:    "full targets are skipped; at most max; load spreads",
			chains:  []Chain{chain(c3, srv(2), off(4)), chain(c1, srv(1), off(3)), chain(c2, srv(5), off(4))},
			targets: func() []Candidate { ts := targets("b"); ts[5].Free = 0; return ts }(), dead: deadNode("b"),
			max: 2,
			// c1 (ID order first): 6 is full, 7 free and unloaded -> 7; c2: node c holds 5, so 7 (now loaded) vs 8 -> 8
			want: []Replacement{{Chain: c1, Version: 3, Old: 3, New: 7}, {Chain: c2, Version: 3, Old: 4, New: 8}},
		},
	} {
		got := PlanReplacements(tc.chains, tc.targets, DeadReplica(tc.dead), tc.pools, tc.max)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestChainReplace(t *testing.T) {
	t.Parallel()
	c := Chain{ID: FirstReplicatedChain, Version: 5, Replicas: []Replica{{1, Serving}, {2, Offline}}}
	if c.Replace(1, 9) || c.Replace(2, 1) || c.Replace(7, 9) {
		t.Fatal("replaced a serving replica, by a member, or a non-member")
	}
	if !c.Replace(2, 9) {
		t.Fatal("offline replica not replaced")
	}
	want := []Replica{{1, Serving}, {9, Syncing}}
	if !slices.Equal(c.Replicas, want) || c.Version != 6 {
		t.Fatalf("after Replace: %v v%d, want %v v6", c.Replicas, c.Version, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	c := func(id ChainID, rs ...Replica) Chain { return Chain{ID: id, Replicas: rs} }
	chains := []Chain{
		c(FirstReplicatedChain, Replica{1, Serving}, Replica{3, Offline}),   // 1 down: lost
		c(FirstReplicatedChain+1, Replica{2, Serving}, Replica{1, Offline}), // fine
		c(FirstReplicatedChain+2, Replica{3, Serving}, Replica{4, Syncing}), // 3 down, 4 not serving: lost
		c(FirstReplicatedChain+3, Replica{4, Serving}, Replica{3, Serving}), // one serving replica up
	}
	down := map[TargetID]bool{1: true, 3: true}
	got := Unavailable(chains, []TargetID{1, 2, 3, 4}, func(t TargetID) bool { return !down[t] })
	want := []ChainID{1, 3, FirstReplicatedChain, FirstReplicatedChain + 2}
	if !slices.Equal(got, want) {
		t.Fatalf("Unavailable = %v, want %v", got, want)
	}
}

// TestPlanDrainingReplicas: a serving replica on a draining target moves
// to a target of another node, never to a draining target; a chain that is
// syncing a replica waits. Replace no longer takes a serving replica out.
func TestPlanDrainingReplicas(t *testing.T) {
	c1 := Chain{ID: FirstReplicatedChain, Version: 3, Replicas: []Replica{{Target: 1, State: Serving}, {Target: 3, State: Serving}}}
	busy := Chain{ID: FirstReplicatedChain + 1, Version: 1, Replicas: []Replica{{Target: 1, State: Serving}, {Target: 5, State: Syncing}}}
	targets := []Candidate{
		{ID: 1, Node: "a", Healthy: true, Free: 1},
		{ID: 2, Node: "a", Healthy: false, Free: 1}, // draining too: not a candidate
		{ID: 3, Node: "b", Healthy: true, Free: 1},
		{ID: 4, Node: "c", Healthy: true, Free: 1},
		{ID: 5, Node: "c", Healthy: true, Free: 1},
	}
	draining := map[TargetID]bool{1: true, 2: true}
	got := PlanDrain([]Chain{c1, busy}, targets, draining, nil, nil, 4).Start
	want := []Replacement{{Chain: c1.ID, Version: 3, Old: 1, New: 4}}
	if !slices.Equal(got, want) {
		t.Fatalf("plan %v, want %v (the chain that is syncing waits)", got, want)
	}
	c := c1.Clone()
	if c.Replace(1, 4) {
		t.Fatalf("Replace took serving replica 1 out: %v", c)
	}
}
