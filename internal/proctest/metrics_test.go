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
	x := uint64(1)
	for start := time.Now(); time.Since(start) < 100*time.Millisecond; {
		x = x*6364136223846793005 + 1442695040888963407
	}
	after, ok := CPUTime(os.Getpid())
	if !ok || after <= before {
		t.Errorf("CPUTime after 100 ms of computing: %v, before %v (ok %v; x %d)", after, before, ok, x)
	}
	if _, ok := CPUTime(1 << 30); ok {
		t.Error("CPUTime of a process that does not exist: ok")
	}
}
