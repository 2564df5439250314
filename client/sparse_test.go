package client

import (
	"slices"
	"testing"

	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

func TestSeekIn(t *testing.T) {
	runs := [][2]int64{{10, 20}, {30, 40}}
	for _, c := range []struct {
		at, end int64
		hole    bool
		want    int64
		found   bool
	}{
		{0, 100, false, 10, true},
		{15, 100, false, 15, true},
		{0, 100, true, 0, true},
		{10, 100, true, 20, true},
		{35, 100, true, 40, true},
		{35, 40, true, 0, false}, // data to the window's end
		{0, 100, false, 10, true},
	} {
		// Runs before at are not in a window starting at at.
		var rs [][2]int64
		for _, r := range runs {
			if r[1] > c.at {
				rs = append(rs, [2]int64{max(r[0], c.at), r[1]})
			}
		}
		got, found := seekIn(rs, c.at, c.end, c.hole)
		if found != c.found || found && got != c.want {
			t.Errorf("seekIn(%v, %d, %d, hole %v) = %d, %v; want %d, %v", rs, c.at, c.end, c.hole, got, found, c.want, c.found)
		}
	}
	if _, found := seekIn(nil, 0, 100, false); found {
		t.Error("no runs: data found")
	}
	if got, found := seekIn(nil, 5, 100, true); !found || got != 5 {
		t.Errorf("no runs: hole at %d, %v; want 5", got, found)
	}
}

// TestAppendExtentRuns maps chunk runs back to file ranges through a
// 4-way stripe of 64 KiB.
func TestAppendExtentRuns(t *testing.T) {
	l := placement.Layout{StripeSize: 64 << 10, StripeCount: 4, Chains: []placement.ChainID{1, 2, 3, 4}}
	const s = 64 << 10
	// Slot 0 holds data in its second stripe unit only (file 4s..5s);
	// slot 1 in its whole first unit and the first half of its second
	// (file s..2s and 5s..5.5s).
	runs := map[int][]wire.ChunkRun{0: {{Off: s, End: 2 * s}}, 1: {{Off: 0, End: s + s/2}}}
	var out [][2]int64
	for _, e := range l.Split(0, 8*s) {
		out = appendExtentRuns(out, e, runs[e.Slot])
	}
	want := [][2]int64{{s, 2 * s}, {4 * s, 5*s + s/2}}
	if !slices.Equal(out, want) {
		t.Fatalf("file runs %v, want %v", out, want)
	}
	// A window starting inside a unit.
	out = nil
	for _, e := range l.Split(4*s+100, 2*s) {
		out = appendExtentRuns(out, e, runs[e.Slot])
	}
	want = [][2]int64{{4*s + 100, 5*s + s/2}}
	if !slices.Equal(out, want) {
		t.Fatalf("from 4s+100: %v, want %v", out, want)
	}
}
