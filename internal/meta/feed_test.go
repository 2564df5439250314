package meta

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/wire"
)

// TestFeed: the change feed reports the names and inodes that other
// connections' transactions changed, leaves out the watcher's own, and
// says so when a watcher missed changes.
func TestFeed(t *testing.T) {
	s := newTestService(t, nil, nil)
	ctx := context.Background()
	const me, other = 7, 9
	byOther := withOrigin(ctx, other)
	byMe := withOrigin(ctx, me)

	// Nobody watches yet: nothing is recorded.
	mustCreateInline(t, s, RootIno, "before")
	if s.feed.watched(s.now()) {
		t.Fatal("the feed records before anyone watched")
	}
	start := s.Watch(ctx, me, &wire.WatchReq{})
	if start.Reset || start.Epoch == 0 || len(start.Changes) != 0 || !start.Complete {
		t.Fatalf("first poll: %+v", start)
	}
	poll := func(cursor uint64) *wire.WatchResp {
		t.Helper()
		r := s.Watch(ctx, me, &wire.WatchReq{Epoch: start.Epoch, Cursor: cursor})
		if r.Reset {
			t.Fatalf("poll from %d: reset", cursor)
		}
		return r
	}
	has := func(r *wire.WatchResp, c wire.Change) bool { return slices.Contains(r.Changes, c) }

	// Another connection's create: the name, the new inode, the directory.
	a, err := s.Create(byOther, &wire.CreateReq{Parent: RootIno, Name: "f", Mode: 0o644, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	r := poll(start.Cursor)
	for _, c := range []wire.Change{{Kind: wire.ChangeEntry, Ino: RootIno, Name: "f"}, {Kind: wire.ChangeInode, Ino: a.Ino}, {Kind: wire.ChangeInode, Ino: RootIno}} {
		if !has(r, c) {
			t.Errorf("create: %+v not among %+v", c, r.Changes)
		}
	}
	if r.Cursor <= start.Cursor {
		t.Fatalf("cursor did not move: %d -> %d", start.Cursor, r.Cursor)
	}
	cur := r.Cursor

	// The watcher's own changes are left out; a poll that waits returns
	// once another connection's change comes.
	if _, err := s.Create(byMe, &wire.CreateReq{Parent: RootIno, Name: "mine", Mode: 0o644, Exclusive: true}); err != nil {
		t.Fatal(err)
	}
	done := make(chan *wire.WatchResp)
	go func() { done <- s.Watch(ctx, me, &wire.WatchReq{Epoch: start.Epoch, Cursor: cur, WaitMs: 10_000}) }()
	if err := s.Rename(byOther, &wire.RenameReq{OldParent: RootIno, OldName: "f", NewParent: RootIno, NewName: "g"}); err != nil {
		t.Fatal(err)
	}
	r = <-done
	// A short wait that no change ends leaves no waiter behind either.
	if r := s.Watch(ctx, me, &wire.WatchReq{Epoch: start.Epoch, Cursor: r.Cursor, WaitMs: 1}); len(r.Changes) != 0 {
		t.Errorf("changes after the rename: %+v", r.Changes)
	}
	s.feed.mu.Lock()
	waiting := len(s.feed.waiters)
	s.feed.mu.Unlock()
	if waiting != 0 {
		t.Errorf("%d waiters left after the polls returned", waiting)
	}
	for _, c := range r.Changes {
		if c.Name == "mine" {
			t.Errorf("the watcher's own create was reported: %+v", r.Changes)
		}
	}
	if !has(r, wire.Change{Kind: wire.ChangeEntry, Ino: RootIno, Name: "f"}) || !has(r, wire.Change{Kind: wire.ChangeEntry, Ino: RootIno, Name: "g"}) {
		t.Errorf("rename: both names should be reported: %+v", r.Changes)
	}
	cur = r.Cursor

	// A setattr and an unlink.
	mode := uint32(0o600)
	if _, err := s.SetAttr(byOther, &wire.SetAttrReq{Ino: a.Ino, Valid: wire.SetMode, Mode: mode}); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlink(byOther, RootIno, "g"); err != nil {
		t.Fatal(err)
	}
	r = poll(cur)
	if !has(r, wire.Change{Kind: wire.ChangeInode, Ino: a.Ino}) || !has(r, wire.Change{Kind: wire.ChangeEntry, Ino: RootIno, Name: "g"}) {
		t.Errorf("setattr and unlink: %+v", r.Changes)
	}
	cur = r.Cursor

	// Another epoch (a restarted service) and a watcher further behind
	// than the ring keeps are told they missed changes.
	if r := s.Watch(ctx, me, &wire.WatchReq{Epoch: start.Epoch + 2, Cursor: cur}); !r.Reset || r.Epoch != start.Epoch {
		t.Errorf("poll of another epoch: %+v", r)
	}
	// A feed nobody polled for its idle time stopped recording: the next
	// poll is told it missed changes.
	s.feed.mu.Lock()
	s.feed.idle = time.Millisecond
	s.feed.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	if _, err := s.Create(byOther, &wire.CreateReq{Parent: RootIno, Name: "unrecorded", Mode: 0o644, Exclusive: true}); err != nil {
		t.Fatal(err)
	}
	r = s.Watch(ctx, me, &wire.WatchReq{Epoch: start.Epoch, Cursor: cur})
	if !r.Reset || r.Epoch == start.Epoch {
		t.Errorf("a watcher back after the feed went idle was not reset: %+v", r)
	}
	s.feed.mu.Lock()
	s.feed.idle = feedIdle
	s.feed.mu.Unlock()
	start.Epoch, cur = r.Epoch, r.Cursor
	many := make([]wire.Change, feedRing+1)
	for i := range many {
		many[i] = wire.Change{Kind: wire.ChangeInode, Ino: uint64(i)}
	}
	s.feed.publish(other, many)
	if r := s.Watch(ctx, me, &wire.WatchReq{Epoch: start.Epoch, Cursor: cur}); !r.Reset {
		t.Errorf("a watcher %d changes behind was not reset", len(many))
	}
}

// TestFeedShared: a service whose engine other services share says its
// feed is incomplete.
func TestFeedShared(t *testing.T) {
	s, err := New(context.Background(), Options{DB: openTestDB(t), Targets: newFakeTargets(1), SharedDB: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r := s.Watch(context.Background(), 1, &wire.WatchReq{}); r.Complete {
		t.Fatalf("a shared engine's feed says it is complete: %+v", r)
	}
}

// TestOpenInoFeedPosition: OpenIno says where the feed stood before it read
// the attributes, so that a mount can tell which changes they reflect: none
// while nobody watches; with a watcher, a cursor past every change made
// before the open and short of the changes after it.
func TestOpenInoFeedPosition(t *testing.T) {
	s := newTestService(t, nil, nil)
	ctx := context.Background()
	byOther := withOrigin(ctx, 9)
	a, err := s.Create(byOther, &wire.CreateReq{Parent: RootIno, Name: "f", Mode: 0o644, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenIno(ctx, a.Ino)
	if err != nil || r.FeedEpoch != 0 || r.FeedCursor != 0 {
		t.Fatalf("open with nobody watching: position %d/%d, %v; want none", r.FeedEpoch, r.FeedCursor, err)
	}
	start := s.Watch(ctx, 7, &wire.WatchReq{})
	if _, err := s.SetAttr(byOther, &wire.SetAttrReq{Ino: a.Ino, Valid: wire.SetSize, Size: 5}); err != nil {
		t.Fatal(err)
	}
	r, err = s.OpenIno(ctx, a.Ino)
	if err != nil || r.FeedEpoch != start.Epoch || r.Attr.Size != 5 {
		t.Fatalf("open: epoch %d (feed %d), size %d, %v", r.FeedEpoch, start.Epoch, r.Attr.Size, err)
	}
	before := s.Watch(ctx, 7, &wire.WatchReq{Epoch: start.Epoch, Cursor: start.Cursor})
	if len(before.Changes) == 0 || before.Cursor > r.FeedCursor {
		t.Fatalf("the truncate's changes end at %d (%+v), past the open's cursor %d", before.Cursor, before.Changes, r.FeedCursor)
	}
	if _, err := s.SetAttr(byOther, &wire.SetAttrReq{Ino: a.Ino, Valid: wire.SetSize, Size: 9}); err != nil {
		t.Fatal(err)
	}
	after := s.Watch(ctx, 7, &wire.WatchReq{Epoch: start.Epoch, Cursor: before.Cursor})
	if len(after.Changes) == 0 || after.Cursor <= r.FeedCursor {
		t.Fatalf("a change after the open ends at %d, not past the open's cursor %d", after.Cursor, r.FeedCursor)
	}
}
