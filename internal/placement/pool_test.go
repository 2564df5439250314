package placement

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
)

func TestValidPoolName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"nvme", true}, {"hdd-2", true}, {"a.b_c", true}, {"0", true},
		{"", false}, {"NVMe", false}, {"-x", false}, {"a b", false}, {"a/b", false},
		{string(make([]byte, MaxPoolName+1)), false},
	} {
		err := ValidPoolName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidPoolName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("ValidPoolName(%q): %v is not errs.Invalid", tc.name, err)
		}
	}
}

func TestPoolTargetsAndChains(t *testing.T) {
	t.Parallel()
	ts := []TargetInfo{{ID: 1, Healthy: true, Free: 1}, {ID: 2, Healthy: true, Free: 1}, {ID: 3, Healthy: true, Free: 1}, {ID: 4}}
	ch := func(id ChainID, targets ...TargetID) Chain {
		c := Chain{ID: id}
		for _, t := range targets {
			c.Replicas = append(c.Replicas, Replica{Target: t})
		}
		return c
	}
	chains := []Chain{ch(1<<31, 1, 2), ch(1<<31+1, 2, 3), ch(1<<31+2, 3, 1), ch(1<<31+3, 4, 1)}
	for _, tc := range []struct {
		members    []TargetID
		wantT      []TargetID
		wantChains []ChainID
	}{
		{nil, nil, nil},
		{[]TargetID{1, 2}, []TargetID{1, 2}, []ChainID{1 << 31}},
		{[]TargetID{1, 2, 3}, []TargetID{1, 2, 3}, []ChainID{1 << 31, 1<<31 + 1, 1<<31 + 2}},
		{[]TargetID{4, 9}, []TargetID{4}, nil},
		{[]TargetID{1, 4}, []TargetID{1, 4}, []ChainID{1<<31 + 3}},
	} {
		var gotT []TargetID
		for _, x := range PoolTargets(ts, tc.members) {
			gotT = append(gotT, x.ID)
		}
		if !slices.Equal(gotT, tc.wantT) {
			t.Errorf("PoolTargets(%v) = %v, want %v", tc.members, gotT, tc.wantT)
		}
		var gotC []ChainID
		for _, c := range PoolChains(chains, tc.members) {
			gotC = append(gotC, c.ID)
		}
		if !slices.Equal(gotC, tc.wantChains) {
			t.Errorf("PoolChains(%v) = %v, want %v", tc.members, gotC, tc.wantChains)
		}
	}
}

func TestChooseInPool(t *testing.T) {
	t.Parallel()
	// Placement inside a pool never leaves it, whatever the seed.
	ts := []TargetInfo{{ID: 1, Healthy: true, Free: 9}, {ID: 2, Healthy: true, Free: 9}, {ID: 3, Healthy: true, Free: 9}, {ID: 4, Healthy: true, Free: 9}}
	pool := []TargetID{2, 4}
	for seed := range uint64(8) {
		got, err := Choose(PoolTargets(ts, pool), 2, seed)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range got {
			if !slices.Contains(pool, id) {
				t.Fatalf("seed %d: chose target %d outside pool %v", seed, id, pool)
			}
		}
	}
	if _, err := Choose(PoolTargets(ts, pool), 3, 0); err == nil {
		t.Fatal("3 targets from a pool of 2: no error")
	}
}

func TestChangePool(t *testing.T) {
	t.Parallel()
	known := func(t TargetID) bool { return t >= 1 && t <= 5 }
	for _, tc := range []struct {
		members, targets []TargetID
		add              bool
		want             []TargetID
		code             errs.Code
	}{
		{nil, []TargetID{3, 1}, true, []TargetID{1, 3}, 0},
		{[]TargetID{1, 3}, []TargetID{2}, true, []TargetID{1, 2, 3}, 0},
		{[]TargetID{1, 3}, []TargetID{3}, true, nil, errs.Invalid},
		{[]TargetID{1, 3}, []TargetID{7}, true, nil, errs.NotFound},
		{[]TargetID{1, 3}, []TargetID{3}, false, []TargetID{1}, 0},
		{[]TargetID{1, 3}, []TargetID{2}, false, nil, errs.Invalid},
		{[]TargetID{1, 3}, []TargetID{1, 1}, false, nil, errs.Invalid},
	} {
		got, err := ChangePool(tc.members, tc.targets, tc.add, known)
		if tc.code != 0 {
			if errs.CodeOf(err) != tc.code {
				t.Errorf("ChangePool(%v, %v, add=%v) = %v, %v; want error code %v", tc.members, tc.targets, tc.add, got, err, tc.code)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ChangePool(%v, %v, add=%v) = %v, %v; want %v", tc.members, tc.targets, tc.add, got, err, tc.want)
		}
	}
}
