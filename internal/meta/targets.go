package meta

import (
	"context"

	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Targets is how the service reaches the storage targets and the
// replication chains over them. Implementations must be safe for
// concurrent use.
type Targets interface {
	// List returns the known targets in any order, with their health and
	// capacity. Used is the bytes in use on the target's file system, so
	// Capacity-Used is what is free; FS identifies that file system on the
	// target's node (0: unknown), as targets may share one. It is called on
	// every file create and must be cheap (a cached snapshot).
	List(ctx context.Context) ([]wire.TargetAddr, error)

	// Chains returns the replicated chains (two or more replicas) and the
	// chain table's version. Chains of one replica are implicit: chain t
	// is target t. Cheap, like List.
	Chains(ctx context.Context) (version uint64, chains []placement.Chain, err error)

	// FormChains makes chains of r replicas (2 <= r) for the healthy
	// targets that head none yet, so that new files can use them. With a
	// pool (non-nil), it uses only the pool's targets and counts only the
	// chains inside the pool.
	FormChains(ctx context.Context, r int, pool []placement.TargetID) error

	// RemoveChunks durably removes the chunks of inode ino in the given
	// slots from every replica of a chain. Removing chunks that do not
	// exist is not an error, so a repeated call is harmless.
	RemoveChunks(ctx context.Context, chain placement.ChainID, ino uint64, slots []uint32) error

	// FenceChunks freezes (wire.FenceFreeze) or thaws (wire.FenceThaw) the
	// chunks of data ID ino in the given slots on every replica of a
	// chain, durably (ADR 0020). Both are idempotent.
	FenceChunks(ctx context.Context, chain placement.ChainID, ino uint64, slots []uint32, mode uint8) error
}

// ClusterManager is implemented by Targets that storage nodes register
// with and report to (cluster.Manager); the OpRegister, OpHeartbeat and
// OpSyncDone handlers need it.
type ClusterManager interface {
	Register(ctx context.Context, req *wire.RegisterReq) (wire.RegisterResp, error)
	Heartbeat(ctx context.Context, req *wire.HeartbeatReq) (wire.HeartbeatResp, error)
	SyncDone(ctx context.Context, req *wire.SyncDoneReq) error
}

// DrainManager is implemented by Targets that can mark targets draining
// (cluster.Manager); the OpTargetDrain handler needs it.
type DrainManager interface {
	SetDraining(ctx context.Context, id placement.TargetID, on bool) error
	RemoveTarget(ctx context.Context, id placement.TargetID) error
}

// PoolManager is implemented by Targets that keep pools of targets
// (cluster.Manager); the OpPoolList and OpPoolChange handlers and the
// placement of files in directories with a pool need it.
type PoolManager interface {
	// Pools returns the pools sorted by name, with capacity and use. It
	// is called on every file create and must be cheap (a cached
	// snapshot).
	Pools(ctx context.Context) ([]wire.PoolInfo, error)
	// ChangePool creates, changes or deletes a pool, durably.
	ChangePool(ctx context.Context, req *wire.PoolChangeReq) error
	// Reload refreshes the snapshot that Pools answers from, so that a
	// pool made through another metadata service is seen at once.
	Reload(ctx context.Context) error
}
