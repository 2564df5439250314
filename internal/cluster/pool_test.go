package cluster

import (
	"bytes"
	"slices"
	"testing"

	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// FuzzDecodePool feeds arbitrary bytes to the pool record decoder: no
// panic, and what it accepts encodes back to the same bytes.
func FuzzDecodePool(f *testing.F) {
	f.Add(encodePool(nil))
	f.Add(encodePool([]placement.TargetID{1, 2, 7}))
	f.Add([]byte{0, 2, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := decodePool(b)
		if err != nil {
			return
		}
		if got := encodePool(ts); !bytes.Equal(got, b) {
			t.Fatalf("decode then encode: %x, want %x", got, b)
		}
	})
}

func TestPoolRecordRoundTrip(t *testing.T) {
	t.Parallel()
	for _, ts := range [][]placement.TargetID{{}, {5}, {1, 2, 3, 1<<31 - 1}} {
		got, err := decodePool(encodePool(ts))
		if err != nil || !slices.Equal(got, ts) {
			t.Errorf("round trip of %v: %v, %v", ts, got, err)
		}
	}
	if _, err := decodePool([]byte{0, 1, 0}); err == nil {
		t.Error("a short record decoded")
	}
}

func TestPoolUsage(t *testing.T) {
	t.Parallel()
	ts := []wire.TargetAddr{
		{ID: 1, Node: "a", FS: 10, Capacity: 100, Used: 40},
		{ID: 2, Node: "a", FS: 10, Capacity: 100, Used: 40}, // same file system as 1
		{ID: 3, Node: "b", FS: 10, Capacity: 50, Used: 5},   // same FS number, other node
		{ID: 4, Node: "b", Capacity: 30, Used: 3},           // FS unknown: counted
		{ID: 5, Node: "b", Capacity: 30, Used: 3},
	}
	for _, tc := range []struct {
		members   []placement.TargetID
		cap, used int64
	}{
		{nil, 0, 0},
		{[]placement.TargetID{1}, 100, 40},
		{[]placement.TargetID{1, 2}, 100, 40},
		{[]placement.TargetID{1, 2, 3}, 150, 45},
		{[]placement.TargetID{4, 5, 9}, 60, 6},
	} {
		c, u := poolUsage(ts, tc.members)
		if c != tc.cap || u != tc.used {
			t.Errorf("poolUsage(%v) = %d, %d; want %d, %d", tc.members, c, u, tc.cap, tc.used)
		}
	}
}
