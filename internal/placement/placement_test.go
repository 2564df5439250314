package placement

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
)

func layout(size uint32, targets ...ChainID) Layout {
	return Layout{StripeSize: size, StripeCount: uint16(len(targets)), Chains: targets}
}

func TestLocate(t *testing.T) {
	l := layout(1<<20, 10, 11, 12, 13)
	tests := []struct {
		off      int64
		slot     int
		chunkOff int64
	}{
		{0, 0, 0},
		{1<<20 - 1, 0, 1<<20 - 1},
		{1 << 20, 1, 0},
		{3<<20 + 5, 3, 5},
		{4 << 20, 0, 1 << 20},     // second round of stripes
		{9<<20 + 7, 1, 2<<20 + 7}, // stripe 9 -> slot 1, third stripe in it
	}
	for _, tt := range tests {
		slot, coff := l.Locate(tt.off)
		if slot != tt.slot || coff != tt.chunkOff {
			t.Errorf("Locate(%d) = (%d, %d), want (%d, %d)", tt.off, slot, coff, tt.slot, tt.chunkOff)
		}
	}
}

// TestSplitCoversRangeOnce checks, for random layouts and ranges, that Split
// returns extents that tile the range in order, never cross a stripe, and
// agree with Locate; and that distinct file bytes never map to the same
// chunk byte.
func TestSplitCoversRangeOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		n := 1 + rng.IntN(8)
		targets := make([]ChainID, n)
		for i := range targets {
			targets[i] = ChainID(100 + i)
		}
		l := layout(uint32(MinStripeSize*(1+rng.IntN(4))), targets...)
		off := rng.Int64N(50 << 20)
		length := 1 + rng.Int64N(20<<20)
		ext := l.Split(off, length)
		pos := off
		for _, e := range ext {
			if e.FileOff != pos || e.Len <= 0 {
				t.Fatalf("%v: extent %+v does not continue at %d", l, e, pos)
			}
			slot, coff := l.Locate(e.FileOff)
			if slot != e.Slot || coff != e.ChunkOff || e.Chain != l.Chains[slot] {
				t.Fatalf("%v: extent %+v disagrees with Locate = (%d, %d)", l, e, slot, coff)
			}
			if e.FileOff/int64(l.StripeSize) != (e.FileOff+e.Len-1)/int64(l.StripeSize) {
				t.Fatalf("%v: extent %+v crosses a stripe boundary", l, e)
			}
			pos += e.Len
		}
		if pos != off+length {
			t.Fatalf("%v: extents end at %d, want %d", l, pos, off+length)
		}
	}
	// Injectivity over a small space: every byte of a 3-stripe-round file
	// maps to a distinct (slot, chunk offset).
	l := layout(MinStripeSize, 1, 2, 3)
	seen := make(map[[2]int64]int64)
	for off := int64(0); off < 9*MinStripeSize; off += 997 {
		slot, coff := l.Locate(off)
		k := [2]int64{int64(slot), coff}
		if prev, dup := seen[k]; dup {
			t.Fatalf("offsets %d and %d both map to slot %d offset %d", prev, off, slot, coff)
		}
		seen[k] = off
	}
}

// TestChunkSize checks ChunkSize against a byte-by-byte count via Locate.
func TestChunkSize(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		targets := make([]ChainID, n)
		for i := range targets {
			targets[i] = ChainID(i + 1)
		}
		l := layout(MinStripeSize, targets...)
		for _, size := range []int64{0, 1, MinStripeSize - 1, MinStripeSize, MinStripeSize + 1, 5*MinStripeSize + 17, 8 * MinStripeSize} {
			want := make([]int64, n)
			if size > 0 {
				// The chunk's length is one past its highest byte.
				for _, e := range l.Split(0, size) {
					want[e.Slot] = max(want[e.Slot], e.ChunkOff+e.Len)
				}
			}
			for slot := range n {
				if got := l.ChunkSize(slot, size); got != want[slot] {
					t.Errorf("count %d size %d slot %d: ChunkSize = %d, want %d", n, size, slot, got, want[slot])
				}
			}
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []Layout{
		{StripeSize: 0, StripeCount: 1},
		{StripeSize: MinStripeSize + 1, StripeCount: 1},
		{StripeSize: MaxStripeSize + MinStripeSize, StripeCount: 1},
		{StripeSize: MinStripeSize, StripeCount: MaxStripeCount + 1},
		{StripeSize: MinStripeSize, StripeCount: 2, Chains: []ChainID{1}},
		{StripeSize: MinStripeSize, StripeCount: 2, Chains: []ChainID{1, 1}},
	}
	for _, l := range bad {
		if err := l.Validate(); errs.CodeOf(err) != errs.Invalid {
			t.Errorf("Validate(%v) = %v, want an invalid-argument error", l, err)
		}
	}
	if err := layout(DefaultStripeSize, 1, 2).Validate(); err != nil {
		t.Errorf("valid layout rejected: %v", err)
	}
}

func TestChoose(t *testing.T) {
	ts := []TargetInfo{{1, true, 10}, {2, true, 10}, {3, false, 10}, {4, true, 0}, {5, true, 10}}
	got, err := Choose(ts, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []TargetID{1, 2, 5} // 3 unhealthy, 4 full
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Choose = %v, want %v", got, want)
		}
	}
	// Rotation by seed spreads the first slot over all usable targets.
	first := map[TargetID]int{}
	for seed := range uint64(300) {
		got, err := Choose(ts, 1, seed)
		if err != nil {
			t.Fatal(err)
		}
		first[got[0]]++
	}
	if len(first) != 3 || first[1] != 100 || first[2] != 100 || first[5] != 100 {
		t.Fatalf("first targets not spread evenly: %v", first)
	}
	if _, err := Choose(ts, 6, 0); errs.CodeOf(err) != errs.Invalid {
		t.Errorf("more targets than exist: %v", err)
	}
	// Too few with free space: full healthy targets are used too (the
	// writes, not the create, fail with no space).
	if got, err := Choose(ts, 4, 0); err != nil || !slices.Contains(got, 4) {
		t.Errorf("more targets than have space: %v, %v", got, err)
	}
	if _, err := Choose(ts, 5, 0); errs.CodeOf(err) != errs.NoSpace {
		t.Errorf("more targets than healthy: %v", err)
	}
	if _, err := Choose(ts, 0, 0); errs.CodeOf(err) != errs.Invalid {
		t.Errorf("zero count: %v", err)
	}
}

// TestFileOffInvertsLocate: every file offset's (slot, chunk offset) maps
// back to it, for several stripe shapes.
func TestFileOffInvertsLocate(t *testing.T) {
	for _, l := range []Layout{
		{StripeSize: MinStripeSize, StripeCount: 1},
		{StripeSize: MinStripeSize, StripeCount: 3},
		{StripeSize: 2 * MinStripeSize, StripeCount: 4},
	} {
		step := int64(l.StripeSize)/3 + 1
		for off := int64(0); off < 40*int64(l.StripeSize); off += step {
			slot, coff := l.Locate(off)
			if got := l.FileOff(slot, coff); got != off {
				t.Fatalf("%v: Locate(%d) = (%d, %d), FileOff of that = %d", l, off, slot, coff, got)
			}
		}
	}
}

func TestDataID(t *testing.T) {
	if got := (Layout{}).DataID(7); got != 7 {
		t.Errorf("DataID without Data = %d, want the inode 7", got)
	}
	if got := (Layout{Data: 99}).DataID(7); got != 99 {
		t.Errorf("DataID with Data 99 = %d", got)
	}
}
