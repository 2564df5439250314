package placement

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
)

func chain(states ...ReplicaState) Chain {
	c := Chain{ID: FirstReplicatedChain, Version: 1}
	for i, s := range states {
		c.Replicas = append(c.Replicas, Replica{Target: TargetID(i + 1), State: s})
	}
	return c
}

func TestChainTransitions(t *testing.T) {
	c := chain(Serving, Serving, Serving)
	if !c.TakeOffline(1) || c.Version != 2 {
		t.Fatalf("take head offline: %v", c)
	}
	if h, _ := c.Head(); h != 2 || !slices.Equal(c.Writers(), []TargetID{2, 3}) {
		t.Fatalf("after head offline: %v", c)
	}
	if c.TakeOffline(1) {
		t.Fatalf("second TakeOffline changed the chain: %v", c)
	}
	if !c.TakeOffline(3) || c.TakeOffline(2) {
		t.Fatalf("the last serving replica must stay: %v", c)
	}
	if !slices.Equal(c.Readers(), []TargetID{2}) {
		t.Fatalf("readers %v", c.Readers())
	}
	if !c.StartSync(1) || !slices.Equal(c.Writers(), []TargetID{2, 1}) || !slices.Equal(c.Readers(), []TargetID{2}) {
		t.Fatalf("after StartSync(1): %v", c)
	}
	if next, has, ok := c.Next(2); !ok || !has || next != 1 {
		t.Fatalf("Next(2) = %d %v %v", next, has, ok)
	}
	if p, ok := c.Prev(1); !ok || p != 2 {
		t.Fatalf("Prev(1) = %d %v", p, ok)
	}
	v := c.Version
	if c.FinishSync(1, v-1) {
		t.Fatalf("FinishSync with an old version changed the chain")
	}
	if !c.FinishSync(1, v) || !slices.Equal(c.Readers(), []TargetID{2, 1}) {
		t.Fatalf("after FinishSync: %v", c)
	}
	if tail, _ := c.Tail(); tail != 1 {
		t.Fatalf("tail %d, want 1 (the replica that synced last)", tail)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// A restarted serving replica resyncs, unless it is the only one.
	if !c.StartSync(2) || !slices.Equal(c.Readers(), []TargetID{1}) || c.StartSync(1) {
		t.Fatalf("StartSync of a serving replica: %v", c)
	}
}

func TestChainValidate(t *testing.T) {
	bad := []Chain{
		{ID: 1},
		chain(Syncing, Serving),
		chain(Serving, Offline, Syncing),
		{ID: 1, Replicas: []Replica{{1, Serving}, {1, Serving}}},
		chain(Serving, Serving, Serving, Serving, Serving), // MaxChainMembers is 4
		{ID: 1, Replicas: []Replica{{1, 9}}},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%v: Validate = %v, want invalid", c, err)
		}
	}
}

