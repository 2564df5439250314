package meta

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestCutDecisions checks the pure decisions of cut generations: a cut
// makes the generation odd and its end even; commits apply only under the
// generation their writer knew and never while a cut runs; a second cut
// waits for the first unless that one is held past its time.
func TestCutDecisions(t *testing.T) {
	t.Parallel()
	const hold = 100
	var c cutState
	if !c.commits(0) || c.commits(1) {
		t.Fatal("a file never cut: commits under 0 only")
	}
	if err := c.begin(10, hold); err != nil || c.Gen != 1 || c.At != 10 {
		t.Fatalf("begin: %+v, %v", c, err)
	}
	for _, known := range []uint64{0, 1, 2} {
		if c.commits(known) {
			t.Errorf("a commit under %d applied while cut 1 runs", known)
		}
	}
	if err := c.begin(50, hold); errs.CodeOf(err) != errs.Busy || c.Gen != 1 {
		t.Fatalf("second begin while the first runs: %+v, %v (want busy, unchanged)", c, err)
	}
	if c.takeOver(110, hold) || c.Gen != 1 {
		t.Fatalf("took over a cut held for %d (hold %d)", 110-10, hold)
	}
	if err := c.end(3); errs.CodeOf(err) != errs.Busy || c.Gen != 1 {
		t.Fatalf("end of another generation: %+v, %v", c, err)
	}
	if err := c.end(1); err != nil || c.Gen != 2 || c.At != 0 {
		t.Fatalf("end: %+v, %v", c, err)
	}
	if c.commits(0) || !c.commits(2) {
		t.Fatal("after the cut: commits under 2 only (a write of before it is written again)")
	}
	if err := c.end(1); errs.CodeOf(err) != errs.Busy || c.Gen != 2 {
		t.Fatalf("end twice: %+v, %v", c, err)
	}
	// A cut whose truncate stopped is taken over after hold, by a begin
	// or by a commit's or poll's takeOver; its late end is refused.
	if err := c.begin(1000, hold); err != nil || c.Gen != 3 {
		t.Fatal(c, err)
	}
	if err := c.begin(1101, hold); err != nil || c.Gen != 5 || c.At != 1101 {
		t.Fatalf("begin after hold: %+v, %v (want generation 5)", c, err)
	}
	if err := c.end(3); errs.CodeOf(err) != errs.Busy {
		t.Fatalf("the stopped cut's end after the take-over: %v", err)
	}
	if !c.takeOver(1202, hold) || c.Gen != 6 || !c.commits(6) {
		t.Fatalf("takeOver after hold: %+v", c)
	}
}

