package client

import (
	"context"
	"fmt"

	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// PoolInfo is a named set of storage targets. A directory whose layout
// names the pool has its new files placed on those targets only.
type PoolInfo struct {
	Name     string
	Targets  []uint32 // target IDs, sorted
	Capacity int64    // bytes, of the targets' file systems (each counted once)
	Used     int64
}

// Pools lists the pools, sorted by name.
func (c *Client) Pools(ctx context.Context) ([]PoolInfo, error) {
	var r wire.PoolListResp
	if err := c.metaCall(ctx, wire.OpPoolList, &wire.Empty{}, &r); err != nil {
		return nil, fmt.Errorf("pools: %w", err)
	}
	out := make([]PoolInfo, 0, len(r.Pools))
	for _, p := range r.Pools {
		pi := PoolInfo{Name: p.Name, Capacity: p.Capacity, Used: p.Used}
		for _, t := range p.Targets {
			pi.Targets = append(pi.Targets, uint32(t))
		}
		out = append(out, pi)
	}
	return out, nil
}

// CreatePool makes pool name of the given targets (maybe none).
func (c *Client) CreatePool(ctx context.Context, name string, targets ...uint32) error {
	return c.changePool(ctx, wire.PoolCreate, "create", name, targets)
}

// AddToPool adds targets to pool name.
func (c *Client) AddToPool(ctx context.Context, name string, targets ...uint32) error {
	return c.changePool(ctx, wire.PoolAdd, "add to", name, targets)
}

// RemoveFromPool takes targets out of pool name. Files already placed on
// them stay there.
func (c *Client) RemoveFromPool(ctx context.Context, name string, targets ...uint32) error {
	return c.changePool(ctx, wire.PoolRemove, "remove from", name, targets)
}

// DeletePool deletes pool name. Creating files in a directory whose layout
// still names it then fails until the directory's pool is changed.
func (c *Client) DeletePool(ctx context.Context, name string) error {
	return c.changePool(ctx, wire.PoolDelete, "delete", name, nil)
}

func (c *Client) changePool(ctx context.Context, kind uint8, verb, name string, targets []uint32) error {
	if err := placement.ValidPoolName(name); err != nil {
		return fmt.Errorf("%s pool: %w", verb, err)
	}
	req := &wire.PoolChangeReq{Kind: kind, Name: name}
	for _, t := range targets {
		req.Targets = append(req.Targets, placement.TargetID(t))
	}
	if err := c.metaCall(ctx, wire.OpPoolChange, req, nil); err != nil {
		return fmt.Errorf("%s pool %s: %w", verb, name, err)
	}
	return nil
}

// SetPool makes directory p place new files (below it, and in directories
// made below it from now on) on the targets of pool ("" clears it).
// Existing files stay where they are.
func (c *Client) SetPool(ctx context.Context, p, pool string) error {
	a, err := c.resolve(ctx, p, true)
	if err != nil {
		return opErr("layout", p, err)
	}
	return opErr("layout", p, c.metaCall(ctx, wire.OpSetPool, &wire.SetPoolReq{Ino: a.Ino, Pool: pool}, nil))
}
