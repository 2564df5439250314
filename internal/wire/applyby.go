package wire

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Requests that must not be applied after their sender gave up on them.
//
// A chunk truncate that a truncating client sent under a held cut (ADR
// 0031) may sit in a socket buffer, a congested link or a target's queue
// for longer than the cut is held; applied after its truncate gave up (or
// the metadata service took the cut over) and another client wrote the
// range again, it would cut that client's acknowledged bytes. A chunk
// write held past its flush's give-up would overwrite them the same way.
// Such a request (chunk writes, truncates, punches) carries ApplyBy: the latest
// moment, counted from its connection's hello, at which the receiver may
// still apply it. The two ends of a connection have no common clock, but
// they share one event, the hello exchange: the client notes when it sent
// its hello (the connection's epoch) and how long the answer took (its
// slack); the server notes when it had read the hello and not yet answered,
// a moment that lies in that interval by the client's clock. The client
// sends its deadline less the slack, as microseconds since its epoch; the
// server refuses the request once that much time passed since its own
// epoch. So the request is never applied after the sender's deadline by the
// sender's clock, whatever delayed it, only earlier (by up to the hello's
// round trip). The two clocks' rates differ, so the estimate is measured
// again (OpClock) when a timed request finds it older than a minute: what
// is left is the rates' difference over that minute.

// timed is a request that carries ApplyBy. Conn.Call sets it from the
// call's context deadline, for the connection the request goes out on
// (0, no bound, when the context has none).
type timed interface {
	setApplyBy(us uint64)
}

// OpClock asks a server how long ago, by its clock, it read the
// connection's hello (Empty -> ClockResp), so that a client can place
// that moment on its own clock again: the two clocks' rates differ, and
// the hello's estimate drifts with the connection's age. The wire server
// answers it itself, as it reads it. A server that predates it (before
// 2026-12-05's evening) answers errs.NotSupported, and its connections
// keep the hello's estimate.
const OpClock Op = 129

// ClockResp answers OpClock: microseconds since the server read the
// connection's hello.
type ClockResp struct {
	Us uint64
}

func (m *ClockResp) Encode(e *Encoder) { e.U64(m.Us) }
func (m *ClockResp) Decode(d *Decoder) { m.Us = d.U64() }

// clockResync is how old a connection's estimate of the server's epoch
// may grow before the next timed request has it measured again (in the
// background): its drift is then the two clocks' difference in rate over
// a minute, some milliseconds at most.
const clockResync = time.Minute

// clockSync places the server's epoch on this process's clock: zero is
// the latest moment it can have been, by this process's clock. At first
// that is when the hello's answer came (the server read the hello before
// answering it); an OpClock exchange measures it again.
type clockSync struct {
	mu      sync.Mutex
	zero    time.Time // the server's epoch, at the latest
	synced  time.Time // when zero was measured
	syncing bool      // an OpClock exchange is in flight
	none    bool      // no exchange: in process (one clock), or a server without OpClock
}

// applyBy returns deadline dl as ApplyBy on c: microseconds after the
// server's epoch, as placed on this process's clock at the latest; at
// least 1 (a deadline already past by then is late at once). It starts an
// OpClock exchange when the estimate is older than clockResync.
func (c *Conn) applyBy(dl time.Time) uint64 {
	c.clock.mu.Lock()
	zero := c.clock.zero
	resync := !c.clock.none && !c.clock.syncing && time.Since(c.clock.synced) > clockResync
	if resync {
		c.clock.syncing = true
	}
	c.clock.mu.Unlock()
	if resync {
		go c.resyncClock()
	}
	d := dl.Sub(zero)
	if d < time.Microsecond {
		return 1
	}
	return uint64(d / time.Microsecond)
}

// resyncClock measures the server's epoch on this process's clock again
// with an OpClock exchange: the server read the request at some moment
// between its sending and its answer's arrival, Us after its epoch, so
// the epoch was at the latest Us before the answer came.
func (c *Conn) resyncClock() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var r ClockResp
	_, err := c.Call(ctx, OpClock, &Empty{}, nil, &r, nil)
	came := time.Now()
	c.clock.mu.Lock()
	defer c.clock.mu.Unlock()
	c.clock.syncing = false
	switch {
	case errs.CodeOf(err) == errs.NotSupported:
		c.clock.none = true // an older server: the hello's estimate stays
	case err == nil:
		c.clock.zero = came.Add(-time.Duration(r.Us) * time.Microsecond)
		c.clock.synced = came
	}
	// Other errors (the connection failed, a timeout): try again at the
	// next timed request after clockResync.
	if err != nil {
		c.clock.synced = came
	}
}

// stamp sets req's ApplyBy from ctx's deadline, if req is timed.
func (c *Conn) stamp(ctx context.Context, req Message) {
	t, ok := req.(timed)
	if !ok {
		return
	}
	var us uint64
	if dl, ok := ctx.Deadline(); ok && !c.epoch.IsZero() {
		us = c.applyBy(dl)
	}
	t.setApplyBy(us)
}

// ApplyDeadline returns the moment, by this process's clock, after which
// a request that carries applyBy (an ApplyBy field) must not be applied,
// and false if it names none (0, or a connection without an epoch). A
// request made in process has its caller's deadline (Request.Deadline)
// whatever it carries: the same clock, and a message that has no room for
// ApplyBy there (a chunk write without its data's CRC32C) is bounded too.
func (r *Request) ApplyDeadline(applyBy uint64) (time.Time, bool) {
	if r.Local {
		return r.Deadline, !r.Deadline.IsZero()
	}
	if applyBy == 0 || r.Epoch.IsZero() {
		return time.Time{}, false
	}
	return r.Epoch.Add(time.Duration(applyBy) * time.Microsecond), true
}
