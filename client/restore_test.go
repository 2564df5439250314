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
	for left, want := range map[uint32]time.Duration{0: 20 * time.Millisecond, 5: 20 * time.Millisecond, 300: 300 * time.Millisecond, 60000: time.Second} {
		if got := restorePoll(wire.HsmClaim{LeftMs: left}); got != want {
			t.Errorf("left %d ms: %v, want %v", left, got, want)
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
