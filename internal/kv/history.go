package kv

import (
	"bytes"

	"github.com/tidwall/btree"
)

// maxHistoryKeys bounds the keys history remembers. At the ~10^5 keys/s a
// busy metadata server writes this covers a few hundred milliseconds, far
// longer than a typical transaction; older transactions are still validated
// exactly, only more slowly.
const maxHistoryKeys = 1 << 16

// history remembers which keys the recent groups wrote and in which
// generation. Validation uses it as a filter: a transaction none of whose
// reads touches a key written after its snapshot is valid without reading
// the store. Only the goroutine processing a commit group uses it (one at
// a time: see committer).
type history struct {
	latest *btree.BTreeG[keyGen] // per key, the last generation that wrote it
	groups []histGroup           // oldest first
	size   int                   // keys in groups

	// horizon is the newest generation whose writes may have been
	// forgotten; transactions whose snapshot is older are validated exactly.
	horizon uint64
}

type keyGen struct {
	key []byte
	gen uint64
}

type histGroup struct {
	gen  uint64
	keys [][]byte
}

func newHistory() *history {
	return &history{latest: btree.NewBTreeGOptions(func(a, b keyGen) bool {
		return bytes.Compare(a.key, b.key) < 0
	}, btree.Options{NoLocks: true})}
}

// record notes that generation gen wrote tx's keys.
func (h *history) record(gen uint64, tx *txn) {
	n := 0
	tx.writes.Scan(func(w write) bool { n += len(w.key); return true })
	buf := make([]byte, 0, n) // one allocation for all of tx's keys
	g := histGroup{gen: gen, keys: make([][]byte, 0, tx.writes.Len())}
	tx.writes.Scan(func(w write) bool {
		buf = append(buf, w.key...)
		k := buf[len(buf)-len(w.key) : len(buf) : len(buf)]
		g.keys = append(g.keys, k)
		h.latest.Set(keyGen{k, gen})
		return true
	})
	h.groups = append(h.groups, g)
	h.size += len(g.keys)
	for h.size > maxHistoryKeys && len(h.groups) > 1 {
		old := h.groups[0]
		h.groups[0] = histGroup{}
		h.groups = h.groups[1:]
		h.size -= len(old.keys)
		for _, k := range old.keys {
			if e, ok := h.latest.Get(keyGen{key: k}); ok && e.gen == old.gen {
				h.latest.Delete(e)
			}
		}
		h.horizon = max(h.horizon, old.gen)
	}
}

// changedSince reports whether a key that tx read may have been written
// after its snapshot: true means "validate exactly", false means "valid".
func (h *history) changedSince(tx *txn) bool {
	if tx.gen < h.horizon {
		return true
	}
	for _, r := range tx.reads {
		if e, ok := h.latest.Get(keyGen{key: r.key}); ok && e.gen > tx.gen {
			return true
		}
	}
	for _, r := range tx.scans {
		changed := false
		h.latest.Ascend(keyGen{key: r.start}, func(e keyGen) bool {
			if !below(e.key, r.end) {
				return false
			}
			changed = e.gen > tx.gen
			return !changed
		})
		if changed {
			return true
		}
	}
	return false
}
