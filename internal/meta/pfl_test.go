package meta

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/sluice-fs/sluice/internal/cluster"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestProgressiveLayout: a directory's progressive layout (ADR 0021) is
// stored, returned and inherited by subdirectories; a file created below
// it gets each component's chains from the component's pool (every target
// for a count of 0), its slots in component order; bad components and
// unknown pools are refused; an empty file may take one; a migration
// keeps a progressive file's components.
func TestProgressiveLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := kv.OpenPebble(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cm, err := cluster.New(ctx, cluster.Options{DB: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cm.Close() })
	req := &wire.HeartbeatReq{Node: cluster.LocalNode, Addr: "127.0.0.1:1", Incarnation: 1}
	for id := range placement.TargetID(6) {
		if err := cm.RegisterTarget(ctx, id+1, "127.0.0.1:1"); err != nil {
			t.Fatal(err)
		}
		req.Targets = append(req.Targets, wire.TargetStat{Target: id + 1, Capacity: 1 << 40, Free: 1 << 39})
	}
	if _, err := cm.Heartbeat(ctx, req); err != nil {
		t.Fatal(err)
	}
	for name, ts := range map[string][]placement.TargetID{"nvme": {1, 2}, "hdd": {3, 4, 5, 6}} {
		if err := cm.ChangePool(ctx, &wire.PoolChangeReq{Kind: wire.PoolCreate, Name: name, Targets: ts}); err != nil {
			t.Fatal(err)
		}
	}
	s := newTestService(t, db, cm)
	d := mustMkdir(t, s, RootIno, "d")
	pfl := placement.Layout{Comps: []placement.Comp{
		{End: 64 << 20, StripeSize: 1 << 20, StripeCount: 1, Pool: "nvme"},
		{End: 1 << 30, StripeSize: 1 << 20, StripeCount: 2, Pool: "nvme"},
		{StripeSize: 4 << 20, Pool: "hdd"}, // every target of hdd
	}}
	if err := s.SetLayout(ctx, d.Ino, pfl); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetLayout(ctx, d.Ino)
	if err != nil || !slices.Equal(got.Comps, pfl.Comps) || got.StripeSize != 1<<20 {
		t.Fatalf("directory layout %v, %v", got, err)
	}
	sub := mustMkdir(t, s, d.Ino, "sub")
	if got, err := s.GetLayout(ctx, sub.Ino); err != nil || !slices.Equal(got.Comps, pfl.Comps) {
		t.Fatalf("subdirectory layout %v, %v: not inherited", got, err)
	}
	for _, dir := range []uint64{d.Ino, sub.Ino} {
		for i := range 3 {
			a := mustCreate(t, s, dir, "f"+string(rune('a'+i)))
			l := a.Layout
			if err := l.Validate(); err != nil {
				t.Fatalf("file layout %v: %v", l, err)
			}
			if len(l.Comps) != 3 || l.StripeCount != 7 || len(l.Chains) != 7 {
				t.Fatalf("file layout %v: want 1 + 2 + 4 slots", l)
			}
			counts := []uint16{l.Comps[0].StripeCount, l.Comps[1].StripeCount, l.Comps[2].StripeCount}
			if !slices.Equal(counts, []uint16{1, 2, 4}) {
				t.Errorf("component counts %v, want [1 2 4]", counts)
			}
			for slot, ch := range l.Chains {
				want := []placement.ChainID{1, 2}
				if slot >= 3 {
					want = []placement.ChainID{3, 4, 5, 6}
				}
				if !slices.Contains(want, ch) {
					t.Errorf("%v: slot %d on chain %d, not in its pool %v", l, slot, ch, want)
				}
			}
		}
	}
	f := mustCreate(t, s, d.Ino, "g")
	for _, c := range []struct {
		name string
		ino  uint64
		l    placement.Layout
		want error
	}{
		{"one component", d.Ino, placement.Layout{Comps: pfl.Comps[2:]}, errs.ErrInvalid},
		{"too many targets", d.Ino, placement.Layout{Comps: []placement.Comp{{End: 1 << 20, StripeSize: 1 << 20, StripeCount: 3, Pool: "nvme"}, {StripeSize: 1 << 20}}}, errs.ErrInvalid},
	} {
		if err := s.SetLayout(ctx, c.ino, c.l); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if err := s.SetLayout(ctx, d.Ino, placement.Layout{Comps: []placement.Comp{{End: 1 << 20, StripeSize: 1 << 20, Pool: "nope"}, {StripeSize: 1 << 20}}}); err == nil {
		t.Error("a component of an unknown pool was accepted")
	}
	// An empty file may take a progressive layout of its own.
	e := mustCreateInline(t, s, d.Ino, "empty")
	if err := s.SetLayout(ctx, e.Ino, placement.Layout{StripeSize: 1 << 20, Comps: pfl.Comps}); err != nil {
		t.Fatalf("an empty file's own progressive layout: %v", err)
	}
	if l, err := s.GetLayout(ctx, e.Ino); err != nil || len(l.Comps) != 3 || len(l.Chains) != 7 {
		t.Errorf("the empty file's layout %v, %v", l, err)
	}
	// A migration keeps the components (chains chosen anew per component).
	fl, err := s.GetLayout(ctx, f.Ino)
	if err != nil {
		t.Fatal(err)
	}
	want := fl
	want.Chains = nil
	r, err := s.Migrate(ctx, &wire.MigrateReq{Ino: f.Ino, Action: wire.MigrateBegin, Layout: want})
	if err != nil {
		t.Fatalf("migration of a progressive file: %v", err)
	}
	if !slices.Equal(r.New.Comps, fl.Comps) || len(r.New.Chains) != 7 || r.New.Data == 0 {
		t.Errorf("migration's new layout %v, want the components of %v", r.New, fl)
	}
	if _, err := s.Migrate(ctx, &wire.MigrateReq{Ino: f.Ino, Action: wire.MigrateAbort, Data: r.New.Data}); err != nil {
		t.Fatal(err)
	}
}
