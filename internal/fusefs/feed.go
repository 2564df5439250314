package fusefs

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pause"
)

// The mount follows the metadata service's change feed (ADR 0022): the
// names and inodes other clients change are dropped from the kernel's
// caches (FUSE_NOTIFY_INVAL_ENTRY, _INODE) as they change, so that while
// the feed is live and complete the kernel may cache names, attributes and
// absent names for Options.WatchTimeout instead of the short timeouts that
// alone bound what another client's change can hide.
//
// A reply computed from the metadata service's state before another
// client's change, but handed to the kernel after the mount dropped that
// change from the kernel's caches, would bring the stale answer back for
// the long timeout. Two things close that: a request's reply gets the
// long timeout only if no invalidation was applied since the request
// began (feedState.gen), and every batch of invalidations is applied a
// second time with the next poll, at most feedRepeat later, for replies
// that were between that check and the kernel.

// feedRepeat is the longest a batch waits to be applied again.
const feedRepeat = 50 * time.Millisecond

// feedPoll is how long one poll waits for changes when none are pending.
const feedPoll = time.Second

type feedState struct {
	live atomic.Bool   // polling succeeds and the feed is complete
	gen  atomic.Uint64 // bumped before each batch of invalidations
}

// ttls are the kernel timeouts of one reply.
type ttls struct{ entry, attr, neg time.Duration }

// ttl returns the timeouts for a reply to a request that began at feed
// generation g (fs.feed.gen.Load() then).
func (fs *fileSystem) ttl(g uint64) ttls {
	o := fs.opts
	t := ttls{o.EntryTimeout, o.AttrTimeout, o.NegativeTimeout}
	if o.WatchTimeout <= 0 || !fs.feed.live.Load() || fs.feed.gen.Load() != g {
		return t
	}
	if !o.entrySet {
		t.entry = o.WatchTimeout
	}
	if !o.attrSet {
		t.attr = o.WatchTimeout
	}
	if !o.negSet {
		t.neg = o.WatchTimeout
	}
	return t
}

// gen is the feed generation, read when a request begins.
func (fs *fileSystem) gen() uint64 { return fs.feed.gen.Load() }

// follow polls the change feed until ctx ends, applying what other
// clients changed to the kernel's caches.
func (fs *fileSystem) follow(ctx context.Context) {
	defer fs.complete.clear()
	defer fs.feed.live.Store(false)
	var epoch, cursor uint64
	var prev []client.Change // the batch before, applied again
	var prevEpoch, prevCursor uint64
	backoff := 100 * time.Millisecond
	warned := false
	for ctx.Err() == nil {
		wait := feedPoll
		if len(prev) > 0 {
			wait = feedRepeat
		}
		pctx, cancel := context.WithTimeout(ctx, wait+fs.opts.OpTimeout)
		ch, err := fs.c.Watch(pctx, epoch, cursor, wait)
		cancel()
		if err != nil {
			fs.feed.live.Store(false)
			fs.complete.clear() // changes may be missed meanwhile
			if ctx.Err() != nil {
				return
			}
			if errs.CodeOf(err) == errs.NotSupported {
				fs.log.Info("fuse: the metadata service has no change feed; the kernel caches for the short timeouts only", "err", err)
				return
			}
			if !warned {
				fs.log.Warn("fuse: change feed unavailable; the kernel caches for the short timeouts until it is back", "err", err)
				warned = true
			}
			if prev != nil {
				fs.invalidate(prev, prevEpoch, prevCursor)
				prev = nil
			}
			if pause.For(ctx, backoff) != nil {
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff, warned = 100*time.Millisecond, false
		if ch.Reset {
			// Changes were missed: what the kernel cached before now is
			// bounded by the long timeout only (ADR 0022).
			fs.feed.gen.Add(1)
			fs.complete.clear()
			fs.log.Warn("fuse: the change feed lost changes (service restart or too far behind); entries cached before may be stale for up to the watch timeout", "timeout", fs.opts.WatchTimeout)
		}
		epoch, cursor = ch.Epoch, ch.Cursor
		if len(ch.Changes) > 0 {
			fs.invalidate(ch.Changes, epoch, cursor)
		}
		fs.feed.live.Store(ch.Complete)
		if !ch.Complete {
			fs.complete.clear()
		}
		if prev != nil {
			fs.invalidate(prev, prevEpoch, prevCursor)
		}
		prev, prevEpoch, prevCursor = ch.Changes, epoch, cursor
	}
}

// invalidate drops what the mount and the kernel cached of the changed
// names and inodes, changes of feed epoch epoch before cursor. It does not
// invalidate the kernel's attributes of an inode again where an open did
// after those changes (kernelStamps.covers), nor twice in one batch.
func (fs *fileSystem) invalidate(cs []client.Change, epoch, cursor uint64) {
	fs.feed.gen.Add(1)
	var done map[uint64]bool // inodes whose attributes this call invalidated
	for _, c := range cs {
		if c.Entry {
			fs.complete.drop(c.Ino) // another client changed a name in it
			fs.srv.EntryNotify(c.Ino, c.Name)
			continue
		}
		fs.dirs.drop(c.Ino)
		if of := fs.ref(c.Ino); of != nil {
			of.pend.forget() // no more deferrals on attributes another client changed
			fs.unref(of)
		}
		if done[c.Ino] || fs.kstamps.covers(c.Ino, epoch, cursor) {
			continue
		}
		if done == nil {
			done = make(map[uint64]bool)
		}
		done[c.Ino] = true
		fs.notifyAttr(c.Ino)
	}
}
