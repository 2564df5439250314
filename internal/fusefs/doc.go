// Package fusefs serves a Sluice file system to the Linux kernel through
// FUSE (github.com/hanwen/go-fuse/v2), so that unmodified programs (shell
// tools, compilers, PyTorch DataLoaders, checkpoint libraries) can use it.
//
// It implements go-fuse's raw API (fuse.RawFileSystem) rather than the
// node tree of package fs: Sluice inode numbers are stable and never
// reused, so the FUSE node ID of an inode is its Sluice inode number and
// the adapter keeps no per-node tree, no lookup counts and no path
// strings. Every operation is one or two requests to the metadata service
// (client's inode-level API), under a deadline (Options.OpTimeout).
//
// # Permissions
//
// The metadata service does not check permissions; the mount asks the
// kernel to (the default_permissions mount option): mode, uid, gid and the
// sticky bit are enforced by the kernel before a request reaches us.
//
// # Open files
//
// All handles of one inode on one mount share one client.File (write-back
// buffer, read-ahead), so that reads through any handle see writes through
// any other. close(2) sends the buffered data and the new size (Flush);
// fsync(2) makes them durable. An inode that is unlinked (or renamed over)
// while it is open on this mount is first hard-linked into the mount's
// private orphan directory, /.sluice-orphans/<host>-<pid>-<random>/, which
// the mount hides from lookups and listings; the link is removed when the
// last handle is released, which frees the inode. After a crash of the
// mount, the next mount on the same host removes the orphan directories of
// dead processes, and any mount removes those whose heartbeat is older than
// Options.OrphanGrace.
//
// # Caching and consistency
//
// The kernel caches entries and attributes for EntryTimeout and
// AttrTimeout, or for WatchTimeout while the mount follows the metadata
// service's change feed, which drops from the kernel's caches what other
// clients change (feed.go, ADR 0022); and file pages across opens
// (FOPEN_KEEP_CACHE) while the file's mtime and size are unchanged since
// this mount last opened it: a file changed elsewhere (another mount, the
// S3 gateway) is re-read at the next open (close-to-open consistency). See
// docs/fuse.md.
package fusefs
