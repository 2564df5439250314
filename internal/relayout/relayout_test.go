package relayout

import (
	"slices"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/placement"
)

func TestSpread(t *testing.T) {
	r := Report{Fills: []Fill{
		{Target: 1, Capacity: 100, Before: 50, Eligible: true},
		{Target: 2, Capacity: 100, Before: 10, Eligible: true},
		{Target: 3, Capacity: 100, Before: 90, Eligible: false}, // draining: not counted
		{Target: 4, Capacity: 0, Before: 5, Eligible: true},     // unknown size: not counted
	}}
	if got := r.Spread(); got < 0.4-1e-9 || got > 0.4+1e-9 {
		t.Errorf("Spread = %v, want 0.4", got)
	}
	if got := (Report{}).Spread(); got != 0 {
		t.Errorf("Spread of nothing = %v", got)
	}
}

func TestPlacementOfAndChainTable(t *testing.T) {
	l := PlacementOf(client.Layout{StripeSize: 1 << 20, StripeCount: 2, Replicas: 1, Chains: []uint32{3, 4}, Data: 9})
	if l.Replicas != 0 || l.Data != 9 || len(l.Chains) != 2 || l.Chains[1] != 4 || l.StripeCount != 2 {
		t.Errorf("PlacementOf = %+v", l)
	}
	ci := &client.ClusterInfo{Chains: []client.ChainInfo{{ID: 1 << 31, Version: 2, Replicas: []client.ReplicaInfo{
		{Target: 1, State: placement.Serving.String()}, {Target: 2, State: placement.Syncing.String()}, {Target: 3, State: "offline"}}}}}
	cs := ChainTable(ci)
	if len(cs) != 1 || cs[0].Version != 2 || cs[0].Replicas[0].State != placement.Serving ||
		cs[0].Replicas[1].State != placement.Syncing || cs[0].Replicas[2].State != placement.Offline {
		t.Errorf("ChainTable = %+v", cs)
	}
}

func TestSlotPools(t *testing.T) {
	plain := placement.Layout{StripeSize: 1 << 20, StripeCount: 2, Chains: []placement.ChainID{1, 2}}
	if got := SlotPools(plain, ""); got != nil {
		t.Errorf("plain file outside pools: %v", got)
	}
	if got := SlotPools(plain, "hdd"); !slices.Equal(got, []string{"hdd", "hdd"}) {
		t.Errorf("plain file in pool hdd: %v", got)
	}
	pfl := placement.Layout{StripeSize: 1 << 16, StripeCount: 3, Chains: []placement.ChainID{1, 2, 3},
		Comps: []placement.Comp{{End: 1 << 20, StripeSize: 1 << 16, StripeCount: 1, Pool: "nvme"}, {StripeSize: 1 << 20, StripeCount: 2}}}
	if got := SlotPools(pfl, ""); !slices.Equal(got, []string{"nvme", "", ""}) {
		t.Errorf("progressive file: %v", got)
	}
	if got := SlotPools(pfl, "hdd"); !slices.Equal(got, []string{"nvme", "hdd", "hdd"}) {
		t.Errorf("progressive file in pool hdd: %v", got)
	}
}
