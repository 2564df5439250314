package meta

import (
	"context"
	"errors"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// A directory's default layout may name a pool of targets (kept by the
// PoolManager): new files below it are placed on the pool's targets only,
// and new directories inherit it. The name is stored under "M" + dir ino,
// beside the inode, so that the inode record's encoding is unchanged.

// dirPool returns the pool of directory ino's layout ("" for none).
func dirPool(tx kv.Txn, ino uint64) (string, error) {
	v, err := tx.Get(dirPoolKey(ino))
	if errors.Is(err, kv.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if err := placement.ValidPoolName(string(v)); err != nil {
		return "", errs.New(errs.Corruption, "meta: pool of directory %d: %v", ino, err)
	}
	return string(v), nil
}

// DirPool returns the pool of directory ino's default layout ("" for none;
// for other file types always "").
func (s *Service) DirPool(ctx context.Context, ino uint64) (string, error) {
	var pool string
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		pool, err = dirPool(tx, ino)
		return err
	})
	if err != nil {
		return "", inoErr("getlayout", ino, err)
	}
	return pool, nil
}

// SetPool sets the pool of directory ino's default layout ("" clears it).
// The pool must exist; new files below the directory are placed on its
// targets, existing files stay where they are.
func (s *Service) SetPool(ctx context.Context, ino uint64, pool string) error {
	if err := s.setPool(ctx, ino, pool); err != nil {
		return inoErr("setlayout", ino, err)
	}
	return nil
}

func (s *Service) setPool(ctx context.Context, ino uint64, pool string) error {
	if pool != "" {
		if err := placement.ValidPoolName(pool); err != nil {
			return err
		}
		pv, err := s.placeView(ctx)
		if err != nil {
			return err
		}
		if pv.pools == nil {
			return errs.New(errs.NotSupported, "meta: this server has no pools")
		}
		if _, ok := pv.pools[pool]; !ok {
			// Maybe made through another metadata service since the
			// last refresh.
			if err := s.reloadPools(ctx, &pv); err != nil {
				return err
			}
		}
		if _, ok := pv.pools[pool]; !ok {
			return errs.New(errs.NotFound, "no pool %q (sluice pool create)", pool)
		}
	}
	now := s.nowNs()
	return s.update(ctx, func(tx kv.Txn) error {
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		if !n.isDir() {
			return errs.New(errs.NotDir, "only a directory's layout names a pool")
		}
		if pool == "" {
			tx.Delete(dirPoolKey(ino))
		} else {
			tx.Set(dirPoolKey(ino), []byte(pool))
		}
		if err := setCtime(tx, ino, n, now); err != nil {
			return err
		}
		tx.Set(inodeKey(ino), n.encode())
		return nil
	})
}

// Pools lists the pools (errs.NotSupported without a PoolManager).
func (s *Service) Pools(ctx context.Context) ([]wire.PoolInfo, error) {
	pm, ok := s.targets.(PoolManager)
	if !ok {
		return nil, errs.New(errs.NotSupported, "meta: this server has no pools")
	}
	return pm.Pools(ctx)
}

// ChangePool creates, changes or deletes a pool.
func (s *Service) ChangePool(ctx context.Context, req *wire.PoolChangeReq) error {
	pm, ok := s.targets.(PoolManager)
	if !ok {
		return errs.New(errs.NotSupported, "meta: this server has no pools")
	}
	return pm.ChangePool(ctx, req)
}