func TestFormChains(t *testing.T) {
	var all []NodeTarget
	for i := range 6 {
		all = append(all, NodeTarget{ID: TargetID(i + 1), Node: string(rune('a' + i%3))})
	}
	heads := []TargetID{1, 2, 3, 4, 5, 6}
	load := map[TargetID]int{}
	cs, err := FormChains(all, heads, 2, load, FirstReplicatedChain)
	if err != nil {
		t.Fatal(err)
	}
	node := map[TargetID]string{}
	for _, t := range all {
		node[t.ID] = t.Node
	}
	for i, c := range cs {
		if c.ID != FirstReplicatedChain+ChainID(i) || len(c.Replicas) != 2 || c.Replicas[0].Target != heads[i] {
			t.Fatalf("chain %d: %v", i, c)
		}
		if node[c.Replicas[0].Target] == node[c.Replicas[1].Target] {
			t.Fatalf("%v has two replicas on node %s", c, node[c.Replicas[0].Target])
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	for id, n := range load {
		if n != 2 {
			t.Errorf("target %d is in %d chains, want 2 (even spread): %v", id, n, cs)
		}
	}
	if _, err := FormChains(all, heads, 3, map[TargetID]int{}, 1); err != nil {
		t.Fatalf("3 replicas over 3 nodes: %v", err)
	}
	if _, err := FormChains(all[:2], []TargetID{1}, 3, map[TargetID]int{}, 1); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("3 replicas over 2 nodes: %v, want invalid", err)
	}
}

func TestChooseChains(t *testing.T) {
	a, b, c := chain(Serving, Serving), chain(Serving, Offline), chain(Serving, Serving)
	a.ID, b.ID, c.ID = 10, 11, 12
	free := map[TargetID]bool{1: true, 2: true}
	got, err := ChooseChains([]Chain{b, a, c}, free, 2, 0)
	if err != nil || !slices.Equal(got, []ChainID{10, 12}) {
		t.Fatalf("ChooseChains = %v, %v; want the two healthy chains", got, err)
	}
	if got, err := ChooseChains([]Chain{b, a, c}, free, 3, 0); err != nil || len(got) != 3 {
		t.Fatalf("3 of 3 = %v, %v", got, err)
	}
	if got, err := ChooseChains([]Chain{a}, map[TargetID]bool{}, 1, 0); err != nil || got[0] != a.ID {
		t.Fatalf("no free head anywhere: %v, %v; want the full chain (writes fail, not the create)", got, err)
	}
	if _, err := ChooseChains([]Chain{a}, free, 2, 0); !errors.Is(err, errs.ErrNoSpace) {
		t.Fatalf("more chains than exist: %v", err)
	}
}

// TestTopUpChains: a node joins a cluster whose chains FormChains made;
// its targets end in r chains each (one headed by each), every chain's
// replicas are on distinct nodes, and a second call adds nothing.
func TestTopUpChains(t *testing.T) {
	for r := 2; r <= 3; r++ {
		var all []NodeTarget
		for id := TargetID(1); id <= 6; id++ {
			all = append(all, NodeTarget{ID: id, Node: fmt.Sprintf("n%d", (id+1)/2)})
		}
		load := map[TargetID]int{}
		chains, err := FormChains(all, []TargetID{1, 2, 3, 4, 5, 6}, r, load, FirstReplicatedChain)
		if err != nil {
			t.Fatal(err)
		}
		if add := TopUpChains(all, chains, r, FirstReplicatedChain+100); len(add) != 0 {
			t.Fatalf("r=%d: a balanced cluster got %d more chains: %v", r, len(add), add)
		}
		all = append(all, NodeTarget{ID: 7, Node: "n4"}, NodeTarget{ID: 8, Node: "n4"})
		add := TopUpChains(all, chains, r, FirstReplicatedChain+100)
		chains = append(chains, add...)
		node := map[TargetID]string{}
		for _, nt := range all {
			node[nt.ID] = nt.Node
		}
		in, headed := map[TargetID]int{}, map[TargetID]bool{}
		for i, c := range chains {
			if err := c.Validate(); err != nil {
				t.Fatalf("r=%d: chain %v: %v", r, c, err)
			}
			if i > 0 && c.ID == chains[i-1].ID {
				t.Fatalf("r=%d: chain ID %d twice", r, c.ID)
			}
			nodes := map[string]bool{}
			for _, rep := range c.Replicas {
				if nodes[node[rep.Target]] {
					t.Fatalf("r=%d: chain %v has two replicas on node %s", r, c, node[rep.Target])
				}
				nodes[node[rep.Target]] = true
				in[rep.Target]++
			}
			headed[c.Replicas[0].Target] = true
		}
		for _, id := range []TargetID{7, 8} {
			if in[id] < r || !headed[id] {
				t.Errorf("r=%d: target %d in %d chains (headed: %v), want %d and one headed by it", r, id, in[id], headed[id], r)
			}
		}
		if more := TopUpChains(all, chains, r, FirstReplicatedChain+200); len(more) != 0 {
			t.Errorf("r=%d: a second top-up added %v", r, more)
		}
		// Fewer nodes than replicas: nothing.
		if add := TopUpChains(all[:2], nil, r, FirstReplicatedChain); add != nil {
			t.Errorf("r=%d: one node got chains %v", r, add)
		}
	}
}
