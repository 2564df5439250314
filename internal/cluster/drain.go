package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
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
		if on {
			tx.Set(drainKey(id), []byte{1})
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
