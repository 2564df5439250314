package target

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sluice-fs/sluice/internal/placement"
)

// discardStale removes the stores of replicated chains that a hosted
// target is no longer a member of in the chain table v: the copies a
// returning node kept of chains whose replica was rebuilt elsewhere while
// it was away (re-replication), or that a draining target gave away. Such
// a replica gets no requests (resolve refuses non-members); if it ever
// joins the chain again, it joins as syncing and the tail copies it
// everything. A chain the table does not list is left alone, and so is
// one the current table (newer than v, maybe) makes it a member of again.
// It runs in the background after a new table arrives (SetCluster), one
// at a time. Lock order: hosted.mu, then chainState.mu.
func (s *Service) discardStale(v view) {
	if !s.cs.discard.TryLock() {
		return // the next table looks again
	}
	defer s.cs.discard.Unlock()
	for _, id := range s.ids {
		h := s.targets[id]
		dir := filepath.Join(h.store.Dir(), "chains")
		ents, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				s.opts.logger().Warn("target: list chain stores", "target", id, "err", err)
			}
			continue
		}
		for _, e := range ents {
			n, err := strconv.ParseUint(e.Name(), 10, 32)
			if err != nil || !e.IsDir() {
				continue
			}
			cid := placement.ChainID(n)
			c, listed := v.chains[cid]
			if !listed {
				continue
			}
			if _, member := c.State(id); member {
				continue
			}
			h.mu.Lock() // chainStore opens stores under it: none opens meanwhile
			if h.closed {
				h.mu.Unlock()
				return
			}
			// A newer table may have made the target a member again
			// (syncing): look at the current one, under h.mu.
			s.cs.mu.Lock()
			cur, listed := s.cs.mu.view.chains[cid]
			s.cs.mu.Unlock()
			if _, member := cur.State(id); !listed || member {
				h.mu.Unlock()
				continue
			}
			if st := h.chains[cid]; st != nil {
				st.Close()
				delete(h.chains, cid)
			}
			err = os.RemoveAll(filepath.Join(dir, e.Name()))
			h.mu.Unlock()
			if err != nil {
				s.opts.logger().Warn("target: discard a stale chain store", "target", id, "chain", cid, "err", err)
				continue
			}
			s.opts.logger().Info("target: discarded the store of a chain this target left", "target", id, "chain", cid, "chain_version", c.Version)
		}
	}
}
