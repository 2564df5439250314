package client

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TargetInfo describes one storage target of the file system.
type TargetInfo struct {
	ID       uint32
	Addr     string
	Node     string // the storage node hosting it ("local" in sluice serve)
	Healthy  bool
	Capacity int64 // bytes of the target's disk
	Used     int64 // bytes in use on it
	Draining bool  // takes no new data (SetDraining)
}

// NodeInfo describes a storage node: alive while it heart-beats.
type NodeInfo struct {
	Name, Addr string
	Alive      bool
	LastSeen   time.Time
	Resyncs    []ResyncInfo // resyncs it runs as a chain's tail
}

// ResyncInfo is the progress of a resync: tail From copies chain Chain (at
// Version) to syncing replica To; Looked of Total chunks compared, Copied
// of them copied.
type ResyncInfo struct {
	Chain                 uint32
	Version               uint64
	From, To              uint32
	Looked, Copied, Total uint64
}

// ChainInfo is a replication chain: its replicas in write order, each
// "serving", "syncing" or "offline".
type ChainInfo struct {
	ID       uint32
	Version  uint64
	Replicas []ReplicaInfo
}

// ReplicaInfo is one replica of a chain.
type ReplicaInfo struct {
	Target uint32
	State  string
}

// ClusterInfo is the cluster as the metadata service sees it now.
type ClusterInfo struct {
	FSID          string
	Nodes         []NodeInfo
	Targets       []TargetInfo
	ChainsVersion uint64
	Chains        []ChainInfo // replicated chains only: chain t of one replica is target t
}

// Targets returns the file system's storage targets as the metadata
// service sees them now (health from the nodes' heartbeats).
func (c *Client) Targets(ctx context.Context) ([]TargetInfo, error) {
	ci, err := c.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	return ci.Targets, nil
}

// Cluster returns the nodes, targets and chains of the file system.
func (c *Client) Cluster(ctx context.Context) (*ClusterInfo, error) {
	if err := c.refreshCluster(ctx); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	info := &c.info
	out := &ClusterInfo{FSID: info.FSID, ChainsVersion: info.ChainsVersion}
	for _, t := range info.Targets {
		out.Targets = append(out.Targets, TargetInfo{ID: uint32(t.ID), Addr: t.Addr, Node: t.Node, Healthy: t.Healthy, Capacity: t.Capacity, Used: t.Used, Draining: t.Draining})
	}
	for _, n := range info.Nodes {
		ni := NodeInfo{Name: n.Name, Addr: n.Addr, Alive: n.Alive, LastSeen: time.Unix(0, n.LastSeen)}
		for _, r := range n.Resyncs {
			ni.Resyncs = append(ni.Resyncs, ResyncInfo{Chain: uint32(r.Chain), Version: r.Version, From: uint32(r.From), To: uint32(r.To), Looked: r.Looked, Copied: r.Copied, Total: r.Total})
		}
		out.Nodes = append(out.Nodes, ni)
	}
	for _, ch := range info.Chains {
		ci := ChainInfo{ID: uint32(ch.ID), Version: ch.Version}
		for _, r := range ch.Replicas {
			ci.Replicas = append(ci.Replicas, ReplicaInfo{Target: uint32(r.Target), State: r.State.String()})
		}
		out.Chains = append(out.Chains, ci)
	}
	return out, nil
}

// SetDraining marks target id as draining (on) or not. A draining target
// takes no new files and joins no new chains; the files that have data on
// it stay until they are migrated (sluice target drain does that).
func (c *Client) SetDraining(ctx context.Context, id uint32, on bool) error {
	err := c.metaCall(ctx, wire.OpTargetDrain, &wire.TargetDrainReq{Target: placement.TargetID(id), On: on}, &wire.Empty{})
	if err != nil {
		return fmt.Errorf("drain target %d: %w", id, err)
	}
	return c.refreshCluster(ctx)
}

// RemoveTarget removes a drained target that holds no data any more from
// the file system (see SetDraining). It refuses a target that is not
// draining, still has chunks or a chain replica, or is in a pool.
func (c *Client) RemoveTarget(ctx context.Context, id uint32) error {
	if err := c.metaCall(ctx, wire.OpTargetRemove, &wire.TargetReq{Target: placement.TargetID(id)}, &wire.Empty{}); err != nil {
		return fmt.Errorf("remove target %d: %w", id, err)
	}
	return c.refreshCluster(ctx)
}
