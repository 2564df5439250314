package kv

import (
	"context"
	"fmt"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Copy copies every key of src into dst, which must be empty, in
// transactions of at most batch keys (etcd bounds the operations of one
// transaction). src is read from one snapshot, so the copy is a consistent
// image of src as of the start; dst is not written atomically as a whole:
// run Copy only while nothing else uses either DB, and on an error empty
// dst before trying again. It returns the number of keys copied.
func Copy(ctx context.Context, dst, src DB, batch int) (int, error) {
	if batch <= 0 {
		batch = 100
	}
	empty := true
	err := dst.View(ctx, func(tx Txn) error {
		return tx.Scan(nil, nil, 1, func(k, v []byte) bool { empty = false; return false })
	})
	if err != nil {
		return 0, fmt.Errorf("kv: copy: read the destination: %w", err)
	}
	if !empty {
		return 0, errs.New(errs.Exists, "kv: copy: the destination is not empty")
	}
	n := 0
	var pending []pair
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		err := dst.Update(ctx, func(tx Txn) error {
			for _, p := range pending {
				tx.Set(p.key, p.value)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("kv: copy: write %d keys: %w", len(pending), err)
		}
		n += len(pending)
		pending = pending[:0]
		return nil
	}
	var werr error
	err = src.View(ctx, func(tx Txn) error {
		return tx.Scan(nil, nil, 0, func(k, v []byte) bool {
			pending = append(pending, pair{key: clone(k), value: clone(v)})
			if len(pending) >= batch {
				werr = flush()
			}
			return werr == nil
		})
	})
	if err == nil {
		err = werr
	}
	if err == nil {
		err = flush()
	}
	if err != nil {
		return n, err
	}
	return n, nil
}
