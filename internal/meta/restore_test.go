package meta

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestRestoreClaim: who gets a released file's restore lease (ADR 0016).
func TestRestoreClaim(t *testing.T) {
	t.Parallel()
	rel := testRecord(9, 1<<20, 1)
	rel.State = wire.HsmReleased
	arch := rel
	arch.State = wire.HsmArchived
	const now = int64(1e12)
	live := restoreLease{Owner: 1, Gen: 9, Epoch: 1, Expires: now + 5e9}
	expired := restoreLease{Owner: 1, Gen: 9, Epoch: 1, Expires: now}
	dropped := restoreLease{Gen: 9, Epoch: 1}
	older := restoreLease{Owner: 1, Gen: 3, Epoch: 4, Expires: now + 5e9}
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
		wantErr   errs.Code
	}{
		{"first claim", rel, restoreLease{}, ask(2), 2, 1, now + 1e9, errs.OK},
		{"held by another", rel, live, ask(2), 1, 1, live.Expires, errs.OK},
		{"renewed by holder", rel, live, ask(1), 1, 1, now + 1e9, errs.OK},
		{"expired: taken over", rel, expired, ask(2), 2, 2, now + 1e9, errs.OK},
		{"expired, nobody took it: holder renews", rel, expired, ask(1), 1, 1, now + 1e9, errs.OK},
		{"after a drop", rel, dropped, ask(2), 2, 2, now + 1e9, errs.OK},
		{"lease of an older copy", rel, older, ask(2), 2, 1, now + 1e9, errs.OK},
		{"not released: nothing to restore", arch, restoreLease{}, ask(2), 0, 0, 0, errs.OK},
		{"other generation", rel, restoreLease{}, &wire.HsmClaimReq{Gen: 8, Owner: 2}, 0, 0, 0, errs.Stale},
		{"no owner", rel, restoreLease{}, &wire.HsmClaimReq{Gen: 9}, 0, 0, 0, errs.Invalid},
		{"lease clamped up", rel, restoreLease{}, &wire.HsmClaimReq{Owner: 2}, 2, 1, now + minRestoreLease*1e6, errs.OK},
		{"drop by holder", rel, live, &wire.HsmClaimReq{Gen: 9, Owner: 1, Drop: true}, 0, 1, 0, errs.OK},
		{"drop by another", rel, live, &wire.HsmClaimReq{Gen: 9, Owner: 2, Drop: true}, 1, 1, live.Expires, errs.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, err := restoreClaim(tt.rec, tt.cur, tt.req, now)
			if tt.wantErr != errs.OK {
				if errs.CodeOf(err) != tt.wantErr {
					t.Fatalf("err = %v, want class %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if next.Owner != tt.wantOwner || next.Epoch != tt.wantEpoch || next.Expires != tt.wantExp {
				t.Errorf("lease = %+v, want owner %d epoch %d expires %d", next, tt.wantOwner, tt.wantEpoch, tt.wantExp)
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
// file, waits for the release's chunk removal, is refused to a second
// client, taken over once expired, and goes with the restore's commit,
// which only its holder may make.
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
	if _, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: f.Ino, Action: wire.HsmActRelease}); err != nil {
		t.Fatal(err)
	}
	_, err := claim(1, 60000)
	wantCode(t, "claim before the collection", err, errs.Busy)
	if err := s.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if c, err := claim(1, 60000); err != nil || c.Owner != 1 || c.Epoch != 1 || c.LeftMs == 0 {
		t.Fatalf("first claim: %+v, %v", c, err)
	}
	if c, err := claim(2, 60000); err != nil || c.Owner != 1 || c.Full != nil {
		t.Fatalf("second client's claim: %+v, %v; want holder 1, nothing more", c, err)
	}
	// A claim asking for everything (gen 0: any copy) answers with the
	// HSM record and the attributes, as OpHsmGet and OpGetAttr would.
	full, err := s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: f.Ino, Owner: 2, LeaseMs: 60000, Full: true})
	if err != nil || full.Owner != 1 || full.Full == nil {
		t.Fatalf("full claim: %+v, %v; want holder 1 and the record", full, err)
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
	if _, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: f.Ino, Action: wire.HsmActRelease}); err != nil {
		t.Fatal(err)
	}
	if a, err := s.GetAttr(ctx, f.Ino); err != nil || a.Flags&wire.AttrReleased == 0 {
		t.Fatalf("attributes with a lease: %+v, %v", a, err)
	}
	_, err = s.HsmRestored(ctx, &wire.HsmClaimReq{Ino: f.Ino, Gen: 5, Owner: 2})
	wantCode(t, "commit by a non-holder", err, errs.Stale)
	// Holder 1's lease expires (the clock jumps an hour): 2 takes over.
	skew.Store(int64(time.Hour))
	c, err := s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: f.Ino, Gen: 5, Owner: 2, LeaseMs: 60000})
	if err != nil || c.Owner != 2 || c.Epoch != 2 {
		t.Fatalf("takeover: %+v, %v", c, err)
	}
	_, err = s.HsmRestored(ctx, &wire.HsmClaimReq{Ino: f.Ino, Gen: 5, Owner: 1})
	wantCode(t, "commit by the holder taken over", err, errs.Stale)
	r, err := s.HsmRestored(ctx, &wire.HsmClaimReq{Ino: f.Ino, Gen: 5, Owner: 2})
	if err != nil || r.State != wire.HsmArchived {
		t.Fatalf("commit by the new holder: %s, %v", wire.HsmStateName(r.State), err)
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
// a restore, unless a restore holds its lease or its release's chunk
// removal is queued; every other cut is a write (hsmOnWrite).
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
		queued  bool
		size    uint64
		want    uint8
		wantErr errs.Code
	}{
		{"released, cut to 0", rel, restoreLease{}, false, 0, wire.HsmDirty, errs.OK},
		{"released, cut to 0 after a dropped lease", rel, dropped, false, 0, wire.HsmDirty, errs.OK},
		{"released, cut to 0 while a restore holds the lease", rel, leased, false, 0, 0, errs.Busy},
		{"released, cut to 0 while the chunk removal is queued", rel, restoreLease{}, true, 0, 0, errs.Busy},
		{"released, cut to 1", rel, restoreLease{}, false, 1, 0, errs.Busy},
		{"archived, cut to 0", arch, restoreLease{}, false, 0, wire.HsmDirty, errs.OK},
		{"resident, cut to 0", wire.HsmRecord{}, restoreLease{}, false, 0, wire.HsmResident, errs.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, err := hsmOnTruncate(tt.rec, tt.lease, tt.queued, tt.size)
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
// 0 and makes it dirty, once the release's chunk removal is done and while
// no restore holds its lease, and counts it.
func TestCutReleasedToZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, f := archivedFile(t, Options{}, 2<<20)
	var err error
	if _, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: f.Ino, Action: wire.HsmActRelease}); err != nil {
		t.Fatal(err)
	}
	cut := func() (wire.Attr, error) {
		return s.SetAttr(ctx, &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetSize, Size: 0})
	}
	_, err = cut()
	wantCode(t, "cut before the chunk removal", err, errs.Busy)
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
	if err := s.TierSet(ctx, &wire.TierSetReq{Backend: wire.TierBackend{Name: "b", Endpoint: "http://x", Bucket: "k"}}); err != nil {
		t.Fatal(err)
	}
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
