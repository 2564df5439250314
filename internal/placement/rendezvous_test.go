package placement

import (
	"fmt"
	"slices"
	"testing"
)

func TestRendezvous(t *testing.T) {
	t.Parallel()
	ts := []TargetID{1, 2, 3, 4, 5, 6, 7, 8}
	count := map[TargetID]int{}
	moved := 0
	for i := range 8000 {
		k := fmt.Sprintf("prefix-%d", i)
		got := Rendezvous(k, ts, 2)
		if len(got) != 2 || got[0] == got[1] {
			t.Fatalf("%s: %v", k, got)
		}
		if !slices.Equal(got, Rendezvous(k, ts, 2)) {
			t.Fatalf("%s: not deterministic", k)
		}
		if one := Rendezvous(k, ts, 1); one[0] != got[0] {
			t.Fatalf("%s: r=1 gives %v, r=2 %v", k, one, got)
		}
		count[got[0]]++
		// Removing target 8 moves only the keys whose first choice it was.
		if after := Rendezvous(k, ts[:7], 1); after[0] != got[0] {
			moved++
			if got[0] != 8 {
				t.Fatalf("%s moved from %d to %d when 8 left", k, got[0], after[0])
			}
		}
	}
	for _, tg := range ts {
		if c := count[tg]; c < 700 || c > 1300 {
			t.Errorf("target %d is first for %d of 8000 keys, want about 1000", tg, c)
		}
	}
	if moved != count[8] {
		t.Errorf("%d keys moved, %d were on target 8", moved, count[8])
	}
	if got := Rendezvous("k", ts[:2], 3); len(got) != 2 {
		t.Errorf("r over the targets: %v", got)
	}
}
