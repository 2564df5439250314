package meta

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestMigrateCheck is the migration record's state machine, without I/O.
func TestMigrateCheck(t *testing.T) {
	const now = int64(1000)
	rec := func(state uint8, deadline int64) *migration {
		return &migration{State: state, Deadline: deadline, New: placement.Layout{Data: 7}}
	}
	for _, c := range []struct {
		name   string
		rec    *migration
		action uint8
		data   uint64
		want   errs.Code // OK: allowed
	}{
		{"begin with none", nil, wire.MigrateBegin, 0, errs.OK},
		{"begin during another", rec(migCopying, 2000), wire.MigrateBegin, 0, errs.Busy},
		{"renew", rec(migCopying, 2000), wire.MigrateRenew, 7, errs.OK},
		{"renew of another migration", rec(migCopying, 2000), wire.MigrateRenew, 8, errs.Stale},
		{"renew with none", nil, wire.MigrateRenew, 7, errs.Stale},
		{"renew past the lease", rec(migCopying, 999), wire.MigrateRenew, 7, errs.Stale},
		{"freeze", rec(migCopying, 2000), wire.MigrateFreeze, 7, errs.OK},
		{"freeze again", rec(migFrozen, 2000), wire.MigrateFreeze, 7, errs.OK},
		{"commit before the freeze", rec(migCopying, 2000), wire.MigrateCommit, 7, errs.Invalid},
		{"commit", rec(migFrozen, 2000), wire.MigrateCommit, 7, errs.OK},
		{"commit past the lease", rec(migFrozen, 999), wire.MigrateCommit, 7, errs.Stale},
		{"commit while aborting", rec(migAborting, 2000), wire.MigrateCommit, 7, errs.Stale},
		{"abort past the lease", rec(migFrozen, 999), wire.MigrateAbort, 7, errs.OK},
		{"abort of another", rec(migFrozen, 2000), wire.MigrateAbort, 8, errs.Stale},
		{"unknown step", rec(migFrozen, 2000), 99, 7, errs.Invalid},
	} {
		err := migrateCheck(c.rec, c.action, c.data, now)
		if got := errs.CodeOf(err); got != c.want {
			t.Errorf("%s: %v (code %v), want %v", c.name, err, got, c.want)
		}
	}
}

