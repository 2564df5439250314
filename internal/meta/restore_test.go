package meta

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestRestoreClaim: who gets a released file's restore lease (ADR 0016),
// and under which data ID its holder writes (ADR 0023): a fresh one with
// each grant, kept by renewals.
func TestRestoreClaim(t *testing.T) {
	t.Parallel()
	rel := testRecord(9, 1<<20, 1)
	rel.State = wire.HsmReleased
	arch := rel
	arch.State = wire.HsmArchived
	const now = int64(1e12)
	const fresh = 77
	live := restoreLease{Owner: 1, Gen: 9, Epoch: 1, Expires: now + 5e9, Data: 50}
	expired := restoreLease{Owner: 1, Gen: 9, Epoch: 1, Expires: now, Data: 50}
	dropped := restoreLease{Gen: 9, Epoch: 1}
	older := restoreLease{Owner: 1, Gen: 3, Epoch: 4, Expires: now + 5e9, Data: 30}
	ask := func(owner uint64) *wire.HsmClaimReq {
		return &wire.HsmClaimReq{Gen: 9, Owner: owner, LeaseMs: 1000}
	}
	tests := []struct {
		name      string
		rec       wire.HsmRecord
		cur       restoreLease
		req       *wire.HsmClaimReq
		wantOwner uint64
		wantEpoch uint64
		wantExp   int64
		wantData  uint64
		wantErr   errs.Code
	}{
		{"first claim", rel, restoreLease{}, ask(2), 2, 1, now + 1e9, fresh, errs.OK},
		{"held by another", rel, live, ask(2), 1, 1, live.Expires, 50, errs.OK},
		{"renewed by holder", rel, live, ask(1), 1, 1, now + 1e9, 50, errs.OK},
		{"expired: taken over", rel, expired, ask(2), 2, 2, now + 1e9, fresh, errs.OK},
		{"expired, nobody took it: holder renews", rel, expired, ask(1), 1, 1, now + 1e9, 50, errs.OK},
		{"after a drop", rel, dropped, ask(2), 2, 2, now + 1e9, fresh, errs.OK},
		{"lease of an older copy", rel, older, ask(2), 2, 1, now + 1e9, fresh, errs.OK},
		{"not released: nothing to restore", arch, restoreLease{}, ask(2), 0, 0, 0, 0, errs.OK},
		{"other generation", rel, restoreLease{}, &wire.HsmClaimReq{Gen: 8, Owner: 2}, 0, 0, 0, 0, errs.Stale},
		{"no owner", rel, restoreLease{}, &wire.HsmClaimReq{Gen: 9}, 0, 0, 0, 0, errs.Invalid},
		{"lease clamped up", rel, restoreLease{}, &wire.HsmClaimReq{Owner: 2}, 2, 1, now + minRestoreLease*1e6, fresh, errs.OK},
		{"drop by holder", rel, live, &wire.HsmClaimReq{Gen: 9, Owner: 1, Drop: true}, 0, 1, 0, 0, errs.OK},
		{"drop by another", rel, live, &wire.HsmClaimReq{Gen: 9, Owner: 2, Drop: true}, 1, 1, live.Expires, 50, errs.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, err := restoreClaim(tt.rec, tt.cur, tt.req, now, fresh)
			if tt.wantErr != errs.OK {
				if errs.CodeOf(err) != tt.wantErr {
					t.Fatalf("err = %v, want class %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if next.Owner != tt.wantOwner || next.Epoch != tt.wantEpoch || next.Expires != tt.wantExp || next.Data != tt.wantData {
				t.Errorf("lease = %+v, want owner %d epoch %d expires %d data %d", next, tt.wantOwner, tt.wantEpoch, tt.wantExp, tt.wantData)
			}
			// Without a data ID at hand, a grant asks for one and
			// nothing else does.
			_, err = restoreClaim(tt.rec, tt.cur, tt.req, now, 0)
			if grant := tt.wantData == fresh; grant != errors.Is(err, errNeedDataID) {
				t.Errorf("without a data ID: %v; grant %v", err, grant)
			}
		})
	}
}

func TestRestoreDone(t *testing.T) {
	t.Parallel()
	rel := testRecord(9, 1<<20, 1)
	rel.State = wire.HsmReleased
	arch := rel
	arch.State = wire.HsmArchived
	held := restoreLease{Owner: 1, Gen: 9, Epoch: 1, Expires: 5}
	for _, tt := range []struct {
		name  string
		rec   wire.HsmRecord
		cur   restoreLease
		owner uint64
		ok    bool
	}{
		{"holder", rel, held, 1, true},
		{"holder of an expired lease nobody took", rel, restoreLease{Owner: 1, Gen: 9, Expires: 0}, 1, true},
		{"taken over", rel, restoreLease{Owner: 2, Gen: 9, Epoch: 2}, 1, false},
		{"no lease", rel, restoreLease{}, 1, false},
		{"lease of an older copy", rel, restoreLease{Owner: 1, Gen: 3}, 1, false},
		{"restored already", arch, restoreLease{}, 1, true},
	} {
		err := restoreDone(tt.rec, tt.cur, tt.owner)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && errs.CodeOf(err) != errs.Stale {
			t.Errorf("%s: %v, want class stale", tt.name, err)
		}
	}
}

// TestHsmClaimService: the lease lives in the HSM record of a released
// file, is granted at once (with a data ID of its own: the chunks the
// release queued for removal are not the ones the restore writes), is
// refused to a second client, taken over once expired (the chunks written
// under the lost lease's data ID are queued for removal), and goes with
// the restore's commit, which only its holder may make and which moves
// the file to the holder's data ID.
func TestHsmClaimService(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var skew atomic.Int64 // the service's clock is moved forward by hand
	s, f := archivedFile(t, Options{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }}, 3<<20)
	claim := func(owner uint64, ms uint32) (wire.HsmClaim, error) {
		return s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: f.Ino, Gen: 5, Owner: owner, LeaseMs: ms})
	}
	if c, err := claim(1, 60000); err != nil || c.Owner != 0 || c.State != wire.HsmArchived {
		t.Fatalf("claim of an archived file: %+v, %v; want no lease", c, err)
	}
	releaseFile(t, s, f.Ino)
	old := dataIDOf(t, s, f.Ino)
	first, err := s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: f.Ino, Gen: 5, Owner: 1, LeaseMs: 60000, Full: true})
	if err != nil || first.Owner != 1 || first.Epoch != 1 || first.LeftMs == 0 || first.Full == nil {
		t.Fatalf("first claim: %+v, %v", first, err)
	}
	data1 := first.Full.Data
	if data1 == 0 || data1 == old || data1 == f.Ino {
		t.Fatalf("first claim's data ID %d; want a fresh one (the file's is %d)", data1, old)
	}
	if c, err := claim(2, 60000); err != nil || c.Owner != 1 || c.Full != nil {
		t.Fatalf("second client's claim: %+v, %v; want holder 1, nothing more", c, err)
	}
	// A claim asking for everything (gen 0: any copy) answers with the
	// HSM record and the attributes, as OpHsmGet and OpGetAttr would.
	full, err := s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: f.Ino, Owner: 2, LeaseMs: 60000, Full: true})
	if err != nil || full.Owner != 1 || full.Full == nil || full.Full.Data != 0 {
		t.Fatalf("full claim: %+v, %v; want holder 1 and the record, no data ID", full, err)
	}
	wantRec, err := s.HsmGet(ctx, f.Ino)
	if err != nil {
		t.Fatal(err)
	}
	wantAttr, err := s.GetAttr(ctx, f.Ino)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(full.Full.Record, wantRec) || !reflect.DeepEqual(full.Full.Attr, wantAttr) {
		t.Fatalf("full claim: record %+v attr %+v; want %+v and %+v", full.Full.Record, full.Full.Attr, wantRec, wantAttr)
	}
	// The lease survives a release repeated meanwhile.
	releaseFile(t, s, f.Ino)
	if a, err := s.GetAttr(ctx, f.Ino); err != nil || a.Flags&wire.AttrReleased == 0 {
		t.Fatalf("attributes with a lease: %+v, %v", a, err)
	}
	_, err = s.HsmRestored(ctx, &wire.HsmClaimReq{Ino: f.Ino, Gen: 5, Owner: 2})
	wantCode(t, "commit by a non-holder", err, errs.Stale)
	// Holder 1's lease expires (the clock jumps an hour): 2 takes over.
	skew.Store(int64(time.Hour))
	c, err := s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: f.Ino, Gen: 5, Owner: 2, LeaseMs: 60000, Full: true})
	if err != nil || c.Owner != 2 || c.Epoch != 2 || c.Full == nil || c.Full.Data == 0 || c.Full.Data == data1 {
		t.Fatalf("takeover: %+v, %v; want a data ID other than %d", c, err, data1)
	}
	data2 := c.Full.Data
	if !garbageQueued(t, s, data1) {
		t.Errorf("the chunks of the lease taken over (data %d) are not queued for removal", data1)
	}
	_, err = s.HsmRestored(ctx, &wire.HsmClaimReq{Ino: f.Ino, Gen: 5, Owner: 1})
	wantCode(t, "commit by the holder taken over", err, errs.Stale)
	r, err := s.HsmRestored(ctx, &wire.HsmClaimReq{Ino: f.Ino, Gen: 5, Owner: 2})
	if err != nil || r.State != wire.HsmArchived {
		t.Fatalf("commit by the new holder: %s, %v", wire.HsmStateName(r.State), err)
	}
	if got := dataIDOf(t, s, f.Ino); got != data2 {
		t.Fatalf("after the restore the file's data ID is %d; want the holder's, %d", got, data2)
	}
	// Two leases granted (1's, then 2's takeover), one restore of 3 MiB;
	// renewals, refusals and the refused commit are not counted.
	if got, want := s.RestoreTotals(), (RestoreTotals{Leases: 2, Takeovers: 1, Restored: 1, RestoredBytes: 3 << 20}); got != want {
		t.Errorf("restore totals %+v, want %+v", got, want)
	}
	if c, err := claim(3, 60000); err != nil || c.Owner != 0 || c.State != wire.HsmArchived {
		t.Fatalf("claim after the restore: %+v, %v; want none", c, err)
	}
	// A write now marks it dirty, as for any archived file.
	if _, err := s.CommitWrite(ctx, f.Ino, 10, 8); err != nil {
		t.Fatal(err)
	}
	if r, err := s.HsmGet(ctx, f.Ino); err != nil || r.State != wire.HsmDirty {
		t.Fatalf("after a write: %s, %v", wire.HsmStateName(r.State), err)
	}
}

