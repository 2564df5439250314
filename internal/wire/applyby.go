package wire

import (
	"context"
	"time"
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
// round trip). What is left is the two clocks' difference in rate over the
// connection's life (a few seconds a day at most between hosts whose
// clocks NTP disciplines; none in one process): see ADR 0031's addendum.

// timed is a request that carries ApplyBy. Conn.Call sets it from the
// call's context deadline, for the connection the request goes out on
// (0, no bound, when the context has none).
type timed interface {
	setApplyBy(us uint64)
}

// applyBy returns deadline dl as ApplyBy on c: microseconds after c's
// epoch, less the hello's round trip; at least 1 (a deadline already past
// by then is late at once).
func (c *Conn) applyBy(dl time.Time) uint64 {
	d := dl.Sub(c.epoch) - c.slack
	if d < time.Microsecond {
		return 1
	}
	return uint64(d / time.Microsecond)
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

// Late reports whether a request that carries applyBy must not be applied
// now: its sender's deadline has passed.
func (r *Request) Late(applyBy uint64) bool {
	dl, ok := r.ApplyDeadline(applyBy)
	return ok && time.Now().After(dl)
}
