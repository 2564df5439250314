package server

import (
	"testing"

	"github.com/sluice-fs/sluice/internal/wire"
)

// TestReservedOps: the CPU reserve may hold back chunk I/O and namespace
// operations, never the requests that wait for something else or whose
// delay breaks a promise (a checkpoint mount's change-feed long poll
// would otherwise hold the only slot for its whole wait; a late lease
// renewal loses the lease).
func TestReservedOps(t *testing.T) {
	held := reservedOps()
	for _, op := range []wire.Op{wire.OpChunkRead, wire.OpChunkWrite, wire.OpChunkSync, wire.OpLookup, wire.OpCreate, wire.OpUnlink, wire.OpOpenIno, wire.OpKVPut, wire.OpProfileAppend} {
		if !held[op] {
			t.Errorf("op %d is not held back", op)
		}
	}
	for _, op := range []wire.Op{wire.OpWatch, wire.OpMetaSync, wire.OpMigrate, wire.OpHsmClaim, wire.OpChunkFence, wire.OpHeartbeat, wire.OpRegister, wire.OpSession, wire.OpQosSet, wire.OpQosList, wire.OpCluster, wire.OpProfileCheck, wire.OpProfileSet, wire.OpProfileList, wire.OpProfileRead} {
		if held[op] {
			t.Errorf("op %d is held back", op)
		}
	}
}