// TestHsmOnTruncate: a released file cut to size 0 becomes dirty without
// a restore, unless a restore holds its lease; every other cut is a write
// (hsmOnWrite).
func TestHsmOnTruncate(t *testing.T) {
	t.Parallel()
	rel := testRecord(9, 1<<20, 1)
	rel.State = wire.HsmReleased
	arch := rel
	arch.State = wire.HsmArchived
	leased := restoreLease{Owner: 3, Gen: 9, Epoch: 1, Expires: 1}
	dropped := restoreLease{Gen: 9, Epoch: 1}
	tests := []struct {
		name    string
		rec     wire.HsmRecord
		lease   restoreLease
		size    uint64
		want    uint8
		wantErr errs.Code
	}{
		{"released, cut to 0", rel, restoreLease{}, 0, wire.HsmDirty, errs.OK},
		{"released, cut to 0 after a dropped lease", rel, dropped, 0, wire.HsmDirty, errs.OK},
		{"released, cut to 0 while a restore holds the lease", rel, leased, 0, 0, errs.Busy},
		{"released, cut to 1", rel, restoreLease{}, 1, 0, errs.Busy},
		{"archived, cut to 0", arch, restoreLease{}, 0, wire.HsmDirty, errs.OK},
		{"resident, cut to 0", wire.HsmRecord{}, restoreLease{}, 0, wire.HsmResident, errs.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, err := hsmOnTruncate(tt.rec, tt.lease, tt.size)
			if tt.wantErr != errs.OK {
				if errs.CodeOf(err) != tt.wantErr {
					t.Fatalf("err = %v, want class %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || next.State != tt.want {
				t.Fatalf("state %s, %v; want %s", wire.HsmStateName(next.State), err, wire.HsmStateName(tt.want))
			}
			if next.Gen != tt.rec.Gen || next.Key != tt.rec.Key {
				t.Errorf("the copy's record changed: %+v", next)
			}
		})
	}
}

// TestCutReleasedToZero: the service empties a released file cut to size
// 0 and makes it dirty, while no restore holds its lease, moving it to a
// fresh data ID (its old chunks are frozen and queued), and counts it.
func TestCutReleasedToZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, f := archivedFile(t, Options{}, 2<<20)
	var err error
	releaseFile(t, s, f.Ino)
	old := dataIDOf(t, s, f.Ino)
	cut := func() (wire.Attr, error) {
		return s.SetAttr(ctx, &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetSize, Size: 0})
	}
	if err := s.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: f.Ino, Owner: 9, LeaseMs: 60000}); err != nil {
		t.Fatal(err)
	}
	_, err = cut()
	wantCode(t, "cut while a restore holds the lease", err, errs.Busy)
	if _, err := s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: f.Ino, Owner: 9, Drop: true}); err != nil {
		t.Fatal(err)
	}
	got, err := cut()
	if err != nil || got.Size != 0 || got.Flags&wire.AttrReleased != 0 {
		t.Fatalf("cut to 0: %+v, %v; want an empty file, not released", got, err)
	}
	if r, err := s.HsmGet(ctx, f.Ino); err != nil || r.State != wire.HsmDirty || r.Gen != 5 {
		t.Fatalf("after the cut: %s gen %d, %v; want dirty, the copy's record kept", wire.HsmStateName(r.State), r.Gen, err)
	}
	if d := dataIDOf(t, s, f.Ino); d == old || d == 0 || !garbageQueued(t, s, old) {
		t.Errorf("after the cut the data ID is %d (was %d; old one queued %v); want a fresh one, the old queued", d, old, garbageQueued(t, s, old))
	}
	if n := s.RestoreTotals().CutToZero; n != 1 {
		t.Errorf("cuts to zero counted: %d, want 1", n)
	}
}

