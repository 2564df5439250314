package meta

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// The metadata service under the group sync policy: what must be durable
// before something else acts on it. Power loss is simulated with pebble's
// crashable in-memory file system (CrashClone keeps only what was synced).

// openCrashable opens the pebble engine on fs with a sync window too long
// to matter: only explicit syncs make anything durable.
func openCrashable(t *testing.T, fs vfs.FS) kv.DB {
	t.Helper()
	if err := fs.MkdirAll("meta", 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := fs.OpenDir("")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	db, err := kv.OpenPebble("meta", &kv.PebbleOptions{FS: fs, SyncWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestUnlinkDurableBeforeChunksGo: the garbage collector syncs before it
// removes a freed file's chunks, so a power loss cannot bring back a file
// whose data is gone.
func TestUnlinkDurableBeforeChunksGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	ft := newFakeTargets(4)
	s := newTestService(t, openCrashable(t, fs), ft)
	mustCreate(t, s, RootIno, "f")
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlink(ctx, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	if err := s.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ft.removals()) == 0 {
		t.Fatal("no chunks removed")
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	s2 := newTestService(t, openCrashable(t, crashed), newFakeTargets(4))
	if _, err := s2.Lookup(ctx, RootIno, "f"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("after a power loss, the unlinked file whose chunks were removed: lookup = %v, want not found", err)
	}
}

// TestGarbageWaitsForSync: when the sync fails, no chunk is removed.
func TestGarbageWaitsForSync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var failSync atomic.Bool
	boom := errors.New("sync failed")
	db := kv.NewFaulty(kv.NewMemory(), func(op string) error {
		if op == kv.FaultSync && failSync.Load() {
			return boom
		}
		return nil
	})
	ft := newFakeTargets(4)
	s := newTestService(t, db, ft)
	mustCreate(t, s, RootIno, "f")
	if err := s.Unlink(ctx, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	failSync.Store(true)
	if err := s.CollectGarbage(ctx); !errors.Is(err, boom) {
		t.Fatalf("CollectGarbage with a failing sync = %v, want %v", err, boom)
	}
	if got := ft.removals(); len(got) != 0 {
		t.Fatalf("chunks removed although the sync failed: %+v", got)
	}
	failSync.Store(false)
	if err := s.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ft.removals()) == 0 {
		t.Fatal("no chunks removed once the sync worked")
	}
}

// TestInodeNumbersSurvivePowerLoss: the inode allocator's reservation is
// synced before its numbers are used, so a power loss that loses the
// files created from it does not hand their numbers out again (their
// chunks may be on the targets).
func TestInodeNumbersSurvivePowerLoss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s := newTestService(t, openCrashable(t, fs), nil)
	lost := mustCreate(t, s, RootIno, "lost")
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	s2 := newTestService(t, openCrashable(t, crashed), nil)
	if _, err := s2.Lookup(ctx, RootIno, "lost"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("an unsynced create survived: %v (the test assumes the window never passed)", err)
	}
	again := mustCreate(t, s2, RootIno, "again")
	if again.Ino <= lost.Ino {
		t.Fatalf("after a power loss a new file got inode %d, not above the lost file's %d", again.Ino, lost.Ino)
	}
}

// TestMetaSyncOp: OpMetaSync is served and answers with an empty body.
func TestMetaSyncOp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	srv := &wire.Server{}
	s.Register(srv)
	addr := serve(t, srv)
	c, err := wire.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustCreate(t, s, RootIno, "f")
	if _, err := c.Call(ctx, wire.OpMetaSync, nil, nil, &wire.Empty{}, nil); err != nil {
		t.Fatalf("OpMetaSync: %v", err)
	}
}
