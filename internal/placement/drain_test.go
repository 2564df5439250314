package placement

import "testing"

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
