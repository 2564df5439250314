package client

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Access times, like Linux's relatime: a file opened for reading whose
// access time is more than wire.RelatimeWindow old gets it set to now,
// so that "least recently used" (the tier mover's release order) means
// used, not changed. The client notes such opens and sends their inodes
// in batches (OpTouchAtime) at most once a second, off the open's path;
// the metadata service sets the access time without changing ctime or
// telling other clients (an access time is advisory). Best effort: a
// batch that fails is dropped, and a service that predates the operation
// turns the notes off.
type atimer struct {
	mu      sync.Mutex
	pending map[uint64]struct{}
	started bool
	off     bool
	stop    chan struct{}
	done    chan struct{}
}

// oNoAtime is a private OpenInode flag: the library's own reads (an
// archive's) leave the access time alone, as O_NOATIME does.
const oNoAtime = 1 << 29

// atimeFlushEvery is how often a client sends the access times it noted.
const atimeFlushEvery = time.Second

// noteRead notes that the regular file ino, whose access time was atime
// (ns) when its attributes were read, is opened for reading.
func (c *Client) noteRead(ino uint64, atime int64) {
	if c.opts.NoAtime || time.Since(time.Unix(0, atime)) < wire.RelatimeWindow {
		return
	}
	t := &c.atime
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.off || len(t.pending) >= 64*wire.MaxInos {
		return // notes are advisory: beyond this many, drop them
	}
	if t.pending == nil {
		t.pending = make(map[uint64]struct{})
	}
	t.pending[ino] = struct{}{}
	if !t.started {
		t.started = true
		t.stop, t.done = make(chan struct{}), make(chan struct{})
		go c.flushAtimes()
	}
}

// flushAtimes sends the noted access times every atimeFlushEvery until
// the client closes, then once more.
func (c *Client) flushAtimes() {
	t := &c.atime
	defer close(t.done)
	tick := time.NewTicker(atimeFlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			c.sendAtimes()
		case <-t.stop:
			c.sendAtimes()
			return
		}
	}
}

// sendAtimes sends the pending notes, wire.MaxInos per request.
func (c *Client) sendAtimes() {
	t := &c.atime
	t.mu.Lock()
	inos := make([]uint64, 0, len(t.pending))
	for ino := range t.pending {
		inos = append(inos, ino)
	}
	clear(t.pending)
	t.mu.Unlock()
	for len(inos) > 0 {
		batch := inos[:min(len(inos), wire.MaxInos)]
		inos = inos[len(batch):]
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.DialTimeout)
		err := c.metaCall(ctx, wire.OpTouchAtime, &wire.InosReq{Inos: batch}, nil)
		cancel()
		if errs.CodeOf(err) == errs.NotSupported {
			t.mu.Lock()
			t.off = true
			t.mu.Unlock()
			return
		}
	}
}

// close stops the flusher after a last flush; notes made after it are
// dropped (no flusher starts again).
func (t *atimer) close() {
	t.mu.Lock()
	started := t.started
	t.off = true
	t.mu.Unlock()
	if started {
		close(t.stop)
		<-t.done
	}
}
