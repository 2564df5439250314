package kv

// store is the storage under the transaction layer: an ordered map of byte
// keys to byte values with consistent read snapshots and atomic batches
// that are durable on commit or on sync. The transaction layer (db, committer) turns it into a DB; the
// engines (memory, pebble) only implement store.
//
// Only the committer writes (one goroutine at a time: see committer), one
// batch at a time, so a batch's reads see exactly the committed state plus
// the batch's own writes.
type store interface {
	// snapshot returns a consistent view of the committed state and the
	// number of batches committed into it. It holds only data whose batch
	// commit has returned (stores publish a new snapshot when a commit
	// completes rather than reading the live state), so a reader never
	// sees a write that a crash of the process could undo.
	snapshot() (r reader, gen uint64, err error)

	// newBatch starts a batch. Its reads see the committed state plus the
	// writes added to the batch so far.
	newBatch() (batch, error)

	// sync makes every batch committed so far survive a crash of the
	// machine. It may be called concurrently with a batch's commit.
	sync() error

	// close makes every committed batch durable and releases the store.
	// No snapshot or batch may be open.
	close() error
}

// reader reads keys and ranges. It is used by one goroutine at a time.
type reader interface {
	// get returns the value of key and whether it exists. The value is
	// valid until the next call on the reader and must not be modified.
	get(key []byte) (value []byte, found bool, err error)

	// iter returns an iterator over [start, end); end == nil means no upper
	// bound. The iterator may keep start and end until it is closed.
	iter(start, end []byte) (iterator, error)

	// release frees the reader. It is called exactly once.
	release()
}

// iterator walks a key range in ascending order. Key and value are valid
// until the next move and must not be modified.
type iterator interface {
	first() bool
	next() bool
	key() []byte
	value() ([]byte, error)
	// close returns the first error the iterator met, if any.
	close() error
}

// batch is a set of writes applied atomically by commit.
type batch interface {
	reader
	// set and delete may keep key and value: the caller does not modify
	// them afterwards.
	set(key, value []byte) error
	delete(key []byte) error
	// commit applies the batch atomically: when it returns nil the writes
	// survive a crash of the process and are visible to later snapshots,
	// whose gen is one more. With sync they, and every batch committed
	// before, also survive a crash of the machine, and become visible only
	// once they do. The batch is released afterwards whatever the outcome.
	commit(sync bool) error
}
