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

// TestMetricSum: samples of the name are summed, those of other metrics
// (one whose name starts with it included) are not, and label pairs
// select among the label sets.
func TestMetricSum(t *testing.T) {
	page := `# HELP sluice_ops ops
sluice_ops{kind="meta",op="getlayout"} 3
sluice_ops{kind="meta",op="lookup"} 5
sluice_ops{kind="chunk",op="getlayout"} 7
sluice_ops_total 100
sluice_plain 2
`
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"sluice_ops", nil, 15},
		{"sluice_ops", []string{`op="getlayout"`}, 10},
		{"sluice_ops", []string{`op="getlayout"`, `kind="meta"`}, 3},
		{"sluice_ops", []string{`op="get"`}, 0},
		{"sluice_plain", nil, 2},
		{"sluice_plain", []string{`op="getlayout"`}, 0},
		{"sluice_missing", nil, 0},
	} {
		if got := MetricSum(page, c.name, c.labels...); got != c.want {
			t.Errorf("MetricSum(%s, %q) = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
