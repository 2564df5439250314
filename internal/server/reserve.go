package server

import (
	"runtime"
	"sync"

	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// cpuReserve makes srv keep reserve of the process's Ps free of
// checkpoint and background requests while interactive ones come
// (qos.Reserve, docs/qos.md). It does nothing when reserve is 0 or QoS
// is off. Jobs with a limit (see limiters) take no slot: their buckets
// bound their work already, and a request sleeping on its bucket must not
// hold the slot that every other checkpoint and background job needs.
func cpuReserve(srv *wire.Server, reserve int, off bool) *reserveHook {
	if off || reserve <= 0 {
		return nil
	}
	h := &reserveHook{Reserve: qos.NewReserve(qos.ReserveSlots(runtime.GOMAXPROCS(0), reserve), 0)}
	held := reservedOps()
	srv.Admit = func(op wire.Op, tag wire.QosTag, done <-chan struct{}) (func(), bool) {
		if int(op) >= len(held) || !held[op] {
			return nil, true
		}
		c := qos.FromWire(tag.Class)
		// The limits are looked up (under the gates' locks) only for the
		// classes the reserve holds back.
		if qos.Throttled(c) && tag.Job != "" && h.limited(tag.Job) {
			return nil, true
		}
		return h.Admit(c, done)
	}
	return h
}

// reserveHook is a server's CPU reserve and the services whose job limits
// exempt a job from it.
type reserveHook struct {
	*qos.Reserve
	mu       sync.Mutex
	limiters []func(job string) bool
}

// limitedBy adds a service's test for a job's limit (nil h: no reserve).
func (h *reserveHook) limitedBy(f func(job string) bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.limiters = append(h.limiters, f)
}

func (h *reserveHook) limited(job string) bool {
	h.mu.Lock()
	fs := h.limiters
	h.mu.Unlock()
	for _, f := range fs {
		if f(job) {
			return true
		}
	}
	return false
}

// reserve returns the qos.Reserve, nil without one.
func (h *reserveHook) reserve() *qos.Reserve {
	if h == nil {
		return nil
	}
	return h.Reserve
}

// reservedOps marks the ops the reserve may hold back: every request
// that works (chunk reads, writes and syncs, whose writeback is CPU in
// the syncing thread; namespace operations; KV-cache values), never one
// that waits for something else or whose delay breaks a promise: the
// change feed's long polls and metadata syncs (a request holding a slot
// through them would hold back every other checkpoint and background
// request meanwhile), lease renewals of migrations and restores (a late
// renewal loses the lease), a migration's freeze and the fences it sets,
// membership (a client's cluster map included: a client asks for it when
// it starts and after a failover), the QoS settings themselves (an
// administrator must get through), and the I/O profiler's control
// requests: a client's check for a running recording, every ProfilePoll
// (one second) whatever its class — held, a checkpoint client's check
// counted as a checkpoint request while nothing of its job ran
// (TestCPUReserve failed on it once) — and the administrator's start,
// stop, list and read. The records a client ships (OpProfileAppend) are
// its job's work and stay held with it.
func reservedOps() []bool {
	held := make([]bool, 256)
	for i := range held {
		held[i] = true
	}
	for _, op := range []wire.Op{
		wire.OpWatch, wire.OpMetaSync, wire.OpMigrate, wire.OpChunkFence, wire.OpHsmClaim,
		wire.OpRegister, wire.OpHeartbeat, wire.OpSyncDone, wire.OpQosSet, wire.OpQosList, wire.OpSession,
		wire.OpCluster, wire.OpProfileCheck, wire.OpProfileSet, wire.OpProfileList, wire.OpProfileRead,
	} {
		held[op] = false
	}
	return held
}
