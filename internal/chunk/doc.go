// Package chunk is the on-disk chunk store of one storage target: it keeps
// the chunks (slot Slot of inode Ino, see package placement) that live on
// one local disk, checks every byte it returns against a CRC32C, and keeps
// acknowledged writes through crashes.
//
// # On-disk format, version 1
//
// All integers are little-endian. CRC32C is CRC-32 with the Castagnoli
// polynomial (hash/crc32.Castagnoli), initial value 0 as in crc32.Checksum.
// A target directory holds:
//
//	FORMAT                            store header (28 bytes)
//	chunks/XX/IIIIIIIIIIIIIIII.SSSSSSSS.dat   chunk data
//	chunks/XX/IIIIIIIIIIIIIIII.SSSSSSSS.sum   chunk checksum sidecar
//	undo/IIIIIIIIIIIIIIII.SSSSSSSS            undo record of an in-place overwrite
//	free/N                                    an empty file of a removed chunk, for the next chunk (recycle.go)
//	fences/IIIIIIIIIIIIIIII.SSSSSSSS          fence of a frozen chunk (empty file)
//
// where I… is the inode number in 16 lowercase hex digits, S… the slot in
// 8, and XX = ino & 0xff in 2 (256 directories, made at format time). On
// ext2/3/4 the store's directory and chunks/ carry FS_TOPDIR_FL, an
// allocator hint that spreads their subdirectories over the file system's
// block groups (spread.go); no format rule depends on it.
//
// FORMAT (written to FORMAT.tmp, fsynced, renamed, directory fsynced):
//
//	0  [8]byte "SLUICECS"
//	8  u32 format version (1)
//	12 u32 target ID
//	16 u32 block size (65536)
//	20 u32 sidecar entry size (32)
//	24 u32 CRC32C of bytes 0..23
//
// Open formats an empty directory, and refuses a directory that is not
// empty and has no FORMAT (errs.Invalid), a FORMAT that fails its checks
// (errs.Corruption), another version (errs.NotSupported) or another
// target ID (errs.Invalid).
//
// A chunk exists iff its .sum file exists. The .dat file holds the
// chunk's bytes at their offsets (sparse where there are holes). The chunk
// is cut into blocks of BlockSize (64 KiB) bytes; block k covers chunk
// bytes [k*65536, (k+1)*65536) and has the 32-byte entry at .sum offset
// k*32:
//
//	0  u32 cur.crc   CRC32C of the block's first cur.n bytes in .dat
//	4  u32 cur.n     valid length, 1..65536
//	8  u32 prev.crc  the block's last durable state (see below); 0 if none
//	12 u32 prev.n    0..65536; 0 = no fallback
//	16 u32 flags     bit 0 "zero": the block is cur.n zero bytes, .dat is
//	                 not consulted (cur.crc, prev are 0); other bits 0
//	20 u32 block     k (catches entries written to the wrong place)
//	24 u32 reserved  0
//	28 u32 CRC32C of bytes 0..27
//
// An entry of 32 zero bytes (or past the end of .sum) is a hole. Any other
// entry that fails these checks is corruption.
//
// The logical content of block k is: if a hole, zeros; if "zero", cur.n
// zeros; otherwise .dat bytes [k*65536, k*65536+cur.n), which must match
// cur.crc, followed by zeros. Bytes of .dat past cur.n are never read:
// they may hold data of an unacknowledged write. The chunk's length is
// k*65536 + cur.n of the last entry in .sum that is not a hole (0 if none);
// a truncate to L leaves .sum with exactly ceil(L/65536) entries, the last
// of length L - 65536*(ceil(L/65536)-1) ("zero" if that block has no data).
//
// Undo record (one per file, rewritten for each in-place overwrite; a file
// whose first 4 bytes are zero holds no record):
//
//	0  [4]byte "SLUU"
//	4  u32 format version (1)
//	8  u64 ino
//	16 u32 slot
//	20 u32 count
//	24 count times: u32 block k | [32]byte entry before | [32]byte entry
//	   after | u32 off | u32 n | n bytes: .dat bytes [k*65536+off, +n)
//	   before the write (the valid bytes it replaces)
//	   u32 CRC32C of everything before it
//
// # Fences
//
// A fence marks a chunk as frozen for an online migration (Freeze): its
// file's data was copied to another layout, and the chunk must not change
// any more. A write or truncate of a frozen chunk fails with errs.Moved
// (the client fetches the file's layout again and retries there); a read
// works while the chunk exists and fails with errs.Moved once it was
// removed, so that a stale reader never takes the removed chunk for a
// hole; Sync and Remove work as for any chunk, and Remove keeps the fence.
// A fence outlives its chunk until Thaw removes it (a migration given
// up), or until ExpireFences does, once the chunk has been gone for
// Options.FenceGrace (clients lease layouts for less: fenceexpire.go). A fence is an empty file in fences/, named like the chunk; Freeze
// and Thaw fsync fences/ before they return, and Open loads them all into
// memory (and makes fences/ if the store has none: stores formatted
// before fences existed open unchanged; a build without fences ignores
// the directory, so a downgrade drops them). Freeze makes the fences
// effective in memory first, then waits for the writes holding the
// chunks' locks; WriteAt and Truncate check the fence under the lock, so
// every write acknowledged before Freeze returns is in the chunk and none
// is after.
//
// # Reads
//
// ReadAt reads the entries and the data of the range, and verifies every
// block it touches over its whole valid prefix (a partial block is re-read
// whole). A mismatch fails the read with an errs.Corruption error naming
// the chunk, target and block offset; it is logged at Error level and
// counted (Corruptions). Corrupt bytes are never returned. The one
// fallback: if cur does not match but prev (0 < prev.n <= cur.n) matches the
// first prev.n bytes, those bytes are verified and are returned; bytes past
// prev.n in that block are reported as corruption.
//
// A read that has to open its chunk (not in the open-chunk cache) asks
// the kernel to start reading its range of .dat (posix_fadvise
// WILLNEED) before it reads .sum, so that the two disk reads of a cold
// chunk overlap.
//
// # Writes and crash safety
//
// A write step (at most 128 blocks; larger writes are several steps) is an
// append if it changes no byte that is currently valid (it writes only past
// each block's cur.n, or into holes and zero blocks), else an overwrite.
//
//   - Append: pwrite data (including zeros for gaps), then pwrite the
//     entries. A crash between the two leaves the old entries, which cover
//     only bytes the write did not touch. The new CRC of a block appended
//     to is the old CRC extended over the new bytes, so no old data is read.
//   - Overwrite: read the valid bytes being replaced (and, for a block only
//     partly replaced, verify the rest and compute the new CRC over it),
//     write the undo record (with sync: fdatasync it, and fsync undo/ when
//     the file is new), pwrite the entries, pwrite the data, (with sync:
//     fdatasync .dat and .sum), then clear the record.
//   - sync (WriteAt's argument) and Sync: fdatasync .dat, then .sum, then
//     fsync the chunk's directory if the chunk's files were created since.
//     Truncate and Remove are always durable when they return.
//   - Entry prev: when a block's entry changes for the first time after
//     the chunk's last fdatasync, prev is set to the old cur (the state
//     that is durable); later changes before the next fdatasync keep that
//     prev. Open runs syncfs(2) first, so this holds across restarts too.
//   - Open replays undo records: for each block whose current entry is
//     the record's "entry after" or "entry before" and whose data does not
//     match that entry, it puts the saved bytes and the "entry before"
//     back; then it fdatasyncs and deletes the record. A block whose entry
//     is neither has moved on since (the record is stale) and is left
//     alone.
//   - A failed write (errs.NoSpace from a full disk, or any I/O error)
//     puts back the old entries and the replaced bytes and truncates the
//     files to their old sizes, so all earlier data stays as it was.
//
// # Guarantees
//
// Process crash (kill -9, panic) at any moment, the page cache surviving:
//
//   - Every acknowledged write (WriteAt returned nil) reads back intact,
//     whether or not it was synced, including while a later write to the
//     same block was in flight.
//   - A write in flight at the crash leaves each block it touches either
//     entirely as before or entirely as after it (an append may also be
//     cut at a block boundary: a prefix of its blocks is applied). Never a
//     mix inside a block, never a corruption report.
//
// Power loss or kernel crash (the page cache lost); assumes that fsync and
// fdatasync keep their promises and that a 32-byte aligned entry write is
// not torn (it lies inside one 512-byte sector):
//
//   - Every write acknowledged with sync (or followed by a successful Sync,
//     Truncate or Remove of the chunk) reads back intact, with one
//     exception below. Unsynced appends to the same block that were lost
//     are handled by prev: the durable prefix reads back; reads of the lost
//     bytes (up to the entry's cur.n) fail with errs.Corruption rather than
//     return wrong data, and the chunk may keep the longer length.
//   - A synced in-place overwrite that was torn by the power loss is rolled
//     back by its undo record (fdatasynced before the data is touched).
//   - Exception, not guaranteed: an in-place overwrite WITHOUT sync, whose
//     data the kernel wrote back only in part before the power loss. Its
//     undo record may not be on disk, and the block (including its bytes
//     the overwrite did not touch, which may have been synced earlier) then
//     fails verification: reads report errs.Corruption, never wrong data.
//     Clients that need overwrites to be safe against power loss must write
//     them with sync.
//   - Unsynced writes may be lost, or partly present at block granularity.
//   - Creating or removing a chunk is durable once its directory is synced
//     (sync write, Sync, Remove); a crash may leave a .dat without .sum,
//     which Open deletes.
//
// Not guaranteed against: a disk or file system that lies about flushes, or
// corrupts the sidecar and data consistently; a corrupt entry makes its
// block unreadable (and unwritable, short of truncating it away) until an
// administrator intervenes.
//
// # Concurrency and resources
//
// Store is safe for concurrent use. Each chunk has a reader/writer lock:
// reads share it, writes, truncates and removes take it exclusively; different
// chunks do not contend beyond a short critical section on the open-chunk
// cache. The cache is an LRU of at most Options.MaxOpenChunks idle chunks
// (open .dat, .sum and, once a chunk was overwritten in place, its undo
// file). An evicted chunk is closed without a sync: what its handle knew
// of its writes that are not durable (the dirty set of "Entry prev" above,
// and whether its data or directory needs a sync) stays in memory and
// passes to the chunk's next handle, so the rules above hold as if it had
// stayed open; Sync of an evicted chunk opens it again and syncs it. Up to
// 65,536 such chunks are remembered; then one syncfs(2) makes them all
// durable and they are forgotten (a failure there is returned by the next
// Sync of each of them), and past twice that a chunk is synced at its
// eviction. Close syncs the open chunks and, with one syncfs, the evicted
// ones. A writeback error that the kernel meets while an evicted chunk has
// no descriptor open is still reported to the descriptor that Sync opens
// (Linux reports an error not yet seen to later openers), unless memory
// pressure dropped the file's inode meanwhile; the checksums then report
// the lost bytes as corruption on read. Reads and writes do not
// allocate: scratch space is pooled.
package chunk
