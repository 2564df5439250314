package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestDrainMakesBeforeBreaking drains a target of a 3-node cluster of
// 2-replica chains through the Manager: a new replica joins each of its
// chains as syncing while it goes on serving (no chain has fewer serving
// replicas at any step, and no extra chains are topped up meanwhile); the
// drained replica leaves in the transaction that makes the new one
// serving, also after a restart of the Manager mid-move; a move whose
// target stops draining is abandoned, its new replica leaving.
func TestDrainMakesBeforeBreaking(t *testing.T) {
	ctx := context.Background()
	db := kv.NewMemory()
	defer db.Close()
	m, err := New(ctx, Options{DB: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i, node := range []string{"a", "b", "c"} {
		addr := fmt.Sprintf("127.0.0.1:%d", i+1)
		resp, err := m.Register(ctx, &wire.RegisterReq{Node: node, Addr: addr, Want: 1})
		if err != nil {
			t.Fatal(err)
		}
		hb := &wire.HeartbeatReq{Node: node, Addr: addr, Incarnation: 1,
			Targets: []wire.TargetStat{{Target: resp.IDs[0], Capacity: 1 << 30, Free: 1 << 30}}}
		if _, err := m.Heartbeat(ctx, hb); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.FormChains(ctx, 2, nil); err != nil {
		t.Fatal(err)
	}
	chains := func() map[placement.ChainID]placement.Chain {
		t.Helper()
		_, cs, err := m.Chains(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[placement.ChainID]placement.Chain{}
		for _, c := range cs {
			out[c.ID] = c
		}
		return out
	}
	before := chains()
	checkServing := func(step string) {
		t.Helper()
		now := chains()
		if len(now) != len(before) {
			t.Fatalf("%s: %d chains, want %d (none topped up while moving)", step, len(now), len(before))
		}
		for id, c := range now {
			if err := c.Validate(); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			was := before[id]
			if got, want := len(c.Readers()), len(was.Readers()); got < want {
				t.Fatalf("%s: chain %v has %d serving replicas, had %d", step, c, got, want)
			}
		}
	}
	const drained = placement.TargetID(1)
	if err := m.SetDraining(ctx, drained, true); err != nil {
		t.Fatal(err)
	}
	if err := m.replaceDraining(ctx); err != nil {
		t.Fatal(err)
	}
	checkServing("after the moves started")
	if err := m.topUpChains(ctx); err != nil {
		t.Fatal(err)
	}
	checkServing("after a top-up while moving")
	var joined []wire.SyncDoneReq
	for _, c := range chains() {
		if _, in := c.State(drained); !in {
			continue
		}
		last := c.Replicas[len(c.Replicas)-1]
		if len(c.Replicas) != 3 || last.State != placement.Syncing {
			t.Fatalf("chain %v: want target %d serving and a new replica syncing", c, drained)
		}
		joined = append(joined, wire.SyncDoneReq{Chain: c.ID, Version: c.Version, Target: last.Target})
	}
	if len(joined) != 2 {
		t.Fatalf("%d chains got a new replica, want the 2 that target %d is in", len(joined), drained)
	}
	// A second pass while they sync changes nothing.
	if err := m.replaceDraining(ctx); err != nil {
		t.Fatal(err)
	}
	checkServing("after a pass while syncing")
	// The metadata service restarts mid-move (a new Manager on the same
	// DB): the moves are in the DB, and the new Manager finishes them.
	m.Close()
	if m, err = New(ctx, Options{DB: db, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.mu.Lock()
	moving := len(m.mu.st.moves)
	m.mu.Unlock()
	if moving != 2 {
		t.Fatalf("after a restart: %d moves known, want 2", moving)
	}
	for _, req := range joined {
		if err := m.SyncDone(ctx, &req); err != nil {
			t.Fatal(err)
		}
		checkServing(fmt.Sprintf("after target %d synced chain %d", req.Target, req.Chain))
	}
	for _, c := range chains() {
		if _, in := c.State(drained); in || len(c.Replicas) != 2 || len(c.Readers()) != 2 {
			t.Fatalf("after the moves: chain %v, want 2 serving replicas, none on target %d", c, drained)
		}
	}
	m.mu.Lock()
	left := len(m.mu.st.moves)
	m.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d move records left after the moves", left)
	}

	// Target 2 drains, then stops draining mid-move: the new replicas
	// leave again.
	if err := m.SetDraining(ctx, 2, true); err != nil {
		t.Fatal(err)
	}
	if err := m.replaceDraining(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.SetDraining(ctx, 2, false); err != nil {
		t.Fatal(err)
	}
	if err := m.replaceDraining(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range chains() {
		if len(c.Replicas) != 2 || len(c.Readers()) != 2 {
			t.Fatalf("after the abandoned moves: chain %v, want its 2 serving replicas only", c)
		}
	}
	m.mu.Lock()
	left = len(m.mu.st.moves)
	m.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d move records left after abandoning", left)
	}
}
