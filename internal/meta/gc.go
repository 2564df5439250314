package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
)

const (
	// gcBatch is how many queue entries one View reads and one Update
	// dequeues: at most 128, etcd's default --max-txn-ops, since the
	// dequeue deletes them all in one transaction.
	gcBatch       = 128
	gcParallelism = 16 // files whose chunks are removed at once
	// gcPace is the least time between the starts of passes triggered by
	// new garbage.
	gcPace = 200 * time.Millisecond
)

type garbage struct {
	ino    uint64
	layout placement.Layout
}

// CollectGarbage removes the chunks of every file in the garbage queue:
// for each target of a freed file's layout it calls Targets.RemoveChunks
// with the slots on that target, and once all succeeded deletes the queue
// entry. A failed file stays queued (and is retried by the next pass); a
// crash between removal and dequeue only repeats the removal, which is
// idempotent, and inode numbers are never reused, so chunks are neither
// leaked nor removed from a later file. The engine is synced before any
// removal, so the unlink that queued a file is durable before its data
// goes. It returns the failures, joined.
func (s *Service) CollectGarbage(ctx context.Context) error {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	prefix := []byte{pfxGarbage}
	start, end := prefix, kv.PrefixEnd(prefix)
	var failures []error
	for {
		var batch []garbage
		err := s.db.View(ctx, func(tx kv.Txn) error {
			batch = batch[:0]
			var bad error
			err := tx.Scan(start, end, gcBatch, func(k, v []byte) bool {
				if len(k) != 9 {
					bad = errs.New(errs.Corruption, "meta: bad garbage queue key %q", k)
					return false
				}
				g := garbage{ino: binary.BigEndian.Uint64(k[1:])}
				if bad = decodeLayout(v, &g.layout); bad != nil {
					bad = fmt.Errorf("meta: garbage queue entry for inode %d: %w", g.ino, bad)
					return false
				}
				batch = append(batch, g)
				return true
			})
			return errors.Join(err, bad)
		})
		if err != nil {
			return errors.Join(append(failures, fmt.Errorf("meta: read garbage queue: %w", err))...)
		}
		if len(batch) == 0 {
			break
		}
		// The unlinks that queued these files may not be durable yet (a
		// sync window): once their chunks are gone, a power loss must not
		// bring the files back.
		if err := s.db.Sync(ctx); err != nil {
			return errors.Join(append(failures, fmt.Errorf("meta: sync before removing chunks: %w", err))...)
		}
		done := make([]bool, len(batch))
		errsBy := make([]error, len(batch))
		var wg sync.WaitGroup
		sem := make(chan struct{}, gcParallelism)
		for i := range batch {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				errsBy[i] = s.removeChunks(ctx, batch[i])
				done[i] = errsBy[i] == nil
			})
		}
		wg.Wait()
		failures = append(failures, slicesNonNil(errsBy)...)
		err = s.update(ctx, func(tx kv.Txn) error {
			for i, g := range batch {
				if done[i] {
					tx.Delete(garbageKey(g.ino))
				}
			}
			return nil
		})
		if err != nil {
			return errors.Join(append(failures, fmt.Errorf("meta: dequeue removed chunks: %w", err))...)
		}
		if len(batch) < gcBatch {
			break
		}
		start = append(garbageKey(batch[len(batch)-1].ino), 0)
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(failures...)
}

// removeChunks removes a freed file's chunks from every chain of its
// layout, one call per chain with the slots it holds.
func (s *Service) removeChunks(ctx context.Context, g garbage) error {
	bySlot := make(map[placement.ChainID][]uint32)
	for i, t := range g.layout.Chains {
		bySlot[t] = append(bySlot[t], uint32(i))
	}
	ids := make([]placement.ChainID, 0, len(bySlot))
	for t := range bySlot {
		ids = append(ids, t)
	}
	slices.Sort(ids)
	var failed []error
	for _, t := range ids {
		if err := s.targets.RemoveChunks(ctx, t, g.ino, bySlot[t]); err != nil {
			failed = append(failed, fmt.Errorf("meta: remove chunks of freed inode %d in chain %d: %w", g.ino, t, err))
		}
	}
	return errors.Join(failed...)
}

func slicesNonNil(es []error) []error {
	out := es[:0:0]
	for _, e := range es {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// PendingGarbage returns the number of files whose chunks await removal.
func (s *Service) PendingGarbage(ctx context.Context) (int, error) {
	n := 0
	prefix := []byte{pfxGarbage}
	err := s.db.View(ctx, func(tx kv.Txn) error {
		n = 0
		return tx.Scan(prefix, kv.PrefixEnd(prefix), 0, func(_, _ []byte) bool {
			n++
			return true
		})
	})
	return n, err
}
