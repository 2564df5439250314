package main

import "testing"

// TestGCPercent: Sluice's own commands run the collector at
// serverGCPercent, the benchmark commands (which stand for a user's
// program) and any process whose environment sets GOGC keep Go's choice.
func TestGCPercent(t *testing.T) {
	root := newRoot()
	for _, tc := range []struct {
		args   []string
		envSet bool
		want   int // 0: Go's choice
	}{
		{[]string{"serve"}, false, serverGCPercent},
		{[]string{"mount"}, false, serverGCPercent},
		{[]string{"stage"}, false, serverGCPercent},
		{[]string{"hsm", "restore"}, false, serverGCPercent},
		{[]string{"serve"}, true, 0},
		{[]string{"stage"}, true, 0},
		{[]string{"bench"}, false, 0},
		{[]string{"bench-worker"}, false, 0},
	} {
		cmd, _, err := root.Find(tc.args)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		p, ok := gcPercent(cmd.Annotations[annotGC], tc.envSet)
		if !ok {
			p = 0
		}
		if p != tc.want {
			t.Errorf("sluice %v (GOGC set: %v): GC percent %d, want %d", tc.args, tc.envSet, p, tc.want)
		}
	}
}
