package kvcache

import (
	"reflect"
	"testing"
)

func TestPlanEviction(t *testing.T) {
	t.Parallel()
	c := func(k string, size uint64, expired, leased bool) candidate {
		return candidate{Key: k, Size: size, Expired: expired, Leased: leased}
	}
	tests := []struct {
		name                     string
		cands                    []candidate
		used, incoming, capacity uint64
		want                     []string
		ok                       bool
	}{
		{"fits below the high watermark", []candidate{c("a", 10, false, false)}, 10, 10, 100, nil, true},
		{"past high: LRU down to low", []candidate{c("a", 30, false, false), c("b", 30, false, false), c("c", 30, false, false)}, 90, 10, 100, []string{"a"}, true},
		{"past high: several to reach low", []candidate{c("a", 10, false, false), c("b", 10, false, false), c("c", 70, false, false)}, 90, 10, 100, []string{"a", "b"}, true},
		{"expired first, wherever they are", []candidate{c("a", 30, false, false), c("b", 30, false, false), c("c", 30, true, false)}, 90, 10, 100, []string{"c"}, true},
		{"leased values stay", []candidate{c("a", 30, false, true), c("b", 30, false, false), c("c", 30, false, false)}, 90, 10, 100, []string{"b"}, true},
		{"an expired leased value stays", []candidate{c("a", 30, true, true), c("b", 30, false, false), c("c", 30, false, false)}, 90, 10, 100, []string{"b"}, true},
		{"all leased: refused, nothing evicted", []candidate{c("a", 45, false, true), c("b", 45, false, true)}, 90, 20, 100, nil, false},
		{"reaches capacity but not low: ok", []candidate{c("a", 40, false, true), c("b", 40, false, true), c("c", 10, false, false)}, 90, 15, 100, []string{"c"}, true},
		{"bigger than the share", nil, 0, 101, 100, nil, false},
	}
	for _, tc := range tests {
		got, ok := planEviction(tc.cands, tc.used, tc.incoming, tc.capacity)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: planEviction = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
