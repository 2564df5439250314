package client

import (
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/wire"
)

func TestNextRestoreStep(t *testing.T) {
	t.Parallel()
	const me = 7
	for _, tt := range []struct {
		name string
		c    wire.HsmClaim
		want restoreAction
	}{
		{"archived: done", wire.HsmClaim{State: wire.HsmArchived}, restoreFinished},
		{"dirty: done", wire.HsmClaim{State: wire.HsmDirty}, restoreFinished},
		{"resident: done", wire.HsmClaim{State: wire.HsmResident}, restoreFinished},
		{"granted", wire.HsmClaim{State: wire.HsmReleased, Owner: me, Epoch: 1}, restoreCopy},
		{"taken over by me", wire.HsmClaim{State: wire.HsmReleased, Owner: me, Epoch: 3}, restoreCopy},
		{"held by another", wire.HsmClaim{State: wire.HsmReleased, Owner: 8, LeftMs: 500}, restoreWait},
		{"nobody (the service refused to grant)", wire.HsmClaim{State: wire.HsmReleased}, restoreWait},
	} {
		if got := nextRestoreStep(tt.c, me); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestRestorePoll(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, c := range []struct {
		left  uint32
		polls int
		want  time.Duration
	}{
		{0, 0, 20 * ms}, {5, 3, 20 * ms}, // the floor
		{60000, 0, 20 * ms}, {60000, 1, 40 * ms}, {60000, 3, 160 * ms}, // the backoff
		{300, 5, 300 * ms},                                // the holder's time left
		{60000, 6, time.Second}, {60000, 60, time.Second}, // the ceiling, no overflow
	} {
		if got := restorePoll(wire.HsmClaim{LeftMs: c.left}, c.polls); got != c.want {
			t.Errorf("left %d ms, %d polls: %v, want %v", c.left, c.polls, got, c.want)
		}
	}
}

func TestMayStartRestore(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	for _, tt := range []struct {
		name     string
		off      bool
		lastFail time.Time
		waiting  int
		want     bool
	}{
		{"never failed", false, time.Time{}, 0, true},
		{"turned off", true, time.Time{}, 0, false},
		{"failed just now", false, now.Add(-time.Millisecond), 0, false},
		{"failed long ago", false, now.Add(-restoreRetry), 0, true},
		{"queue nearly full", false, time.Time{}, MaxQueuedReadRestores - 1, true},
		{"queue full", false, time.Time{}, MaxQueuedReadRestores, false},
	} {
		if got := mayStartRestore(tt.off, tt.lastFail, now, tt.waiting); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestReadFrom(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		released, restored bool
		want               readSource
	}{
		{false, false, fromTargets},
		{false, true, fromTargets},
		{true, false, fromTier},
		{true, true, fromRefresh},
	} {
		if got := readFrom(tt.released, tt.restored); got != tt.want {
			t.Errorf("released %v, restored %v: %d, want %d", tt.released, tt.restored, got, tt.want)
		}
	}
}

// TestRestorerOffer: a reader's whole object goes to the queued restore of
// its inode, once, within the client's budget, and is taken only for the
// same copy and size.
func TestRestorerOffer(t *testing.T) {
	var r restorer
	r.init(2)
	defer r.close()
	obj := make([]byte, 150<<10)
	r.jobs[1] = &restoreJob{}
	r.jobs[2] = &restoreJob{}
	r.offer(1, copyID{gen: 7}, obj)
	r.offer(3, copyID{gen: 7}, obj) // no restore of inode 3: nothing kept
	if r.preBytes != int64(len(obj)) {
		t.Fatalf("kept %d bytes; want %d", r.preBytes, len(obj))
	}
	if got := r.take(1, copyID{gen: 8}, int64(len(obj))); got != nil {
		t.Errorf("taken for another copy")
	}
	if r.preBytes != 0 || r.jobs[1].pre != nil {
		t.Errorf("a mismatched take keeps %d bytes", r.preBytes)
	}
	r.offer(1, copyID{gen: 7}, obj)
	if got := r.take(1, copyID{gen: 7}, int64(len(obj))+1); got != nil {
		t.Errorf("taken for another size")
	}
	// An imported object (generation 0) the import made the file another
	// object of since, of the same size: not taken.
	r.offer(1, copyID{etag: "e1"}, obj)
	if got := r.take(1, copyID{etag: "e2"}, int64(len(obj))); got != nil {
		t.Errorf("taken for another ETag")
	}
	r.offer(1, copyID{gen: 7}, obj)
	if got := r.take(1, copyID{gen: 7}, int64(len(obj))); len(got) != len(obj) {
		t.Errorf("take of the offered copy: %d bytes", len(got))
	}
	if got := r.take(1, copyID{gen: 7}, int64(len(obj))); got != nil {
		t.Errorf("taken twice")
	}
	// Too big an object, or beyond the budget: not kept.
	r.offer(2, copyID{gen: 7}, make([]byte, maxPreObject+1))
	if r.jobs[2].pre != nil {
		t.Errorf("an object over %d bytes was kept", maxPreObject)
	}
	for ino := uint64(10); ino < 10+maxPreBytes/maxPreObject+1; ino++ {
		r.jobs[ino] = &restoreJob{}
		r.offer(ino, copyID{gen: 1}, make([]byte, maxPreObject))
	}
	if r.preBytes > maxPreBytes {
		t.Errorf("kept %d bytes; budget %d", r.preBytes, maxPreBytes)
	}
	if r.preBytes != maxPreBytes {
		t.Errorf("kept %d bytes; want the budget %d filled", r.preBytes, maxPreBytes)
	}
}
