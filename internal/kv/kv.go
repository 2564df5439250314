// Package kv defines the ordered, transactional key-value engine that the
// metadata service stores its namespace in, and ships its engines:
//
//   - NewMemory: an in-memory engine for unit tests (not durable), on a
//     copy-on-write B-tree (github.com/tidwall/btree);
//   - OpenPebble: the default embedded engine, on
//     github.com/cockroachdb/pebble/v2;
//   - OpenEtcd: a distributed engine on an etcd cluster, shared by several
//     metadata services (see "etcd engine" below);
//   - NewFaulty: a wrapper that fails chosen operations, for testing
//     callers' error paths.
//
// Later engines (TiKV, FoundationDB) implement the same DB interface and
// must pass the same conformance suite (kvtest.Run).
//
// # Transactions
//
// Update runs a function against a transaction and commits its writes
// atomically. Transactions are serializable: every value a transaction read
// (Get, and the keys a Scan visited or would have visited) must be unchanged
// at commit time, or the commit fails with a conflict and Update runs the
// function again from the start, up to a retry limit (then it returns an
// error wrapping errs.ErrConflict). The function must therefore have no side
// effects outside the transaction, or only idempotent ones.
//
// Blind writes (Set or Delete of a key the transaction never read) never
// cause a conflict: the last committed writer wins. The metadata service
// relies on this for directory timestamps so that concurrent creates in one
// directory do not conflict.
//
// An Update that returns nil survives a crash of the process. Whether it
// also survives a crash of the machine (power loss) at once depends on the
// engine's sync mode (see Durability); DB.Sync and Txn.RequireSync make it
// so. Engines group the commits of concurrent transactions into one write
// (group commit), so concurrency raises throughput.
//
// Reads inside a transaction see its own earlier writes (Get and Scan).
//
// Keys and values passed in are copied by the engine; slices returned to the
// caller are the caller's to keep and must not be modified by the engine
// afterwards. All methods of DB are safe for concurrent use; a Txn is used by
// one goroutine only and only until its function returns.
//
// # Commit pipeline (memory and pebble engines)
//
// The embedded engines share one optimistic transaction layer over a store
// that has only snapshots and atomic batches:
//
//  1. A transaction reads from a snapshot of the committed state taken when
//     its attempt starts, so it sees one consistent state. It buffers its
//     writes in an ordered map that Get and Scan merge over the snapshot,
//     and records its read set: each Get's key and the value (or absence)
//     it saw, and each Scan's range up to the last key it visited (to the
//     range's end if it ran out) with the entries it saw there.
//  2. When the function returns nil, a transaction with writes is handed to
//     the engine's committer, which processes one group at a time (on the
//     goroutine of the transaction that found it idle, or on its own); a
//     read-only one is done (it is serializable at its snapshot).
//  3. The committer takes all pending transactions as a group, validates
//     them one by one against the committed state plus the writes of those
//     accepted before them in the group, and puts the accepted ones' writes
//     into one batch, committed with a single sync. Then it wakes the group.
//     A transaction is valid when every read would return what it saw; an
//     in-memory history of the keys recent groups wrote settles that for
//     most transactions without reading the store, the rest are checked by
//     reading their keys and ranges again. Writes are not part of the read
//     set, which is why blind writes never conflict.
//  4. A rejected transaction makes Update run the function again on a fresh
//     snapshot, at once for the first attempts, then after a short random
//     backoff. An Update that lost 4 times queues for priority (one at a
//     time): its attempts go first in their group, and once one of them is
//     rejected its read set is reserved, that is, other transactions that
//     write into it are rejected until the priority Update ends. Its next
//     attempt then commits, so a hot key cannot starve a writer.
//
// Because of reservations, fn must not wait for another Update on the same
// DB (a nested Update writing what fn read could wait for fn forever).
//
// Validation order is commit order, so the committed history is serial.
//
// # Durability
//
// The pebble engine keeps its own commit log (commitlog.go) in place of
// pebble's WAL, which it disables: pebble buffers unsynced WAL records in
// the process until a 32 KiB block fills, so a kill -9 would lose
// acknowledged commits that were not synced. The committer appends each
// group's batch to the log with one write(2), then applies it to pebble's
// memtable, then publishes the snapshot that shows it, then wakes the
// group: an acknowledged commit is in the operating system and survives a
// crash of the process; a transaction that starts after an Update
// returned sees its writes. Whether it survives a crash of the machine
// depends on PebbleOptions.Sync:
//
//   - SyncAlways: the log is synced (fdatasync) before the group is
//     published and woken, one sync per group: an acknowledged commit is
//     durable, and reads never see a write a power loss could undo.
//   - SyncGroup (the default): a background syncer syncs the log once per
//     window (PebbleOptions.SyncWindow, default 5 ms) when there are
//     commits to sync. Reads see acknowledged commits at once, as a local
//     file system shows writes from its page cache. A power loss loses a
//     suffix of the commits acknowledged in the last window, never a commit
//     before a surviving one. DB.Sync and Txn.RequireSync sync at once.
//
// Pebble's flushes write its memtables to sstables; before it creates one,
// the log is synced, so the tables never hold a commit that the log could
// lose, and replaying the log over them (at open) is idempotent. A failed
// sync or write of the log fails every later commit and Sync: the store
// must be reopened (after fsync fails, what reached the disk is unknown).
// Pebble's own log messages go to PebbleOptions.Logger (informational ones
// at debug level) and are discarded by default.
//
// # etcd engine
//
// OpenEtcd reuses the transaction type of the embedded engines (buffered
// writes, read-your-writes, read-set recording) over an etcd snapshot, and
// lets etcd validate commits, so that any number of processes may share one
// cluster and key prefix. Every key is stored as Prefix+key.
//
//   - Snapshot: a transaction's first read is linearizable (so it sees
//     every Update that returned before it started) and fixes the etcd
//     revision; later reads are at that revision, which any member that has
//     applied it can serve. Scans page through etcd (64 keys, then 1024 at
//     a time) rather than loading a range at once.
//   - Commit: one etcd transaction. If(): for each key read, its mod
//     revision equals the one seen (0 for absent); for each range scanned
//     (up to where the scan stopped), no key in it has a mod revision above
//     the snapshot's (no insert or update), and each key seen there still
//     has the mod revision seen (no delete). Then(): the writes. A failed
//     compare reruns the function, with the same limit and backoff as the
//     embedded engines but without their priority queue, so a hot key can
//     starve a writer until the attempt limit. Blind writes add no compare
//     and never conflict. A revision compacted away mid-transaction also
//     reruns it.
//   - Durability: an Update that returned nil is in the raft log of a
//     quorum of etcd members, each synced to disk; etcd batches concurrent
//     commits into its log writes itself.
//   - Limits: etcd caps the compares, and the writes, of one transaction
//     at --max-txn-ops (default 128; EtcdOptions.MaxTxnOps must match). An
//     Update needing more (a compare per key read or seen by a scan, plus
//     one per range scanned) fails with errs.ErrInvalid naming the limit; it
//     is never split, which would not be atomic. A commit's request must fit
//     etcd's --max-request-bytes (default 1.5 MiB, so one 1 MiB value fits
//     with little else). etcd keeps everything in memory-mapped bbolt and
//     recommends a database of at most a few GiB (--quota-backend-bytes,
//     8 GiB at most): this bounds the file system to tens of millions of
//     files (docs/adr/0003-etcd-engine.md). etcd keeps old revisions until
//     compacted: run it with --auto-compaction-retention.
//   - Ambiguity: a commit request that fails after it may have reached
//     etcd (timeout, lost connection, leader change) has an unknown
//     outcome. Update does not rerun the function (it could apply twice);
//     it returns an error wrapping ErrCommitUnknown and errs.ErrUnavailable,
//     and never a context error. The caller must read to learn the outcome.
//     The commit runs under EtcdOptions.RequestTimeout, not the caller's
//     context: once sent it is waited for, as in the embedded engines.
//     Requests etcd rejects before proposing them (too many ops, too large,
//     out of space) fail cleanly with nothing written.
//
// # Limits
//
// Keys are at most MaxKeySize (4 KiB) and values at most MaxValueSize
// (1 MiB); a transaction that writes a larger one fails: Update returns an
// error wrapping errs.ErrInvalid and writes nothing. Update runs its
// function at most 100 times. The empty key is a valid key.
package kv

