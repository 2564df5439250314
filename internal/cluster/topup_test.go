package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/placement"
)

// TestTopUps: in a cluster of three nodes with 2-replica chains, a fourth
// node's targets get two chains each; a draining target, a removed one and
// one whose node is silent get none; a pool with 2-replica chains gets
// chains for its new member inside the pool; a state with nothing missing
// gets nothing.
func TestTopUps(t *testing.T) {
	now := time.Unix(1000, 0)
	r := &Manager{hbLimit: 10 * time.Second}
	st := clusterState{targets: map[placement.TargetID]targetRecord{}, nodes: map[string]nodeRecord{},
		chains: map[placement.ChainID]placement.Chain{}, pools: map[string][]placement.TargetID{},
		draining: map[placement.TargetID]bool{}, removed: map[placement.TargetID]bool{}}
	var first []placement.NodeTarget
	for id := placement.TargetID(1); id <= 6; id++ {
		node := fmt.Sprintf("n%d", (id+1)/2)
		st.targets[id] = targetRecord{Node: node}
		st.nodes[node] = nodeRecord{LastSeen: now.UnixNano()}
		first = append(first, placement.NodeTarget{ID: id, Node: node})
	}
	cs, err := placement.FormChains(first, []placement.TargetID{1, 2, 3, 4, 5, 6}, 2, map[placement.TargetID]int{}, placement.FirstReplicatedChain)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		st.chains[c.ID] = c
	}
	if add := r.topUps(st, now, 100); len(add) != 0 {
		t.Fatalf("a balanced cluster: %v", add)
	}
	// Node n4 joins with targets 7-10: 9 drains, 10 is removed; node n5
	// (target 11) is silent.
	for id := placement.TargetID(7); id <= 10; id++ {
		st.targets[id] = targetRecord{Node: "n4"}
	}
	st.nodes["n4"] = nodeRecord{LastSeen: now.UnixNano()}
	st.draining[9], st.removed[10] = true, true
	st.targets[11] = targetRecord{Node: "n5"}
	st.nodes["n5"] = nodeRecord{LastSeen: now.Add(-time.Minute).UnixNano()}
	add := r.topUps(st, now, placement.FirstReplicatedChain+100)
	in := map[placement.TargetID]int{}
	for i, c := range add {
		if c.ID != placement.FirstReplicatedChain+100+placement.ChainID(i) {
			t.Errorf("chain %d has ID %d", i, c.ID)
		}
		for _, rep := range c.Replicas {
			in[rep.Target]++
		}
	}
	if in[7] != 2 || in[8] != 2 || in[9] != 0 || in[10] != 0 || in[11] != 0 {
		t.Fatalf("new chains per target %v, want 2 for 7 and 8 and none for 9-11: %v", in, add)
	}
	for _, c := range add {
		st.chains[c.ID] = c
	}
	if more := r.topUps(st, now, placement.FirstReplicatedChain+200); len(more) != 0 {
		t.Fatalf("after the top-up: %v", more)
	}
	// A pool of targets 1, 3 and 5 (nodes n1-n3) with a chain inside it;
	// target 8 joins the pool.
	st.pools["p"] = []placement.TargetID{1, 3, 5, 8}
	pc := placement.Chain{ID: placement.FirstReplicatedChain + 300, Version: 1,
		Replicas: []placement.Replica{{Target: 1, State: placement.Serving}, {Target: 3, State: placement.Serving}}}
	st.chains[pc.ID] = pc
	add = r.topUps(st, now, placement.FirstReplicatedChain+400)
	if len(add) == 0 {
		t.Fatal("the pool's members got no chains inside it")
	}
	for _, c := range add {
		for _, rep := range c.Replicas {
			if rep.Target != 1 && rep.Target != 3 && rep.Target != 5 && rep.Target != 8 {
				t.Errorf("pool chain %v has a replica outside the pool", c)
			}
		}
	}
}
