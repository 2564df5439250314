package qos

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSplitLimit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name   string
		total  float64
		demand []float64
		want   []float64
	}{
		{"one node gets it all", 100 * mib, []float64{0}, []float64{100 * mib}},
		{"idle nodes share equally", 100 * mib, []float64{0, 0, 0, 0}, []float64{25 * mib, 25 * mib, 25 * mib, 25 * mib}},
		// Floors of 12.5 MiB/s; the busy node takes the 75 the idle one
		// leaves.
		{"one busy node", 100 * mib, []float64{500 * mib, 0}, []float64{87.5 * mib, 12.5 * mib}},
		// Node 0 wants 20 (7.5 past its floor), node 1 the rest.
		{"small and big demand", 100 * mib, []float64{20 * mib, 500 * mib}, []float64{20 * mib, 80 * mib}},
		{"both want more: equal", 100 * mib, []float64{300 * mib, 500 * mib}, []float64{50 * mib, 50 * mib}},
		// Demand under the total: each gets its demand, the spare 40 is
		// spread (after floors of 12.5 each).
		{"spare spread", 100 * mib, []float64{30 * mib, 30 * mib}, []float64{50 * mib, 50 * mib}},
		{"no limit", 0, []float64{1, 2}, []float64{0, 0}},
		{"no nodes", 100, nil, []float64{}},
	} {
		got := SplitLimit(tc.total, tc.demand)
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %d shares, want %d", tc.name, len(got), len(tc.want))
		}
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1 {
				t.Errorf("%s: shares %v MiB/s, want %v", tc.name, scaled(got), scaled(tc.want))
				break
			}
		}
	}
}

func scaled(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x / (1 << 20)
	}
	return out
}

// TestSplitLimitProperties: for random demands the shares add up to the
// total, every node gets its floor, and no node gets less than an equal
// part while another gets more than its demand plus an equal part of the
// spare.
func TestSplitLimitProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + r.IntN(12)
		total := 1 + r.Float64()*1e9
		demand := make([]float64, n)
		for i := range demand {
			switch r.IntN(3) {
			case 0:
			case 1:
				demand[i] = r.Float64() * total / float64(n)
			default:
				demand[i] = r.Float64() * 4 * total
			}
		}
		s := SplitLimit(total, demand)
		sum := 0.0
		floor := MinShareFraction * total / float64(n)
		for i, x := range s {
			sum += x
			if x < floor*(1-1e-9) {
				t.Fatalf("demand %v total %v: share %d = %v below the floor %v", demand, total, i, x, floor)
			}
		}
		if math.Abs(sum-total) > total*1e-9 {
			t.Fatalf("demand %v: shares %v add up to %v, want %v", demand, s, sum, total)
		}
		// Max-min fairness: a node that got less than its demand got at
		// least as much as any other node got beyond that other's demand
		// is allowed (the spare is spread only when all are satisfied).
		for i := range s {
			if s[i] >= demand[i]*(1-1e-9) {
				continue
			}
			for j := range s {
				if s[j] > s[i]*(1+1e-9) && s[j] > demand[j]*(1+1e-9) {
					t.Fatalf("demand %v: node %d got %v under its demand while node %d got %v over its own", demand, i, s[i], j, s[j])
				}
			}
		}
	}
}