import (
	"context"
	"errors"

	"github.com/sluice-fs/sluice/internal/errs"
)

// ErrNotFound is returned by Txn.Get for a missing key.
var ErrNotFound = errors.New("kv: key not found")

// ErrClosed is returned by operations on a closed DB.
var ErrClosed = &errs.Error{Code: errs.Unavailable, Msg: "kv: database closed"}

// DB is an ordered, transactional key-value store.
type DB interface {
	// View runs fn in a read-only transaction over a consistent snapshot.
	// Set and Delete inside View return an error from View.
	View(ctx context.Context, fn func(tx Txn) error) error

	// Update runs fn in a read-write transaction and commits its writes
	// atomically and durably if fn returns nil. fn's error is returned
	// unchanged and nothing is written. See the package comment for the
	// conflict and retry rules.
	//
	// ctx is checked before each attempt and before the commit; an error
	// wrapping ctx.Err() means that nothing was written. A commit that has
	// started is waited for.
	Update(ctx context.Context, fn func(tx Txn) error) error

	// Sync returns once every Update that returned nil before Sync was
	// called is durable against a crash of the machine; concurrent calls
	// share one sync. It is cheap when there is nothing to sync, and
	// returns at once on engines that sync every commit (etcd, memory,
	// pebble with SyncAlways). An error means durability is not assured
	// (a failed sync also fails later commits: see Durability); an error
	// wrapping ctx.Err() means the caller stopped waiting.
	Sync(ctx context.Context) error

	// Close releases the engine. It waits for View, Update and Sync calls
	// in progress (so it must not be called from inside fn); later calls
	// fail with ErrClosed. Close is idempotent.
	Close() error
}

// Txn is one transaction. It is not safe for concurrent use.
type Txn interface {
	// Get returns the value of key, or ErrNotFound. The value is a copy
	// that the caller may keep and change.
	Get(key []byte) ([]byte, error)

	// Scan calls fn for each key in [start, end) in ascending order, until
	// fn returns false or limit keys were visited (limit <= 0: no limit).
	// end == nil means no upper bound. In an Update, the range actually
	// visited counts as read for conflict detection (phantoms included).
	// fn may call Set and Delete; the scan shows the writes made before
	// Scan was called.
	Scan(start, end []byte, limit int, fn func(key, value []byte) bool) error

	// Set writes key = value when the transaction commits.
	Set(key, value []byte)

	// Delete removes key when the transaction commits (no error if absent).
	Delete(key []byte)

	// RequireSync makes the transaction's commit durable against a crash
	// of the machine before Update returns, and visible to other
	// transactions only then, whatever the engine's sync mode. It is for
	// writes that other systems act on and that must never be undone (the
	// inode allocator, target IDs, the chain table). It has no effect in
	// View, nor in engines that sync every commit.
	RequireSync()
}

// PrefixEnd returns the smallest key greater than every key with the given
// prefix, for use as Scan's end; nil if there is none.
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
