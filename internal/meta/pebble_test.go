package meta

import (
	"context"
	"testing"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestPebble runs the rename race on the durable engine, then reopens the
// database and checks that the tree, the FSID, the inode numbers and the
// pending chunk removals survived.
func TestPebble(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := kv.OpenPebble(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ft := newFakeTargets(4)
	s, err := New(ctx, Options{DB: db, Targets: ft})
	if err != nil {
		t.Fatal(err)
	}
	perWorker := 500
	if testing.Short() {
		perWorker = 100
	}
	runRenameRace(t, s, 8, perWorker)
	f := mustCreate(t, s, RootIno, "doomed")
	if err := s.Unlink(ctx, RootIno, "doomed"); err != nil {
		t.Fatal(err)
	}
	before := checkTree(t, s)
	fsid := s.FSID()
	st1, _ := s.Statfs(ctx)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = kv.OpenPebble(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ft2 := newFakeTargets(4)
	s2 := newTestService(t, db, ft2)
	if s2.FSID() != fsid {
		t.Fatalf("FSID %q after reopen, was %q", s2.FSID(), fsid)
	}
	after := checkTree(t, s2)
	if len(after) != len(before) {
		t.Fatalf("%d inodes reachable after reopen, %d before", len(after), len(before))
	}
	for ino := range before {
		if _, ok := after[ino]; !ok {
			t.Fatalf("inode %d lost across reopen", ino)
		}
	}
	if st2, _ := s2.Statfs(ctx); st2.Inodes != st1.Inodes || st2.Inodes != uint64(len(after)) {
		t.Fatalf("inode count %d after reopen, %d before, %d reachable", st2.Inodes, st1.Inodes, len(after))
	}
	g, err := s2.Create(ctx, &wire.CreateReq{Parent: RootIno, Name: "new", Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if g.Ino <= f.Ino {
		t.Fatalf("inode %d allocated after reopen is not above %d", g.Ino, f.Ino)
	}
	if err := s2.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	wantRemovals(t, ft2.removals(), f)
}
