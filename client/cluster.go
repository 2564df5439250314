package client

import (
	"context"
	"fmt"
)

// TargetInfo describes one storage target of the file system.
type TargetInfo struct {
	ID       uint32
	Addr     string
	Healthy  bool
	Capacity int64 // bytes of the target's disk
	Used     int64 // bytes in use on it
}

// Targets returns the file system's storage targets as the metadata
// service sees them now (health from its last poll, every few seconds).
func (c *Client) Targets(ctx context.Context) ([]TargetInfo, error) {
	if err := c.refreshCluster(ctx); err != nil {
		return nil, fmt.Errorf("targets: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]TargetInfo, 0, len(c.info.Targets))
	for _, t := range c.info.Targets {
		out = append(out, TargetInfo{ID: uint32(t.ID), Addr: t.Addr, Healthy: t.Healthy, Capacity: t.Capacity, Used: t.Used})
	}
	return out, nil
}