func TestMigrationRecordRoundTrip(t *testing.T) {
	m := migration{State: migFrozen, Deadline: 123456789,
		Old: placement.Layout{StripeSize: 1 << 20, StripeCount: 2, Chains: []placement.ChainID{1, 2}},
		New: placement.Layout{StripeSize: 1 << 16, StripeCount: 1, Replicas: 2, Chains: []placement.ChainID{1 << 31}, Data: 99}}
	var got migration
	if err := decodeMigration(m.encode(), &got); err != nil {
		t.Fatal(err)
	}
	if got.State != m.State || got.Deadline != m.Deadline || !sameLayout(got.Old, m.Old) || !sameLayout(got.New, m.New) {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
	for _, bad := range [][]byte{nil, {2, 1}, append([]byte{1, 9}, make([]byte, 10)...)} {
		if err := decodeMigration(bad, &got); errs.CodeOf(err) != errs.Corruption {
			t.Errorf("decode % x: %v, want corruption", bad, err)
		}
	}
}

func migrateStepT(t *testing.T, s *Service, ino uint64, action uint8, data uint64) (wire.MigrateResp, error) {
	t.Helper()
	return s.Migrate(context.Background(), &wire.MigrateReq{Ino: ino, Action: action, Data: data})
}

func garbageLayouts(t *testing.T, s *Service) map[uint64]placement.Layout {
	t.Helper()
	out := map[uint64]placement.Layout{}
	err := s.db.View(context.Background(), func(tx kv.Txn) error {
		p := []byte{pfxGarbage}
		return tx.Scan(p, kv.PrefixEnd(p), 0, func(k, v []byte) bool {
			var l placement.Layout
			if err := decodeLayout(v, &l); err != nil {
				t.Fatal(err)
			}
			out[uint64(k[1])<<56|uint64(k[2])<<48|uint64(k[3])<<40|uint64(k[4])<<32|uint64(k[5])<<24|uint64(k[6])<<16|uint64(k[7])<<8|uint64(k[8])] = l
			return true
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMigrateSteps walks a migration through the service with fake
// targets: begin picks a new layout with its own data ID, freeze fences
// the old chunks, commit switches the layout in one transaction and
// queues the old chunks under the old data ID; aborts thaw and queue the
// copy; a lease that runs out is aborted by the background pass.
func TestMigrateSteps(t *testing.T) {
	ctx := context.Background()
	ft := newFakeTargets(4)
	s := newTestService(t, nil, ft)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	s.now = func() time.Time { return time.Unix(0, clock.Load()) }

	f, err := s.Create(ctx, &wire.CreateReq{Parent: RootIno, Name: "f", Mode: 0o644, Layout: placement.Layout{StripeSize: 1 << 20, StripeCount: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if f, err = s.SetChunks(ctx, f.Ino); err != nil {
		t.Fatal(err)
	}
	old := f.Layout
	begun, err := s.Migrate(ctx, &wire.MigrateReq{Ino: f.Ino, Action: wire.MigrateBegin, Layout: placement.Layout{StripeSize: 1 << 16, StripeCount: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if begun.Done || begun.New.Data == 0 || begun.New.Data == f.Ino || len(begun.New.Chains) != 3 || begun.New.StripeSize != 1<<16 {
		t.Fatalf("begin: %+v", begun)
	}
	if !sameLayout(begun.Old, old) {
		t.Fatalf("begin: old layout %v, want %v", begun.Old, old)
	}
	if _, err := s.Migrate(ctx, &wire.MigrateReq{Ino: f.Ino, Action: wire.MigrateBegin, Layout: placement.Layout{StripeSize: 1 << 16}}); errs.CodeOf(err) != errs.Busy {
		t.Fatalf("second begin: %v, want busy", err)
	}
	if _, err := migrateStepT(t, s, f.Ino, wire.MigrateCommit, begun.New.Data); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("commit before freeze: %v", err)
	}
	if _, err := migrateStepT(t, s, f.Ino, wire.MigrateFreeze, begun.New.Data); err != nil {
		t.Fatal(err)
	}
	if len(ft.fences) != 1 || ft.fences[0].ino != f.Ino || ft.fences[0].mode != wire.FenceFreeze || !slices.Equal(ft.fences[0].slots, []uint32{0}) {
		t.Fatalf("freeze fenced %+v, want the old chunk (ino %d slot 0)", ft.fences, f.Ino)
	}
	if a, _ := s.GetAttr(ctx, f.Ino); !sameLayout(a.Layout, old) {
		t.Fatalf("layout changed before the commit: %v", a.Layout)
	}
	done, err := migrateStepT(t, s, f.Ino, wire.MigrateCommit, begun.New.Data)
	if err != nil || !done.Done {
		t.Fatalf("commit: %+v %v", done, err)
	}
	a, err := s.GetAttr(ctx, f.Ino)
	if err != nil {
		t.Fatal(err)
	}
	if !sameLayout(a.Layout, begun.New) {
		t.Fatalf("after commit the layout is %v, want %v", a.Layout, begun.New)
	}
	if g := garbageLayouts(t, s); !sameLayout(g[f.Ino], old) {
		t.Fatalf("garbage after commit %v: want the old layout under inode %d", g, f.Ino)
	}
	if _, err := migrateStepT(t, s, f.Ino, wire.MigrateCommit, begun.New.Data); errs.CodeOf(err) != errs.Stale {
		t.Fatalf("second commit: %v, want stale", err)
	}
	if err := s.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}

	// A second migration of the migrated file; the unlink of the file
	// afterwards queues the chunks under the current data ID.
	second, err := s.Migrate(ctx, &wire.MigrateReq{Ino: f.Ino, Action: wire.MigrateBegin, Layout: placement.Layout{StripeSize: 1 << 20, StripeCount: 2}})
	if err != nil {
		t.Fatal(err)
	}
	// Abort while copying: the copy is queued, nothing thawed.
	nf := len(ft.fences)
	if _, err := migrateStepT(t, s, f.Ino, wire.MigrateAbort, second.New.Data); err != nil {
		t.Fatal(err)
	}
	if len(ft.fences) != nf {
		t.Fatalf("abort while copying fenced: %+v", ft.fences[nf:])
	}
	if g := garbageLayouts(t, s); !sameLayout(g[second.New.Data], second.New) {
		t.Fatalf("abort: garbage %v lacks the copy under data %d", g, second.New.Data)
	}

	// Abort after the freeze: thaws the migrated layout's chunks.
	third, err := s.Migrate(ctx, &wire.MigrateReq{Ino: f.Ino, Action: wire.MigrateBegin, Layout: placement.Layout{StripeSize: 1 << 20, StripeCount: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrateStepT(t, s, f.Ino, wire.MigrateFreeze, third.New.Data); err != nil {
		t.Fatal(err)
	}
	nf = len(ft.fences)
	// The lease runs out: the background pass aborts it.
	clock.Add(int64(DefaultMigrateLease + migrateGrace + time.Second))
	if err := s.abortExpiredMigrations(ctx); err != nil {
		t.Fatal(err)
	}
	thawed := 0
	for _, fc := range ft.fences[nf:] {
		if fc.mode == wire.FenceThaw && fc.ino == begun.New.Data {
			thawed++
		}
	}
	if thawed != 3 {
		t.Fatalf("expired abort thawed %d chunks of data %d, want 3: %+v", thawed, begun.New.Data, ft.fences[nf:])
	}
	if _, err := migrateStepT(t, s, f.Ino, wire.MigrateCommit, third.New.Data); errs.CodeOf(err) != errs.Stale {
		t.Fatalf("commit after the abort: %v, want stale", err)
	}
	if a, _ := s.GetAttr(ctx, f.Ino); !sameLayout(a.Layout, begun.New) {
		t.Fatalf("after the aborts the layout is %v, want %v", a.Layout, begun.New)
	}
	if err := s.Unlink(ctx, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	if g := garbageLayouts(t, s); !sameLayout(g[begun.New.Data], begun.New) {
		t.Fatalf("unlink of a migrated file queued %v, want its layout under data %d", g, begun.New.Data)
	}

	// A file without chunks takes the new layout at once.
	e := mustCreateInline(t, s, RootIno, "e")
	r, err := s.Migrate(ctx, &wire.MigrateReq{Ino: e.Ino, Action: wire.MigrateBegin, Layout: placement.Layout{StripeSize: 1 << 16, StripeCount: 2}})
	if err != nil || !r.Done || r.New.Data != 0 {
		t.Fatalf("migrate a file without chunks: %+v %v", r, err)
	}
	if a, _ := s.GetAttr(ctx, e.Ino); !sameLayout(a.Layout, r.New) {
		t.Fatalf("layout %v, want %v", a.Layout, r.New)
	}
	d := mustMkdir(t, s, RootIno, "d")
	if _, err := s.Migrate(ctx, &wire.MigrateReq{Ino: d.Ino, Action: wire.MigrateBegin, Layout: placement.Layout{StripeSize: 1 << 16}}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("migrate a directory: %v, want invalid", err)
	}
}
