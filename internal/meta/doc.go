// Package meta is Sluice's metadata service: the inode namespace of one file
// system (directories, files, symlinks, device nodes, hard links, extended
// attributes, file layouts) stored in a kv.DB, served over the wire
// protocol's metadata ops 1-26 (Service.Register) and callable in-process.
//
// The service gives POSIX namespace semantics: entry names of 1-255 bytes
// without '/' or NUL (not "." or ".."), atomic rename with Linux renameat2
// rules (RENAME_NOREPLACE, RENAME_EXCHANGE), hard links, symlinks, paths
// resolved with "." and ".." and up to 40 symlinks. It does NOT check
// permissions: mode, uid and gid are stored and returned, and the FUSE mount
// enforces access with the kernel's default_permissions; other clients
// (S3 gateway) enforce their own policy. File data lives on storage targets;
// the service only chooses each file's layout, records its size when the
// client commits a write, and removes a freed file's chunks.
//
// # Invariants
//
//   - Inode numbers are allocated in blocks of 1024 reserved by one KV
//     update each, and never reused, even across restarts; a chunk ID
//     (ino, slot) therefore names one file's data forever.
//   - Every inode except the root is reachable through at least one entry
//     ("d" key); a directory through exactly one, and its record stores that
//     entry's directory as Parent (the root's Parent is itself). Parent
//     chains end at the root: rename refuses to move a directory into its
//     own subtree.
//   - A directory's nlink is 2 + its number of subdirectories; a file's
//     nlink is its number of entries.
//   - When a regular file's last link goes (unlink, rename over it), the
//     same transaction deletes its inode and queues (ino, layout) under a
//     "g" key. The garbage collector (Run, CollectGarbage) removes the
//     chunks on every target of the layout and only then deletes the "g"
//     key: a crash in between repeats the (idempotent) removal, so chunks
//     are neither leaked nor removed twice from a live file.
//   - A regular file always has a concrete layout (StripeCount targets),
//     chosen at create time with placement.Choose over the targets sorted by
//     ID, seeded by the inode number.
//
// # Consistency model
//
// Every operation is one serializable KV transaction (kv.DB.Update), so
// each is atomic and isolated, and survives a crash of the process once it
// returns. Against a crash of the machine it is durable at once under the
// engine's SyncAlways, and within the sync window under SyncGroup (the
// pebble default, ADR 0006): a power loss then loses a suffix of the last
// few milliseconds' operations, never an operation before a surviving one.
// Sync (OpMetaSync) makes everything acknowledged so far durable; clients
// call it for fsync, fsyncdir, the close of an O_SYNC file, File.Sync and
// Close, and S3 PUTs. What other systems act on is synced before it is
// visible: the inode allocator's blocks, target IDs and the chain table
// (kv.Txn.RequireSync), and an unlink before the garbage collector removes
// the file's chunks. Reads (GetAttr,
// Lookup, Resolve, one ReadDir page) run on one snapshot. A ReadDir listing
// is paged: each page is a snapshot and the cursor is the last name
// returned, so an entry present for the whole listing appears exactly once,
// and an entry added or removed during it appears at most once.
//
// To keep concurrent creates and unlinks of different names in one
// directory free of transaction conflicts, they read only the directory's
// inode record (which they do not write) and the entry's own key, and write
// the directory's mtime/ctime blindly into its own "t" key (last writer
// wins, so a directory's mtime may lag a concurrent change by the clock
// skew of the two writers). A test (TestNoConflictsInOneDirectory) holds
// this to zero retries. Operations that change a directory's nlink (mkdir,
// rmdir, renames of directories across directories) or attributes (chmod,
// SetLayout) read and write its record, so they conflict with each other
// and with creates in that directory; the engine retries them. Rename reads
// the parent chain of the target directory up to the root, so renames that
// together could form a cycle are serialized.
// The inode count reported by Statfs is approximate: it is kept in memory
// and stored every GC pass and on Close, so a crash loses recent changes;
// services sharing one DB add to the stored count and see each other's
// changes at their next pass.
//
// # Key layout, format version 1
//
// All integers in keys are big-endian so that scans are ordered; ino is a
// u64, target IDs u32. Values use big-endian fixed-width fields.
//
//	"F"                       superblock: u8 format version (1) | FSID (32 hex chars)
//	"Cnext-ino"               u64: first inode number not yet reserved
//	"Cinodes"                 u64: approximate number of inodes
//	"Cnext-target"            u64: next target ID to give out
//	"Cnext-chain"             u64: next replicated chain ID (from 2^31)
//	"Cchains"                 u64: chain table version
//	"T" u32 id                target: 0x01 | u16 n | node name | address (internal/cluster)
//	"N" node                  node: its last heartbeat (wire encoding) | u64 unix ns
//	"R" u32 chain             replicated chain (wire encoding)
//	"i" u64 ino               inode record, see below
//	"d" u64 parent name       directory entry: u64 child ino | u8 type (mode>>12)
//	"t" u64 dir               directory times: i64 mtime ns | i64 ctime ns
//	"x" u64 ino name          extended attribute value (name <= 255 B, value <= 64 KiB)
//	"s" u64 ino               symlink target (<= 4096 B)
//	"g" u64 data              garbage queue: layout of freed chunks, keyed by data ID
//	"m" u64 ino               migration record (migrate.go, ADR 0020)
//
// Inode record (version 1): u8 version (1) | u32 mode | u32 nlink | u32 uid |
// u32 gid | u32 rdev | u64 size | i64 atime | i64 mtime | i64 ctime (ns
// since the Unix epoch) | u64 parent (directories; 0 otherwise) | layout.
// For directories the record's mtime and ctime are stale and the "t" key
// holds the current ones. Layout: u32 stripe size | u16 stripe count | u16
// number of chains n | n × u32 chain ID [| u8 replicas, when 2 or 3]; a
// chain ID below 2^31 is the chain of one replica on that target. A
// directory's layout is its default for new files (no chains; stripe size
// 0 = Options.DefaultLayout); a regular file's names its chains; other
// types have a zero layout.
//
// # Running it
//
// New formats an empty database (root inode 1, mode 0755, random FSID) or
// loads the existing file system. Run drives the garbage collector and the
// counter flush until Close. Targets are reached through the Targets
// interface, and storage nodes register and heart-beat through the
// ClusterManager interface (OpRegister, OpHeartbeat, OpSyncDone); both are
// implemented by cluster.Manager (internal/cluster), which keeps nodes,
// targets and the chain table in the same DB. This package never imports
// it.
package meta
