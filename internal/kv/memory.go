package kv

import (
	"bytes"
	"sync/atomic"

	"github.com/tidwall/btree"
)

// NewMemory returns an in-memory DB for tests. It has the same transaction
// semantics as the durable engines (snapshots, conflict detection, group
// commit) but keeps nothing across Close; Sync returns at once.
func NewMemory() DB {
	return newDB(newMemStore(), SyncAlways, 0)
}

// memStore keeps versions of a copy-on-write B-tree. Published versions are
// never modified, so readers use them without locks; the committer modifies
// a private copy and publishes a copy of it after each batch.
type memStore struct {
	published atomic.Pointer[memVersion] // readers' version; immutable
	master    *btree.BTreeG[pair]        // committer's version
}

type memVersion struct {
	tree *btree.BTreeG[pair]
	gen  uint64
}

func pairLess(a, b pair) bool { return bytes.Compare(a.key, b.key) < 0 }

func newMemStore() *memStore {
	s := &memStore{master: btree.NewBTreeGOptions(pairLess, btree.Options{NoLocks: true, Degree: 8})}
	s.published.Store(&memVersion{tree: s.master.Copy()})
	return s
}

func (s *memStore) snapshot() (reader, uint64, error) {
	v := s.published.Load()
	return memReader{v.tree}, v.gen, nil
}

func (s *memStore) newBatch() (batch, error) {
	return &memBatch{memReader: memReader{s.master.Copy()}, s: s}, nil
}

// sync has nothing to do: the memory engine keeps nothing across Close.
func (s *memStore) sync() error { return nil }

func (s *memStore) close() error { return nil }

type memReader struct{ tree *btree.BTreeG[pair] }

func (r memReader) get(key []byte) ([]byte, bool, error) {
	p, ok := r.tree.Get(pair{key: key})
	return p.value, ok, nil
}

func (r memReader) iter(start, end []byte) (iterator, error) {
	return &memIter{it: r.tree.Iter(), start: start, end: end}, nil
}

func (r memReader) release() {}

type memIter struct {
	it         btree.IterG[pair]
	start, end []byte
	valid      bool
}

func (i *memIter) first() bool {
	i.valid = i.it.Seek(pair{key: i.start}) && below(i.it.Item().key, i.end)
	return i.valid
}

func (i *memIter) next() bool {
	i.valid = i.valid && i.it.Next() && below(i.it.Item().key, i.end)
	return i.valid
}

func (i *memIter) key() []byte            { return i.it.Item().key }
func (i *memIter) value() ([]byte, error) { return i.it.Item().value, nil }
func (i *memIter) close() error           { i.it.Release(); return nil }

// memBatch writes into a copy of the committer's version; commit makes it
// the committer's version and publishes it.
type memBatch struct {
	memReader
	s *memStore
}

// set keeps key and value: the committer passes slices that nobody
// modifies afterwards.
func (b *memBatch) set(key, value []byte) error {
	b.tree.Set(pair{key: key, value: value})
	return nil
}

func (b *memBatch) delete(key []byte) error {
	b.tree.Delete(pair{key: key})
	return nil
}

func (b *memBatch) commit(bool) error {
	b.s.master = b.tree
	b.s.published.Store(&memVersion{tree: b.tree.Copy(), gen: b.s.published.Load().gen + 1})
	return nil
}