// TestCutService checks the metadata service's side: OpCutBegin,
// conditional commits (refused while the cut runs and under an older
// generation, applied under the new one), the size change that ends the
// cut (SetIfCut), OpCutEnd, and the take-over of a cut held past
// wire.CutHold, with a clock the test moves.
func TestCutService(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC).UnixNano())
	db := openTestDB(t)
	s, err := New(ctx, Options{DB: db, Targets: newFakeTargets(4), Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := mustCreate(t, s, RootIno, "f")
	commit := func(end uint64, cut uint64) wire.CommitResp {
		t.Helper()
		r, err := s.CommitCut(ctx, &wire.CommitWriteReq{Ino: f.Ino, End: end, Mtime: 5, CutIf: true, Cut: cut})
		if err != nil || !r.Known {
			t.Fatalf("commit to %d under %d: %+v, %v", end, cut, r, err)
		}
		return r
	}
	if r := commit(1000, 0); r.Refused || r.Attr.Size != 1000 || r.Cut != 0 {
		t.Fatalf("commit to a file never cut: %+v", r)
	}
	b, err := s.CutBegin(ctx, f.Ino)
	if err != nil || b.Cut != 1 || b.Attr.Size != 1000 {
		t.Fatalf("cut begin: %+v, %v", b, err)
	}
	// Another client's write, its data written before the cut (it knew
	// generation 0), commits after the cut began: refused, nothing
	// changed; so is one that learnt the running generation.
	for _, known := range []uint64{0, 1} {
		if r := commit(500_000, known); !r.Refused || r.Cut != 1 || r.Attr.Size != 1000 {
			t.Fatalf("commit under %d while cut 1 runs: %+v (want refused, size 1000)", known, r)
		}
	}
	if _, err := s.CutBegin(ctx, f.Ino); errs.CodeOf(err) != errs.Busy {
		t.Fatalf("a second truncate's cut while one runs: %v, want busy", err)
	}
	end := &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetSize | wire.SetIfCut, Size: 100, Cut: b.Cut}
	if a, err := s.SetAttr(ctx, end); err != nil || a.Size != 100 {
		t.Fatalf("size change ending the cut: %+v, %v", a, err)
	}
	if _, err := s.SetAttr(ctx, end); errs.CodeOf(err) != errs.Busy {
		t.Fatalf("size change under an ended cut: %v, want busy", err)
	}
	if g, err := s.CutGen(ctx, f.Ino); err != nil || g.Cut != 2 || g.Attr.Size != 100 {
		t.Fatalf("generation after the cut: %+v, %v", g, err)
	}
	if r := commit(500_000, 0); !r.Refused || r.Attr.Size != 100 {
		t.Fatalf("commit under the generation before the cut, after it: %+v", r)
	}
	if r := commit(501_000, 2); r.Refused || r.Attr.Size != 501_000 {
		t.Fatalf("the write again, under the new generation: %+v", r)
	}
	// A commit without the condition (an older client) applies as ever.
	if a, err := s.CommitWriteIf(ctx, &wire.CommitWriteReq{Ino: f.Ino, End: 600_000, Mtime: 6}); err != nil || a.Size != 600_000 {
		t.Fatalf("unconditional commit: %+v, %v", a, err)
	}

	// OpCutEnd ends a cut without a size change.
	if b, err = s.CutBegin(ctx, f.Ino); err != nil || b.Cut != 3 {
		t.Fatal(b, err)
	}
	if g, err := s.CutEnd(ctx, f.Ino, b.Cut); err != nil || g.Cut != 4 || g.Attr.Size != 600_000 {
		t.Fatalf("cut end: %+v, %v", g, err)
	}

	// A cut whose truncate stopped holds commits off for wire.CutHold,
	// then the first commit takes it over (and is refused: its data may
	// have been cut) and the stopped truncate's size change is refused.
	if b, err = s.CutBegin(ctx, f.Ino); err != nil || b.Cut != 5 {
		t.Fatal(b, err)
	}
	clock.Add(int64(wire.CutHold) - 1)
	if r := commit(700_000, 4); !r.Refused || r.Cut != 5 {
		t.Fatalf("commit just before the hold ends: %+v", r)
	}
	clock.Add(2)
	if r := commit(700_000, 4); !r.Refused || r.Cut != 6 {
		t.Fatalf("commit after the hold: %+v (want refused, generation 6)", r)
	}
	if r := commit(700_000, 6); r.Refused || r.Attr.Size != 700_000 {
		t.Fatalf("commit under the generation after the take-over: %+v", r)
	}
	end.Cut = b.Cut
	if _, err := s.SetAttr(ctx, end); errs.CodeOf(err) != errs.Busy {
		t.Fatalf("the stopped truncate's size change: %v, want busy", err)
	}
	if a, err := s.GetAttr(ctx, f.Ino); err != nil || a.Size != 700_000 {
		t.Fatalf("size %d, %v: want 700000", a.Size, err)
	}
	// An open (OpOpenIno) tells a writer the generation.
	if o, err := s.OpenIno(ctx, f.Ino); err != nil || o.Cut != 6 {
		t.Fatalf("open: generation %d, %v; want 6", o.Cut, err)
	}

	// Counted: 3 cuts begun (one taken over), 5 commits refused (the one
	// after the hold took the cut over).
	if got := s.CutTotals(); got != (CutTotals{Begun: 3, Refused: 5, Takeovers: 1}) {
		t.Fatalf("totals %+v", got)
	}

	// The generation is part of the inode record: it survives a restart.
	s.Close()
	s2, err := New(ctx, Options{DB: db, Targets: newFakeTargets(4), Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if g, err := s2.CutGen(ctx, f.Ino); err != nil || g.Cut != 6 {
		t.Fatalf("generation after a restart: %+v, %v", g, err)
	}
	if _, err := s2.CutBegin(ctx, RootIno); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("cut of a directory: %v", err)
	}
}