// archivedFile starts a service with opts (its own database and 4 fake
// targets), a tier backend "b" and a file "f" of size bytes archived as
// copy generation 5.
func archivedFile(t *testing.T, opts Options, size uint64) (*Service, wire.Attr) {
	t.Helper()
	ctx := context.Background()
	opts.DB, opts.Targets = openTestDB(t), newFakeTargets(4)
	s, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	addTestBackend(t, s)
	f := mustCreate(t, s, RootIno, "f")
	a, err := s.CommitWrite(ctx, f.Ino, size, 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: f.Ino, Action: wire.HsmActArchived, Record: testRecord(5, a.Size, a.Mtime)}); err != nil {
		t.Fatal(err)
	}
	return s, a
}

// releaseFile releases archived file ino as a client does: freeze, then
// commit (the fake targets hold no chunks to compare).
func releaseFile(t *testing.T, s *Service, ino uint64) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: ino, Action: wire.HsmActFreeze}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: ino, Action: wire.HsmActRelease}); err != nil {
		t.Fatal(err)
	}
}

// dataIDOf returns file ino's data ID.
func dataIDOf(t *testing.T, s *Service, ino uint64) uint64 {
	t.Helper()
	l, err := s.GetLayout(context.Background(), ino)
	if err != nil {
		t.Fatal(err)
	}
	return l.DataID(ino)
}

