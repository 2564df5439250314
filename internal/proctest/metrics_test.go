package proctest

import (
	"os"
	"testing"
	"time"
)

// TestCPUTime: the process's own CPU time grows while it computes, and a
// process that does not exist gives false.
func TestCPUTime(t *testing.T) {
	before, ok := CPUTime(os.Getpid())
	if !ok {
		t.Fatal("CPUTime of this process: not readable")
	}
	// Compute until the clock-tick counters move (10 ms of CPU), however
	// busy the machine; give up only after a long wait.
	x, after := uint64(1), before
	for deadline := time.Now().Add(60 * time.Second); after <= before && time.Now().Before(deadline); {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if after, ok = CPUTime(os.Getpid()); !ok {
			t.Fatal("CPUTime of this process: not readable")
		}
	}
	if after <= before {
		t.Errorf("CPUTime did not grow in 60 s of computing: %v (x %d)", after, x)
	}
	if _, ok := CPUTime(1 << 30); ok {
		t.Error("CPUTime of a process that does not exist: ok")
	}
}
