package meta

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// The namespace change feed (ADR 0022). Every transaction that commits
// through Service.update while someone watches is read for the names
// ("d" keys) and inodes ("i", "t" keys) it wrote; those go into a ring
// with the connection the request came on (wire.Request.Conn). A mount
// long-polls the ring (OpWatch) for the changes other connections made
// and drops what its kernel cached of them. The ring lives in memory: a
// restart starts a new epoch, and a watcher of the old one is told it
// missed changes (Reset).

// feedRing is how many changes the ring keeps. A watcher further behind
// than that is reset. At the ~10^4-10^5 changes/s a busy service makes
// that is a second or more, far more than a watcher's poll takes.
const feedRing = 1 << 16

// feedMaxBatch bounds the changes of one WatchResp.
const feedMaxBatch = 4096

// feedIdle: a feed nobody polled for this long stops recording, so that a
// service nobody watches pays nothing for it. The next poll starts a new
// epoch: a watcher of the old one is told it missed changes.
const feedIdle = 2 * time.Minute

type originKey struct{}

// withOrigin returns ctx marked with the connection a request came on.
func withOrigin(ctx context.Context, conn uint64) context.Context {
	if conn == 0 {
		return ctx
	}
	return context.WithValue(ctx, originKey{}, conn)
}

func originOf(ctx context.Context) uint64 {
	o, _ := ctx.Value(originKey{}).(uint64)
	return o
}

type feedEntry struct {
	origin uint64
	c      wire.Change
}

// feed is the ring of recent changes. It is safe for concurrent use.
type feed struct {
	complete bool
	idle     time.Duration // feedIdle; shorter in tests
	// lastPoll is when a watcher last polled (Unix ns; 0: never). Every
	// metadata transaction reads it (watched), so it is not under mu;
	// polls write it under mu.
	lastPoll atomic.Int64

	mu    sync.Mutex
	epoch uint64
	ring  []feedEntry // ring[seq % feedRing] holds change seq (seq >= 1)
	next  uint64      // the sequence number of the next change
	// waiters are the polls waiting for a change, each woken (its channel
	// closed and removed) by the first change another connection makes.
	waiters []feedWaiter
}

type feedWaiter struct {
	conn uint64
	ch   chan struct{}
}

func newFeed(complete bool) *feed {
	return &feed{epoch: newEpoch(), complete: complete, idle: feedIdle, next: 1}
}

func newEpoch() uint64 { return rand.Uint64() | 1 }

// watched reports whether changes are being recorded.
func (f *feed) watched(now time.Time) bool {
	last := f.lastPoll.Load()
	return last != 0 && now.UnixNano()-last < int64(f.idle)
}

// position returns the feed's epoch and the sequence number of its next
// change, or zeros while nobody watches (the next poll starts a new
// epoch). A change is published after it committed: a read that starts
// after position returned sees every change before the cursor.
func (f *feed) position(now time.Time) (epoch, cursor uint64) {
	if !f.watched(now) {
		return 0, 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.epoch, f.next
}

// publish appends one transaction's changes.
func (f *feed) publish(origin uint64, cs []wire.Change) {
	if len(cs) == 0 {
		return
	}
	f.mu.Lock()
	if f.ring == nil {
		f.ring = make([]feedEntry, feedRing)
	}
	for _, c := range cs {
		f.ring[f.next%feedRing] = feedEntry{origin, c}
		f.next++
	}
	// Wake the waiters this change concerns; a poll's own changes leave
	// it asleep (a mount creating files would otherwise wake its poll at
	// every create).
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.conn == origin && origin != 0 {
			kept = append(kept, w)
		} else {
			close(w.ch)
		}
	}
	clear(f.waiters[len(kept):])
	f.waiters = kept
	f.mu.Unlock()
}

