package qos

import (
	"sync/atomic"
	"time"
)

// A Reserve keeps part of a server process's CPUs free for interactive
// requests while they come: the request scheduler (Gate) orders requests
// only once they are read off their connections and decoded, and on a
// server whose CPUs the lower classes keep busy, Go's scheduler notices a
// connection that became readable only when a P runs out of work or at
// its monitor's poll every 10 ms (runtime/proc.go: findRunnable, sysmon).
// An interactive read then waits up to 10 ms before anyone reads it.
//
// So while an interactive request was seen within Window, a request of a
// throttled class (Checkpoint, Background) takes one of Slots places
// before its frame's body is read and keeps it until its reply is sent:
// at most Slots of the process's Ps do such work, and the others find
// nothing to run and wait in the network poller, where an interactive
// frame wakes them at once. Training (also what a client that names no
// class gets) is never held back: data loading is as much a latency
// matter for a training job as inference is for its users.
//
// The decisions are the pure functions Throttled and Engaged; Reserve
// is the thin part that blocks.
type Reserve struct {
	slots  chan struct{}
	window time.Duration
	urgent atomic.Int64 // UnixNano of the last interactive request; 0 none

	held  atomic.Uint64 // requests that took a place
	waits atomic.Uint64 // of those, the ones that waited for it
}

// DefaultReserveWindow is how long a Reserve stays engaged after an
// interactive request.
const DefaultReserveWindow = time.Second

// NewReserve returns a Reserve that lets throttled work use slots Ps
// (at least 1) while engaged.
func NewReserve(slots int, window time.Duration) *Reserve {
	slots = max(slots, 1)
	if window <= 0 {
		window = DefaultReserveWindow
	}
	return &Reserve{slots: make(chan struct{}, slots), window: window}
}

// ReserveSlots is the number of Ps that throttled work may use in a
// process with procs Ps when reserve of them are kept for interactive
// requests: procs-reserve, at least 1.
func ReserveSlots(procs, reserve int) int {
	return max(procs-reserve, 1)
}

// Throttled reports whether requests of class c give way to interactive
// ones.
func Throttled(c Class) bool {
	return c == Checkpoint || c == Background
}

// Engaged reports whether a Reserve whose last interactive request came
// at last (UnixNano, 0 for none) holds throttled work back at now.
func Engaged(now, last int64, window time.Duration) bool {
	return last != 0 && now-last < int64(window)
}

// Admit is called for a request of class c before its frame's body is
// read. It returns the function that ends the request's hold (nil when
// the request holds nothing); it blocks while every place is held, until
// done is closed (ok false: the server is stopping).
func (r *Reserve) Admit(c Class, done <-chan struct{}) (release func(), ok bool) {
	now := time.Now().UnixNano()
	if c == Interactive {
		// One store per interactive request is cheap; a store only when
		// the value moved by a millisecond keeps the cache line quiet.
		if now-r.urgent.Load() > int64(time.Millisecond) {
			r.urgent.Store(now)
		}
		return nil, true
	}
	if !Throttled(c) || !Engaged(now, r.urgent.Load(), r.window) {
		return nil, true
	}
	select {
	case r.slots <- struct{}{}:
	default:
		r.waits.Add(1)
		select {
		case r.slots <- struct{}{}:
		case <-done:
			return nil, false
		}
	}
	r.held.Add(1)
	return r.release, true
}

func (r *Reserve) release() { <-r.slots }

// ReserveStats counts a Reserve's holds.
type ReserveStats struct {
	Slots  int
	Held   uint64 // throttled requests that took a place
	Waited uint64 // of those, the ones that waited for one
}

// Stats returns the counters.
func (r *Reserve) Stats() ReserveStats {
	return ReserveStats{Slots: cap(r.slots), Held: r.held.Load(), Waited: r.waits.Load()}
}
