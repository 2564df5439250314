package server

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/target"
	"github.com/sluice-fs/sluice/internal/wire"
)

// recordingMeta is a target.MetaAPI that keeps the last heartbeat.
type recordingMeta struct {
	target.MetaAPI // nil: only Heartbeat is called
	last           *wire.HeartbeatReq
}

func (r *recordingMeta) Heartbeat(ctx context.Context, req *wire.HeartbeatReq) (wire.HeartbeatResp, error) {
	r.last = req
	return wire.HeartbeatResp{}, nil
}

// TestFSStamper: heartbeats reach the metadata service with each target's
// file system, the same for targets in one data dir, 0 for a target whose
// directory is gone, and the agent's request is left as it was.
func TestFSStamper(t *testing.T) {
	dataDir := t.TempDir()
	for _, id := range []placement.TargetID{1, 2} {
		if err := os.MkdirAll(target.Dir(dataDir, id), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dataDir, &st); err != nil {
		t.Fatal(err)
	}
	rm := &recordingMeta{}
	req := &wire.HeartbeatReq{Node: "n", Targets: []wire.TargetStat{{Target: 1}, {Target: 2}, {Target: 3}, {Target: 4, FS: 99}}}
	if _, err := (fsStamper{rm, dataDir}).Heartbeat(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := rm.last.Targets
	if want := uint64(st.Dev); got[0].FS != want || got[1].FS != want {
		t.Errorf("targets 1 and 2 in %s: FS %d and %d, want its device %d", dataDir, got[0].FS, got[1].FS, want)
	}
	if got[2].FS != 0 || got[3].FS != 99 {
		t.Errorf("target 3 (no directory): FS %d, want 0; target 4 (FS given): %d, want 99", got[2].FS, got[3].FS)
	}
	for _, ts := range req.Targets[:3] {
		if ts.FS != 0 {
			t.Errorf("the agent's request changed: %+v", req.Targets)
		}
	}
}