// poll answers a watch request from connection conn: the changes after
// req.Cursor not made by conn, waiting up to req.WaitMs for one, or until
// ctx ends or closed is closed (the service closes).
func (f *feed) poll(ctx context.Context, closed <-chan struct{}, conn uint64, req *wire.WatchReq) *wire.WatchResp {
	max := int(req.Max)
	if max <= 0 || max > feedMaxBatch {
		max = feedMaxBatch
	}
	var deadline <-chan time.Time
	for {
		f.mu.Lock()
		now := time.Now()
		if f.lastPoll.Load() != 0 && !f.watched(now) {
			// Changes went unrecorded while nobody polled.
			f.epoch = newEpoch()
		}
		f.lastPoll.Store(now.UnixNano())
		resp := &wire.WatchResp{Epoch: f.epoch, Complete: f.complete}
		switch {
		case req.Epoch != f.epoch || req.Cursor > f.next:
			// A new watcher, or one of another epoch (the service
			// restarted): start from now. Only a new watcher (epoch 0)
			// missed nothing.
			resp.Cursor, resp.Reset = f.next, req.Epoch != 0
			f.mu.Unlock()
			return resp
		case f.next-req.Cursor > feedRing:
			resp.Cursor, resp.Reset = f.next, true
			f.mu.Unlock()
			return resp
		}
		cur := req.Cursor
		for ; cur < f.next && len(resp.Changes) < max; cur++ {
			if e := f.ring[cur%feedRing]; e.origin != conn || conn == 0 {
				resp.Changes = append(resp.Changes, e.c)
			}
		}
		resp.Cursor = cur
		var wake chan struct{}
		if len(resp.Changes) == 0 && req.WaitMs > 0 {
			wake = make(chan struct{})
			f.waiters = append(f.waiters, feedWaiter{conn, wake})
		}
		f.mu.Unlock()
		if len(resp.Changes) > 0 || req.WaitMs == 0 {
			return resp
		}
		// Only the caller's own changes, or none: wait for more.
		req.Cursor = cur
		if deadline == nil {
			t := time.NewTimer(time.Duration(req.WaitMs) * time.Millisecond)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-wake:
		case <-deadline:
			f.unwait(wake)
			return resp
		case <-ctx.Done():
			f.unwait(wake)
			return resp
		case <-closed:
			f.unwait(wake)
			return resp
		}
	}
}

// unwait removes a waiter that stopped waiting, if no change removed it.
func (f *feed) unwait(ch chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, w := range f.waiters {
		if w.ch == ch {
			f.waiters = slices.Delete(f.waiters, i, i+1)
			return
		}
	}
}

// feedTxn is a transaction that notes the names and inodes it writes.
type feedTxn struct {
	kv.Txn
	changes []wire.Change
}

func (t *feedTxn) Set(key, value []byte) {
	t.note(key)
	t.Txn.Set(key, value)
}

func (t *feedTxn) Delete(key []byte) {
	t.note(key)
	t.Txn.Delete(key)
}

func (t *feedTxn) note(key []byte) {
	if len(key) < 9 {
		return
	}
	var c wire.Change
	switch key[0] {
	case pfxDirent:
		c = wire.Change{Kind: wire.ChangeEntry, Ino: binary.BigEndian.Uint64(key[1:9]), Name: string(key[9:])}
	case pfxInode, pfxDirTime:
		if len(key) != 9 {
			return
		}
		c = wire.Change{Kind: wire.ChangeInode, Ino: binary.BigEndian.Uint64(key[1:9])}
	default:
		return
	}
	for i := len(t.changes) - 1; i >= 0 && i >= len(t.changes)-8; i-- {
		if t.changes[i] == c {
			return
		}
	}
	t.changes = append(t.changes, c)
}

// Watch answers OpWatch for the connection conn.
func (s *Service) Watch(ctx context.Context, conn uint64, req *wire.WatchReq) *wire.WatchResp {
	if req.WaitMs > 10_000 {
		req.WaitMs = 10_000
	}
	return s.feed.poll(ctx, s.closed, conn, req)
}
