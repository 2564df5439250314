package client

import (
	"slices"
	"testing"

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
