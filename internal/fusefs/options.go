package fusefs

import (
	"log/slog"
	"os"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// Options configure a mount. Zero values take the defaults.
type Options struct {
	// Mountpoint is the directory to mount on (required).
	Mountpoint string
	// Server is the metadata service's address; Run connects to it (Mount
	// takes a connected client instead).
	Server string
	// Client tunes the client library (write buffer, read-ahead, ...);
	// its Server field is ignored.
	Client client.Options

	// EntryTimeout and AttrTimeout are how long the kernel caches a name
	// lookup and an inode's attributes (default 1 s each); NegativeTimeout
	// how long it caches that a name does not exist (default 1 s; negative
	// disables). They bound how stale another mount's changes can look.
	EntryTimeout, AttrTimeout, NegativeTimeout time.Duration
	// WatchTimeout is how long the kernel caches names, attributes and
	// absent names while the mount follows the metadata service's change
	// feed, which drops them from the kernel's caches when other clients
	// change them (ADR 0022; default 30 s). It replaces each of the three
	// timeouts above that is left at its default; negative: do not follow
	// the feed. While the feed is down or incomplete (several metadata
	// services over etcd), the short timeouts apply.
	WatchTimeout time.Duration
	// entrySet, attrSet and negSet: the timeouts were given (setDefaults).
	entrySet, attrSet, negSet bool
	defaulted                 bool // setDefaults ran (Run calls it, then Mount)
	// OpTimeout bounds every operation: when the servers cannot be
	// reached, an operation fails with ETIMEDOUT or EIO after at most this
	// long (default 30 s) instead of hanging.
	OpTimeout time.Duration
	// WritebackCache lets the kernel buffer writes in its page cache and
	// send them in large batches. Faster for small writes, but the kernel
	// then trusts its own idea of a cached file's size, so size changes
	// made by other mounts are seen only after the inode leaves the cache.
	WritebackCache bool
	// MaxWrite is the largest read or write request (default 1 MiB).
	MaxWrite int
	// ReadAheadKB sets the kernel read-ahead of the mount's backing device
	// in KiB (default 8192; needs root; -1 leaves the kernel default).
	ReadAheadKB int
	// AllowOther lets users other than the one who mounted access the
	// mount (default: true when run as root).
	AllowOther *bool
	// SyncOnClose makes the last close of a file wait until its data is
	// durable on the targets (fsync semantics on close). Default off: as
	// on a local file system, close sends the data, fsync makes it durable.
	SyncOnClose bool
	// OrphanGrace is how long the orphan directory of a mount whose
	// heartbeat stopped is kept before another mount frees it (default 10
	// min). Orphans of dead processes on the same host are freed at once.
	OrphanGrace time.Duration
	// Passthrough, if set, lets the kernel read files whose data is one
	// local chunk straight from the chunk's file (FUSE passthrough, Linux
	// 6.9 or later, root): read-only opens of files held whole by a
	// single-replica target of this process. Checksums are verified when
	// such a file is opened (once per change of the chunk), not on every
	// read. Not compatible with WritebackCache.
	Passthrough LocalData
	// PassthroughLocal, in a mount outside the storage service's process,
	// passes reads through as Passthrough does, with the chunk files the
	// services on this machine hand out over their direct-read sockets
	// (client.Client.OpenChunkData; it turns Client.DirectRead on).
	PassthroughLocal bool
	// Debug logs every FUSE request.
	Debug bool
	// Logger receives errors and debug output; nil means slog.Default().
	Logger *slog.Logger
	// Ready, if set, is called by Run once the file system is mounted.
	Ready func()
	// Started, if set, is called by Run with the client it connected,
	// before it mounts (to export the client's counts: its staging area).
	// The client is closed when Run returns.
	Started func(*client.Client)
}

// DefaultWatchTimeout is Options.WatchTimeout's default.
const DefaultWatchTimeout = 30 * time.Second

func (o *Options) setDefaults() error {
	if o.Mountpoint == "" {
		return errs.New(errs.Invalid, "mount: a mountpoint is required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if !o.defaulted {
		o.entrySet, o.attrSet, o.negSet = o.EntryTimeout != 0, o.AttrTimeout != 0, o.NegativeTimeout != 0
		o.defaulted = true
	}
	def(&o.WatchTimeout, DefaultWatchTimeout)
	def(&o.EntryTimeout, time.Second)
	def(&o.AttrTimeout, time.Second)
	def(&o.NegativeTimeout, time.Second)
	def(&o.OpTimeout, 30*time.Second)
	def(&o.OrphanGrace, 10*time.Minute)
	for _, d := range []*time.Duration{&o.EntryTimeout, &o.AttrTimeout, &o.NegativeTimeout} {
		*d = max(*d, 0) // negative: no caching
	}
	if o.OpTimeout < 0 {
		return errs.New(errs.Invalid, "mount: the operation timeout must be positive")
	}
	if o.Client.TierTimeout == 0 {
		// A read of a released file whose tier backend does not answer
		// fails (EIO) within the operation's timeout, not past it.
		o.Client.TierTimeout = o.OpTimeout * 3 / 4
	}
	if o.MaxWrite == 0 {
		o.MaxWrite = 1 << 20
	}
	if o.MaxWrite < 4096 || o.MaxWrite > 1<<20 {
		return errs.New(errs.Invalid, "mount: max write %d is not between 4 KiB and 1 MiB", o.MaxWrite)
	}
	if o.PassthroughLocal {
		o.Client.DirectRead = true
	}
	if (o.Passthrough != nil || o.PassthroughLocal) && o.WritebackCache {
		return errs.New(errs.Invalid, "mount: passthrough and the writeback cache cannot be combined")
	}
	if o.ReadAheadKB == 0 {
		o.ReadAheadKB = 8192
	}
	if o.AllowOther == nil {
		root := os.Geteuid() == 0
		o.AllowOther = &root
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}
