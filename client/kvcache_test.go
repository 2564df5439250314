package client

import (
	"slices"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
)

func TestDistinctNodes(t *testing.T) {
	t.Parallel()
	nodes := map[placement.TargetID]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "c"}
	for _, tc := range []struct {
		ranked []placement.TargetID
		r      int
		want   []placement.TargetID
	}{
		{[]placement.TargetID{1, 2, 3, 4, 5}, 2, []placement.TargetID{1, 3}},
		{[]placement.TargetID{2, 1, 4, 3, 5}, 3, []placement.TargetID{2, 4, 5}},
		{[]placement.TargetID{1, 2, 3}, 3, []placement.TargetID{1, 3, 2}}, // two nodes only: the best of the rest
		{[]placement.TargetID{4}, 2, []placement.TargetID{4}},
	} {
		if got := distinctNodes(tc.ranked, nodes, tc.r); !slices.Equal(got, tc.want) {
			t.Errorf("distinctNodes(%v, %d) = %v, want %v", tc.ranked, tc.r, got, tc.want)
		}
	}
}

// TestPutRetry is the decision alone: a lost upload or a broken
// connection goes again (at once the first time, then after a growing,
// bounded pause) until the deadline; other errors are the put's answer.
func TestPutRetry(t *testing.T) {
	t.Parallel()
	now := time.Unix(1e6, 0)
	deadline := now.Add(time.Minute)
	for _, code := range []errs.Code{errs.Stale, errs.Unavailable} {
		if again, wait := putRetry(code, 0, now, deadline); !again || wait != 0 {
			t.Errorf("%v, first try: %v, %v; want again at once", code, again, wait)
		}
		for attempt := 1; attempt < 100; attempt++ {
			again, wait := putRetry(code, attempt, now, deadline)
			if !again || wait <= 0 || wait > 500*time.Millisecond {
				t.Fatalf("%v, try %d: %v, %v; want again within 500 ms", code, attempt, again, wait)
			}
		}
		if again, _ := putRetry(code, 3, deadline.Add(time.Nanosecond), deadline); again {
			t.Errorf("%v past the deadline: again", code)
		}
	}
	for _, code := range []errs.Code{errs.NoSpace, errs.Invalid, errs.TooBig, errs.Corruption, errs.Garbled} {
		if again, _ := putRetry(code, 0, now, deadline); again {
			t.Errorf("%v: again; want the put's answer", code)
		}
	}
}
