package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
)

// Values of a "W" key.
const (
	drainOn      = 1
	drainRemoved = 2
)

func drainKey(id placement.TargetID) []byte {
	return binary.BigEndian.AppendUint32([]byte{pfxDrain}, uint32(id))
}

// SetDraining marks target id as draining (on) or not, durably. A draining
// target takes no new files and heads no new chains; List reports it, and
// `sluice target drain` moves the files that have data on it.
func (r *Manager) SetDraining(ctx context.Context, id placement.TargetID, on bool) error {
	err := r.db.Update(ctx, func(tx kv.Txn) error {
		tx.RequireSync()
		if _, err := tx.Get(targetKey(id)); errors.Is(err, kv.ErrNotFound) {
			return errs.New(errs.NotFound, "cluster: no target %d", id)
		} else if err != nil {
			return err
		}
		if v, err := tx.Get(drainKey(id)); err == nil && len(v) == 1 && v[0] == drainRemoved {
			return errs.New(errs.NotFound, "cluster: target %d was removed", id)
		}
		if on {
			tx.Set(drainKey(id), []byte{drainOn})
		} else {
			tx.Delete(drainKey(id))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cluster: mark target %d draining=%v: %w", id, on, err)
	}
	r.log.Info("cluster: target draining", "target", id, "draining", on)
	return r.reload(ctx)
}

// RemoveTarget removes a drained target from the file system: it is no
// longer listed, placed on or put in chains. It refuses (errs.Busy) a
// target that is not draining, that a replicated chain still has a
// replica on, that a pool holds, or whose node does not report it empty
// (no chunks) in a recent heartbeat. The node may go on serving its
// directory, now unused; its record stays, so that the node still
// registers and starts.
func (r *Manager) RemoveTarget(ctx context.Context, id placement.TargetID) error {
	now := r.now()
	err := r.db.Update(ctx, func(tx kv.Txn) error {
		tx.RequireSync()
		st, err := loadState(tx)
		if err != nil {
			return err
		}
		t, ok := st.targets[id]
		switch {
		case !ok || st.removed[id]:
			return errs.New(errs.NotFound, "cluster: no target %d", id)
		case !st.draining[id]:
			return errs.New(errs.Busy, "cluster: target %d is not draining: drain it first (sluice target drain %d)", id, id)
		}
		for _, c := range st.chains {
			if c.OnAny(map[placement.TargetID]bool{id: true}) {
				return errs.New(errs.Busy, "cluster: target %d still holds a replica of chain %d", id, c.ID)
			}
		}
		for name, members := range st.pools {
			if slices.Contains(members, id) {
				return errs.New(errs.Busy, "cluster: target %d is in pool %q (sluice pool remove %s %d)", id, name, name, id)
			}
		}
		n, ok := st.nodes[t.Node]
		if !ok || !r.alive(n, now) {
			return errs.New(errs.Busy, "cluster: target %d's node %s is not heart-beating: cannot tell whether it holds data", id, t.Node)
		}
		for _, s := range n.Stats {
			if s.Target == id && s.Chunks > 0 {
				return errs.New(errs.Busy, "cluster: target %d still holds %d chunks (files not moved yet, or old chunks not collected yet: wait and retry)", id, s.Chunks)
			}
		}
		tx.Set(drainKey(id), []byte{drainRemoved})
		return nil
	})
	if err != nil {
		return fmt.Errorf("cluster: remove target %d: %w", id, err)
	}
	r.log.Info("cluster: target removed", "target", id)
	return r.reload(ctx)
}
