package server

import (
	"context"
	"slices"
	"syscall"

	"github.com/sluice-fs/sluice/internal/target"
	"github.com/sluice-fs/sluice/internal/wire"
)

// fsStamper is the metadata service as a node's agent sees it, with every
// heartbeat's targets stamped with the file system holding their
// directories (wire.TargetStat.FS): the targets of one data dir usually
// share a disk, and the metadata service's statfs counts a shared disk once.
type fsStamper struct {
	target.MetaAPI
	dataDir string
}

func (f fsStamper) Heartbeat(ctx context.Context, req *wire.HeartbeatReq) (wire.HeartbeatResp, error) {
	r := *req
	r.Targets = slices.Clone(req.Targets)
	for i := range r.Targets {
		if r.Targets[i].FS == 0 {
			r.Targets[i].FS = fsID(target.Dir(f.dataDir, r.Targets[i].Target))
		}
	}
	return f.MetaAPI.Heartbeat(ctx, &r)
}

// fsID identifies the file system holding dir on this machine: its device
// number (st_dev), or 0 if dir cannot be examined.
func fsID(dir string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0
	}
	return uint64(st.Dev)
}
