package client

import "time"

// Drain pacing. The drain shares the client node's CPUs, disk and network
// with the writers it stages for; a checkpoint's stall is the time until
// its last shard is durable in staging, so the drain yields while writers
// write or seal, and runs at full speed when they are quiet. A segment
// yields for drainMaxDefer in all at most, so writers that never stop
// cannot hold the drain off: it then lags them by that much.
const (
	// drainQuiet is how long no staged write must have happened.
	drainQuiet = 20 * time.Millisecond
	// drainMaxDefer bounds a segment's yielding, in all.
	drainMaxDefer = 10 * time.Second
)

// drainGate decides whether a drain may send its next piece now. lastWrite
// is the time of the last staged write or seal, sealing the seals in
// progress and the holds of writers that asked the drain to wait
// (Client.HoldDrain: a checkpoint being saved), waiting the time the
// segment has already yielded, and waiters
// the reads waiting for a staged file to drain and the writes waiting for
// room under the staging limit (they go first: a reader of a just-written
// shard must not wait for another file's writer to pause, and writers
// that wait for room must not hold the drain off).
// When it may not, retry is how long to wait before asking again.
func drainGate(now, lastWrite time.Time, sealing, waiters int, waiting time.Duration) (proceed bool, retry time.Duration) {
	if waiting >= drainMaxDefer || waiters > 0 {
		return true, 0
	}
	quietFor := now.Sub(lastWrite)
	if sealing == 0 && quietFor >= drainQuiet {
		return true, 0
	}
	retry = drainQuiet - quietFor
	if sealing > 0 || retry <= 0 {
		retry = drainQuiet / 4
	}
	return false, min(retry, drainMaxDefer-waiting)
}
