package meta

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// wantRemovals checks that the chunks of file a were removed exactly once
// on every target of its layout, with the slots it holds there.
func wantRemovals(t *testing.T, got []removal, a wire.Attr) {
	t.Helper()
	want := map[placement.TargetID][]uint32{}
	for i, tg := range a.Layout.Chains {
		want[placement.TargetID(tg)] = append(want[placement.TargetID(tg)], uint32(i))
	}
	seen := map[placement.TargetID]bool{}
	for _, r := range got {
		if r.Ino != a.Ino {
			continue
		}
		if seen[r.Target] {
			t.Fatalf("chunks of inode %d removed twice on target %d: %+v", a.Ino, r.Target, got)
		}
		seen[r.Target] = true
		if !slices.Equal(r.Slots, want[r.Target]) {
			t.Fatalf("inode %d on target %d: removed slots %v, want %v", a.Ino, r.Target, r.Slots, want[r.Target])
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("inode %d: removals on %d targets, want %d (%v): %+v", a.Ino, len(seen), len(want), a.Layout.Chains, got)
	}
}

func TestGarbageCollection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ft := newFakeTargets(4)
	s := newTestService(t, nil, ft)
	f := mustCreate(t, s, RootIno, "f")
	g, err := s.Create(ctx, &wire.CreateReq{Parent: RootIno, Name: "g", Mode: 0o644, Layout: placement.Layout{StripeSize: 1 << 20, StripeCount: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if g, err = s.SetChunks(ctx, g.Ino); err != nil {
		t.Fatal(err)
	}
	h := mustCreate(t, s, RootIno, "h")
	if _, err := s.Link(ctx, h.Ino, RootIno, "h2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, &wire.CreateReq{Parent: RootIno, Name: "fifo", Mode: modeFifo | 0o644}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Symlink(ctx, &wire.SymlinkReq{Parent: RootIno, Name: "sl", Target: "f"}); err != nil {
		t.Fatal(err)
	}

	if err := s.Unlink(ctx, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(ctx, &wire.RenameReq{OldParent: RootIno, OldName: "fifo", NewParent: RootIno, NewName: "g"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"h", "sl"} { // h keeps a link; symlinks hold no chunks
		if err := s.Unlink(ctx, RootIno, name); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := s.PendingGarbage(ctx); n != 2 {
		t.Fatalf("%d files queued, want 2", n)
	}
	if err := s.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	got := ft.removals()
	if len(got) != 6 {
		t.Fatalf("%d removals, want 4 for f and 2 for g: %+v", len(got), got)
	}
	wantRemovals(t, got, f)
	wantRemovals(t, got, g)
	if n, _ := s.PendingGarbage(ctx); n != 0 {
		t.Fatalf("%d files still queued", n)
	}
	// A pass with nothing queued removes nothing.
	if err := s.CollectGarbage(ctx); err != nil || len(ft.removals()) != 6 {
		t.Fatalf("idle pass: %v, %d removals", err, len(ft.removals()))
	}
	// Unlinking the last link of h queues it.
	if err := s.Unlink(ctx, RootIno, "h2"); err != nil {
		t.Fatal(err)
	}
	if err := s.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	wantRemovals(t, ft.removals(), h)
}

func TestGarbageCollectionResumes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := kv.NewMemory()
	defer db.Close()
	ft := newFakeTargets(4)
	s1, err := New(ctx, Options{DB: db, Targets: ft})
	if err != nil {
		t.Fatal(err)
	}
	f := mustCreate(t, s1, RootIno, "f")
	ft.setFail(placement.TargetID(f.Layout.Chains[1]), true)
	if err := s1.Unlink(ctx, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	err = s1.CollectGarbage(ctx)
	wantCode(t, "collect with a target down", err, errs.Unavailable)
	if n, _ := s1.PendingGarbage(ctx); n != 1 {
		t.Fatalf("%d files queued after a failed removal, want 1", n)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	// A new service on the same database finishes the job.
	ft2 := newFakeTargets(4)
	s2 := newTestService(t, db, ft2)
	if err := s2.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	wantRemovals(t, ft2.removals(), f)
	if n, _ := s2.PendingGarbage(ctx); n != 0 {
		t.Fatalf("%d files still queued", n)
	}
}

func TestRunCollectsGarbage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := kv.NewMemory()
	defer db.Close()
	ft := newFakeTargets(3)
	s, err := New(ctx, Options{DB: db, Targets: ft, GCInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	f := mustCreate(t, s, RootIno, "f")
	if err := s.Unlink(ctx, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(ft.removals()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("Run did not remove the chunks: %+v", ft.removals())
		}
		time.Sleep(time.Millisecond)
	}
	wantRemovals(t, ft.removals(), f)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// The inode counter was stored on Close.
	s2 := newTestService(t, db, ft)
	if st, _ := s2.Statfs(ctx); st.Inodes != 1 {
		t.Fatalf("inode count %d after reopen, want 1", st.Inodes)
	}
}