// garbageQueued reports whether the chunks of data ID data are queued for
// removal.
func garbageQueued(t *testing.T, s *Service, data uint64) bool {
	t.Helper()
	queued := false
	err := s.db.View(context.Background(), func(tx kv.Txn) error {
		_, err := tx.Get(garbageKey(data))
		queued = err == nil
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return queued
}

// TestReleaseFences: a release commits only after a freeze of the file's
// chunks for the same copy (ADR 0023); a write committed meanwhile makes
// the file dirty and the commit is refused; the client's thaw, or the
// background pass once the freeze's lease ran out, thaws the chunks; a
// migration waits for the release; and the fences stay after the commit.
func TestReleaseFences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var skew atomic.Int64
	s, f := archivedFile(t, Options{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }}, 3<<20)
	ft := s.targets.(*fakeTargets)
	fences := func(mode uint8) int {
		ft.mu.Lock()
		defer ft.mu.Unlock()
		n := 0
		for _, fe := range ft.fences {
			if fe.mode == mode && fe.ino == dataIDOf(t, s, f.Ino) {
				n++
			}
		}
		return n
	}
	update := func(action uint8, gen uint64) error {
		_, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: f.Ino, Action: action, Record: wire.HsmRecord{Gen: gen}})
		return err
	}
	slots := len(mustLayout(t, s, f.Ino).Chains)
	if slots == 0 {
		t.Fatal("the file has no chains")
	}
	wantCode(t, "release without a freeze", update(wire.HsmActRelease, 0), errs.Invalid)

	// Frozen, then written: the commit is refused; the thaw thaws.
	if err := update(wire.HsmActFreeze, 0); err != nil {
		t.Fatal(err)
	}
	if got := fences(wire.FenceFreeze); got != slots {
		t.Fatalf("freeze fenced %d slots, want %d", got, slots)
	}
	_, err := s.Migrate(ctx, &wire.MigrateReq{Ino: f.Ino, Action: wire.MigrateBegin, Layout: placement.Layout{StripeSize: 1 << 20, StripeCount: 1}})
	wantCode(t, "migration of a file being released", err, errs.Busy)
	if _, err := s.CommitWrite(ctx, f.Ino, 10, 8); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "release of a file written since its freeze", update(wire.HsmActRelease, 0), errs.Busy)
	if err := update(wire.HsmActThaw, 5); err != nil {
		t.Fatal(err)
	}
	if got := fences(wire.FenceThaw); got != slots {
		t.Fatalf("thaw thawed %d slots, want %d", got, slots)
	}

	// Archived again and frozen; the client dies: once the lease ran out
	// the background pass thaws, and a late commit is refused.
	a, err := s.GetAttr(ctx, f.Ino)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: f.Ino, Action: wire.HsmActArchived, Record: testRecord(6, a.Size, a.Mtime)}); err != nil {
		t.Fatal(err)
	}
	if err := update(wire.HsmActFreeze, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.thawExpiredReleases(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fences(wire.FenceThaw); got != slots {
		t.Fatalf("a live freeze was thawed (%d thaws)", got-slots)
	}
	skew.Store(int64(ReleaseLease + time.Minute))
	if err := s.thawExpiredReleases(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fences(wire.FenceThaw); got != 2*slots {
		t.Fatalf("expired freeze: %d thaws, want %d", got, 2*slots)
	}
	wantCode(t, "release after the freeze expired", update(wire.HsmActRelease, 0), errs.Invalid)

	// Freeze and commit: released, fences kept, record gone.
	if err := update(wire.HsmActFreeze, 0); err != nil {
		t.Fatal(err)
	}
	if err := update(wire.HsmActRelease, 0); err != nil {
		t.Fatal(err)
	}
	if _, released, err := s.layoutOf(ctx, f.Ino); err != nil || !released {
		t.Fatalf("layout of the released file: released %v, %v", released, err)
	}
	skew.Store(int64(2 * (ReleaseLease + time.Minute)))
	if err := s.thawExpiredReleases(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fences(wire.FenceThaw); got != 2*slots {
		t.Fatalf("the fences of a committed release were thawed (%d thaws, want %d)", got, 2*slots)
	}
}

func mustLayout(t *testing.T, s *Service, ino uint64) placement.Layout {
	t.Helper()
	l, err := s.GetLayout(context.Background(), ino)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
