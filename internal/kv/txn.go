package kv

import (
	"bytes"
	"fmt"

	"github.com/tidwall/btree"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Limits enforced by every engine. Update returns an error wrapping
// errs.ErrInvalid, and writes nothing, when a transaction exceeds them.
const (
	MaxKeySize   = 4 << 10 // bytes
	MaxValueSize = 1 << 20 // bytes
)

// errTxnDone is returned by Get and Scan on a Txn whose function returned.
var errTxnDone = &errs.Error{Code: errs.Invalid, Msg: "kv: transaction used after its function returned"}

// txn implements Txn for View and Update. It reads from a snapshot of the
// committed state, buffers its writes, and (in Update) records what it read
// so that the committer can check at commit time that nothing it read has
// changed.
type txn struct {
	snap     reader // nil once the function returned
	writable bool
	done     bool

	// gen is the number of batches committed into the snapshot.
	gen uint64
	// attempt is the 1-based number of the Update attempt this txn is.
	attempt int
	// priority is set on the attempts of the Update that holds priority.
	priority bool
	// requireSync is set by RequireSync.
	requireSync bool

	writes *btree.BTreeG[write] // buffered writes by key; nil until the first
	reads  []pointRead          // Get results served by the snapshot
	scans  []rangeRead          // Scan ranges served by the snapshot
	arena  arena                // copies held by reads and scans

	// err is the first error that dooms the transaction: a write in View, a
	// key or value over the limits, a failed read. Update and View return it
	// when fn itself returns nil.
	err error

	// commitErr is the committer's verdict, valid once the group is done.
	commitErr error
}

// write is one buffered Set (del false) or Delete (del true).
type write struct {
	key, value []byte
	del        bool
}

func writeLess(a, b write) bool { return bytes.Compare(a.key, b.key) < 0 }

// pointRead is a Get the snapshot answered: the key, and what it saw.
type pointRead struct {
	key, value []byte
	found      bool
}

// rangeRead is the part of a Scan the snapshot answered: the store entries
// in [start, end) in ascending order. end == nil means no upper bound. When
// the scan stopped early, end is just past the last key visited, so keys
// beyond it are not part of the read set.
type rangeRead struct {
	start, end []byte
	seen       []pair
}

type pair struct{ key, value []byte }

func newTxn(snap reader, writable bool, gen uint64, attempt int) *txn {
	return &txn{snap: snap, writable: writable, gen: gen, attempt: attempt}
}

// finish ends the transaction's read phase: the function has returned.
func (t *txn) finish() {
	t.done = true
	if t.snap != nil {
		t.snap.release()
		t.snap = nil
	}
}

func (t *txn) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

func (t *txn) hasWrites() bool { return t.writes != nil && t.writes.Len() > 0 }

func (t *txn) Get(key []byte) ([]byte, error) {
	if t.done {
		return nil, errTxnDone
	}
	if t.writes != nil {
		if w, ok := t.writes.Get(write{key: key}); ok {
			if w.del {
				return nil, ErrNotFound
			}
			return clone(w.value), nil
		}
	}
	v, found, err := t.snap.get(key)
	if err != nil {
		err = fmt.Errorf("kv: get %q: %w", abbrev(key), err)
		t.fail(err)
		return nil, err
	}
	if t.writable {
		r := pointRead{key: t.arena.copy(key), found: found}
		if found {
			r.value = t.arena.copy(v)
		}
		t.reads = append(t.reads, r)
	}
	if !found {
		return nil, ErrNotFound
	}
	return clone(v), nil
}

func (t *txn) Scan(start, end []byte, limit int, fn func(key, value []byte) bool) error {
	if t.done {
		return errTxnDone
	}
	if end != nil && bytes.Compare(start, end) >= 0 {
		return nil
	}
	// The store may keep the bounds for the iterator's life; fn may not
	// expect that, so hand it copies.
	start = t.arena.copy(start)
	if end != nil {
		end = t.arena.copy(end)
	}
	it, err := t.snap.iter(start, end)
	if err != nil {
		err = fmt.Errorf("kv: scan [%q, %q): %w", abbrev(start), abbrev(end), err)
		t.fail(err)
		return err
	}

	// Iterate over a copy of the write buffer so that fn may write.
	var (
		buf btree.IterG[write]
		bOK bool
	)
	if t.hasWrites() {
		buf = t.writes.Copy().Iter()
		defer buf.Release()
		bOK = buf.Seek(write{key: start}) && below(buf.Item().key, end)
	}
	var (
		seen    []pair
		stopped []byte // last key visited when the scan stopped early
		visited int
		iterErr error
		sOK     = it.first()
	)
	for sOK || bOK {
		var (
			k, v []byte
			del  bool
		)
		c := 1 // <0: store entry first, 0: same key, >0: buffer entry first
		switch {
		case sOK && bOK:
			c = bytes.Compare(it.key(), buf.Item().key)
		case sOK:
			c = -1
		}
		if c <= 0 {
			sv, err := it.value()
			if err != nil {
				iterErr = err
				break
			}
			k, v = it.key(), sv
			if t.writable {
				k, v = t.arena.copy(k), t.arena.copy(v)
				seen = append(seen, pair{k, v})
			} else {
				k, v = clone(k), clone(v)
			}
			sOK = it.next()
		}
		if c >= 0 {
			w := buf.Item()
			k, v, del = w.key, w.value, w.del
			bOK = buf.Next() && below(buf.Item().key, end)
		}
		if del {
			continue
		}
		visited++
		if !fn(userCopy(k, v)) || (limit > 0 && visited >= limit) {
			stopped = k
			break
		}
	}
	if err := it.close(); iterErr == nil {
		iterErr = err
	}
	if err := iterErr; err != nil {
		err = fmt.Errorf("kv: scan [%q, %q): %w", abbrev(start), abbrev(end), err)
		t.fail(err)
		return err
	}
	if t.writable {
		if stopped != nil {
			end = append(stopped[:len(stopped):len(stopped)], 0)
		}
		t.scans = append(t.scans, rangeRead{start: start, end: end, seen: seen})
	}
	return nil
}

func (t *txn) Set(key, value []byte) {
	if !t.checkWrite("set", key) {
		return
	}
	if len(value) > MaxValueSize {
		t.fail(fmt.Errorf("kv: set %q: value of %d bytes exceeds the limit of %d: %w",
			abbrev(key), len(value), MaxValueSize, errs.ErrInvalid))
		return
	}
	b := make([]byte, len(key)+len(value))
	copy(b, key)
	copy(b[len(key):], value)
	t.put(write{key: b[:len(key):len(key)], value: b[len(key):]})
}

func (t *txn) RequireSync() { t.requireSync = true }

func (t *txn) Delete(key []byte) {
	if !t.checkWrite("delete", key) {
		return
	}
	t.put(write{key: clone(key), del: true})
}

// checkWrite reports whether a write of key may be buffered, dooming the
// transaction if not.
func (t *txn) checkWrite(op string, key []byte) bool {
	if t.done {
		panic("kv: Txn." + op + " called after the transaction's function returned")
	}
	if !t.writable {
		t.fail(fmt.Errorf("kv: %s %q in a read-only transaction: %w", op, abbrev(key), errs.ErrInvalid))
		return false
	}
	if len(key) > MaxKeySize {
		t.fail(fmt.Errorf("kv: %s: key of %d bytes exceeds the limit of %d: %w",
			op, len(key), MaxKeySize, errs.ErrInvalid))
		return false
	}
	return t.err == nil
}

func (t *txn) put(w write) {
	if t.writes == nil {
		t.writes = btree.NewBTreeGOptions(writeLess, btree.Options{NoLocks: true})
	}
	t.writes.Set(w)
}

// below reports whether key < end, where end == nil is no bound.
func below(key, end []byte) bool { return end == nil || bytes.Compare(key, end) < 0 }

// clone returns a copy of b that is never nil.
func clone(b []byte) []byte { return append(make([]byte, 0, len(b)), b...) }

// userCopy returns copies of key and value, in one allocation, for the
// caller to keep.
func userCopy(key, value []byte) ([]byte, []byte) {
	b := make([]byte, len(key)+len(value))
	copy(b, key)
	copy(b[len(key):], value)
	return b[:len(key):len(key)], b[len(key):]
}

// abbrev shortens a key for an error message.
func abbrev(key []byte) []byte {
	const n = 64
	if len(key) > n {
		return key[:n]
	}
	return key
}

// arena hands out copies carved from larger chunks, so that recording a
// read set costs few allocations. Copies stay valid for the arena's life.
type arena struct{ buf []byte }

func (a *arena) copy(b []byte) []byte {
	if len(b) > cap(a.buf)-len(a.buf) {
		a.buf = make([]byte, 0, max(4<<10, len(b)))
	}
	off := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[off:len(a.buf):len(a.buf)]
}
