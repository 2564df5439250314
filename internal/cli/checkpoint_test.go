package cli

import (
	"reflect"
	"testing"
	"time"
)

func TestPrunePlan(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	ck := func(p string, sec int, committed bool) Checkpoint {
		return Checkpoint{Path: p, Time: t0.Add(time.Duration(sec) * time.Second), Committed: committed}
	}
	cks := []Checkpoint{ck("/c/s3", 30, true), ck("/c/s1", 10, true), ck("/c/tmp", 5, false), ck("/c/s2", 20, true), ck("/c/s4", 40, false)}
	SortCheckpoints(cks)
	if got := []string{cks[0].Path, cks[4].Path}; got[0] != "/c/tmp" || got[1] != "/c/s4" {
		t.Fatalf("sorted: %v", cks)
	}
	paths := func(cs []Checkpoint) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Path)
		}
		return out
	}
	for _, tc := range []struct {
		keep int
		want []string
	}{
		{0, []string{"/c/s1", "/c/s2", "/c/s3"}},
		{1, []string{"/c/s1", "/c/s2"}},
		{2, []string{"/c/s1"}},
		{3, nil},
		{9, nil},
	} {
		if got := paths(PrunePlan(cks, tc.keep)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("PrunePlan(keep %d) = %v, want %v (incomplete ones never)", tc.keep, got, tc.want)
		}
	}
}
