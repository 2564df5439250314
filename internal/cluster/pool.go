package cluster

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Pools are named sets of targets ("P" + name -> u16 n | n × u32 target,
// sorted). A target may be in several pools, or in none; a directory whose
// layout names a pool has its new files placed on the pool's targets only
// (internal/meta, placement.PoolTargets and PoolChains).

func poolKey(name string) []byte { return append([]byte{pfxPool}, name...) }

func encodePool(ts []placement.TargetID) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(ts)))
	for _, t := range ts {
		b = binary.BigEndian.AppendUint32(b, uint32(t))
	}
	return b
}

func decodePool(b []byte) ([]placement.TargetID, error) {
	if len(b) < 2 || len(b) != 2+4*int(binary.BigEndian.Uint16(b)) {
		return nil, errs.New(errs.Corruption, "cluster: pool record of %d bytes", len(b))
	}
	ts := make([]placement.TargetID, binary.BigEndian.Uint16(b))
	for i := range ts {
		ts[i] = placement.TargetID(binary.BigEndian.Uint32(b[2+4*i:]))
	}
	return ts, nil
}

// Pools returns the pools sorted by name, each with the capacity and use
// of its targets from their last heartbeats (targets on one file system of
// a node counted once).
func (r *Manager) Pools(ctx context.Context) ([]wire.PoolInfo, error) {
	ts, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	out := make([]wire.PoolInfo, 0, len(r.mu.st.pools))
	for name, members := range r.mu.st.pools {
		out = append(out, wire.PoolInfo{Name: name, Targets: slices.Clone(members)})
	}
	r.mu.Unlock()
	for i := range out {
		out[i].Capacity, out[i].Used = poolUsage(ts, out[i].Targets)
	}
	slices.SortFunc(out, func(a, b wire.PoolInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// poolUsage sums the capacity and use of the member targets, counting a
// file system that several members share (same node, same FS) once.
func poolUsage(ts []wire.TargetAddr, members []placement.TargetID) (capacity, used int64) {
	type fsKey struct {
		node string
		fs   uint64
	}
	seen := make(map[fsKey]bool)
	for _, t := range ts {
		if !slices.Contains(members, t.ID) {
			continue
		}
		if t.FS != 0 {
			k := fsKey{t.Node, t.FS}
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		capacity += t.Capacity
		used += t.Used
	}
	return capacity, used
}

// PoolMembers returns the targets of pool name from the cache; ok is false
// if there is no such pool.
func (r *Manager) PoolMembers(name string) (members []placement.TargetID, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.mu.st.pools[name]
	return slices.Clone(m), ok
}

// ChangePool creates, changes or deletes a pool (durably: placement
// depends on it). Targets named must exist; adding a member or removing a
// non-member is errs.Invalid.
func (r *Manager) ChangePool(ctx context.Context, req *wire.PoolChangeReq) error {
	if err := placement.ValidPoolName(req.Name); err != nil {
		return err
	}
	err := r.db.Update(ctx, func(tx kv.Txn) error {
		tx.RequireSync()
		v, err := tx.Get(poolKey(req.Name))
		exists := err == nil
		if err != nil && !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		var members []placement.TargetID
		if exists {
			if members, err = decodePool(v); err != nil {
				return err
			}
		}
		switch req.Kind {
		case wire.PoolCreate:
			if exists {
				return errs.New(errs.Exists, "cluster: pool %q exists", req.Name)
			}
		case wire.PoolAdd, wire.PoolRemove, wire.PoolDelete:
			if !exists {
				return errs.New(errs.NotFound, "cluster: no pool %q", req.Name)
			}
		default:
			return errs.New(errs.Invalid, "cluster: unknown pool change %d", req.Kind)
		}
		if req.Kind == wire.PoolDelete {
			if len(req.Targets) != 0 {
				return errs.New(errs.Invalid, "cluster: deleting pool %q names targets", req.Name)
			}
			tx.Delete(poolKey(req.Name))
			return nil
		}
		known := func(id placement.TargetID) bool {
			_, err := tx.Get(targetKey(id))
			return err == nil
		}
		members, err = placement.ChangePool(members, req.Targets, req.Kind != wire.PoolRemove, known)
		if err != nil {
			return err
		}
		if len(members) > placement.MaxStripeCount*64 {
			return errs.New(errs.Invalid, "cluster: pool %q would have %d targets", req.Name, len(members))
		}
		tx.Set(poolKey(req.Name), encodePool(members))
		return nil
	})
	if err != nil {
		return fmt.Errorf("cluster: change pool %q: %w", req.Name, err)
	}
	r.log.Info("cluster: pool changed", "pool", req.Name, "kind", req.Kind, "targets", req.Targets)
	return r.reload(ctx)
}
