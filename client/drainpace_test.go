package client

import (
	"testing"
	"time"
)

func TestDrainGate(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name      string
		sinceLast time.Duration
		sealing   int
		readers   int
		waiting   time.Duration
		proceed   bool
		retry     time.Duration
	}{
		{"quiet writers", time.Second, 0, 0, 0, true, 0},
		{"just quiet enough", drainQuiet, 0, 0, 0, true, 0},
		{"a write 5ms ago", 5 * time.Millisecond, 0, 0, 0, false, drainQuiet - 5*time.Millisecond},
		{"a seal in progress", time.Second, 1, 0, 0, false, drainQuiet / 4},
		{"seal, waited long", time.Second, 3, 0, drainMaxDefer, true, 0},
		{"writes, waited long", 0, 0, 0, drainMaxDefer + time.Millisecond, true, 0},
		{"retry capped by the defer left", 0, 0, 0, drainMaxDefer - time.Millisecond, false, time.Millisecond},
		{"a write 5ms ago, a reader waits", 5 * time.Millisecond, 0, 1, 0, true, 0},
		{"a seal in progress, readers wait", time.Second, 2, 3, 0, true, 0},
	}
	for _, tc := range tests {
		proceed, retry := drainGate(t0.Add(tc.sinceLast), t0, tc.sealing, tc.readers, tc.waiting)
		if proceed != tc.proceed || retry != tc.retry {
			t.Errorf("%s: drainGate = %v, %v; want %v, %v", tc.name, proceed, retry, tc.proceed, tc.retry)
		}
	}
}
