package meta

import (
	"context"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

func TestAbsorbPolicyInherited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	ck := mustMkdir(t, s, RootIno, "ckpt")
	sub := mustMkdir(t, s, ck.Ino, "run1")
	off := mustMkdir(t, s, sub.Ino, "logs")
	if err := s.SetAbsorb(ctx, ck.Ino, wire.AbsorbOn); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAbsorb(ctx, off.Ino, wire.AbsorbOff); err != nil {
		t.Fatal(err)
	}
	deeper := mustMkdir(t, s, off.Ino, "x") // made after the policies: inherits too
	for _, tc := range []struct {
		dir  uint64
		want wire.AbsorbPolicy
	}{
		{RootIno, wire.AbsorbPolicy{Mode: wire.AbsorbOff}},
		{ck.Ino, wire.AbsorbPolicy{Mode: wire.AbsorbOn, From: ck.Ino}},
		{sub.Ino, wire.AbsorbPolicy{Mode: wire.AbsorbOn, From: ck.Ino}},
		{off.Ino, wire.AbsorbPolicy{Mode: wire.AbsorbOff, From: off.Ino}},
		{deeper.Ino, wire.AbsorbPolicy{Mode: wire.AbsorbOff, From: off.Ino}},
	} {
		got, err := s.GetAbsorb(ctx, tc.dir)
		if err != nil || got != tc.want {
			t.Errorf("GetAbsorb(%d) = %+v, %v; want %+v", tc.dir, got, err, tc.want)
		}
	}
	// Moving a directory moves it under another policy.
	if err := s.Rename(ctx, &wire.RenameReq{OldParent: off.Ino, OldName: "x", NewParent: sub.Ino, NewName: "x"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetAbsorb(ctx, deeper.Ino); got.Mode != wire.AbsorbOn {
		t.Errorf("moved directory: %+v, want on", got)
	}
	if err := s.SetAbsorb(ctx, ck.Ino, wire.AbsorbInherit); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetAbsorb(ctx, sub.Ino); got.Mode != wire.AbsorbOff || got.From != 0 {
		t.Errorf("after clearing: %+v, want off from none", got)
	}
	f := mustCreate(t, s, ck.Ino, "file")
	wantCode(t, "setabsorb on a file", s.SetAbsorb(ctx, f.Ino, wire.AbsorbOn), errs.NotDir)
	wantCode(t, "setabsorb mode 9", s.SetAbsorb(ctx, ck.Ino, 9), errs.Invalid)
}

// TestRenameWaitsForStaged checks the commit rule: under the policy, a
// rename is refused while a file in the scope it commits is staged.
func TestRenameWaitsForStaged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	ck := mustMkdir(t, s, RootIno, "ckpt")
	plain := mustMkdir(t, s, RootIno, "plain")
	if err := s.SetAbsorb(ctx, ck.Ino, wire.AbsorbOn); err != nil {
		t.Fatal(err)
	}
	step := mustMkdir(t, s, ck.Ino, "step1")
	tmpdir := mustMkdir(t, s, ck.Ino, "step2.tmp")
	nested := mustMkdir(t, s, tmpdir.Ino, "model")
	shard := mustCreate(t, s, step.Ino, "__0_0.distcp")
	mustCreate(t, s, step.Ino, ".metadata.tmp")
	deep := mustCreate(t, s, nested.Ino, "__1_0.distcp")
	other := mustCreate(t, s, plain.Ino, "a")
	mustCreate(t, s, ck.Ino, "unrelated")

	for _, ino := range []uint64{shard.Ino, deep.Ino, other.Ino} {
		if err := s.StagedAdd(ctx, ino, "node1/c-1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.StagedAdd(ctx, shard.Ino, "node2/c-2"); err != nil { // a second client's data of the same file
		t.Fatal(err)
	}
	list, err := s.StagedList(ctx)
	if err != nil || len(list.Files) != 4 {
		t.Fatalf("StagedList: %+v, %v", list, err)
	}
	ren := func(p uint64, from string, np uint64, to string) error {
		return s.Rename(ctx, &wire.RenameReq{OldParent: p, OldName: from, NewParent: np, NewName: to})
	}
	wantCode(t, "DCP commit with a staged shard", ren(step.Ino, ".metadata.tmp", step.Ino, ".metadata"), errs.Busy)
	wantCode(t, "temp directory with a staged file below", ren(ck.Ino, "step2.tmp", ck.Ino, "step2"), errs.Busy)
	wantCode(t, "a staged file itself", ren(step.Ino, "__0_0.distcp", step.Ino, "x"), errs.Busy)
	// Outside the policy, staged files block nothing.
	if err := ren(plain.Ino, "a", plain.Ino, "b"); err != nil {
		t.Fatalf("rename outside the policy: %v", err)
	}
	// Moving a staged file into the policy's tree waits for it.
	wantCode(t, "a staged file moved under the policy", ren(plain.Ino, "b", ck.Ino, "b"), errs.Busy)
	// The parent's subtree holds staged files: a plain file's rename
	// there waits as well (it may be the commit of a checkpoint below).
	wantCode(t, "rename in the policy root", ren(ck.Ino, "unrelated", ck.Ino, "u2"), errs.Busy)

	if err := s.StagedDone(ctx, shard.Ino, "node1/c-1"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "one client's data of the shard still staged", ren(step.Ino, ".metadata.tmp", step.Ino, ".metadata"), errs.Busy)
	if err := s.StagedDone(ctx, shard.Ino, "node2/c-2"); err != nil {
		t.Fatal(err)
	}
	if err := ren(step.Ino, ".metadata.tmp", step.Ino, ".metadata"); err != nil {
		t.Fatalf("commit after the drain: %v", err)
	}
	wantCode(t, "temp directory still waits", ren(ck.Ino, "step2.tmp", ck.Ino, "step2"), errs.Busy)
	// A staged file that is removed no longer holds anything back.
	if err := s.Unlink(ctx, nested.Ino, "__1_0.distcp"); err != nil {
		t.Fatal(err)
	}
	if err := ren(ck.Ino, "step2.tmp", ck.Ino, "step2"); err != nil {
		t.Fatalf("temp directory after its staged file went: %v", err)
	}
	wantCode(t, "StagedAdd of a directory", s.StagedAdd(ctx, ck.Ino, "n/c"), errs.Invalid)
	wantCode(t, "StagedAdd without owner", s.StagedAdd(ctx, other.Ino, ""), errs.Invalid)
}
