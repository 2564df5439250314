package placement

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
)

// randomPFL returns a progressive file layout of 2 to 4 components with
// stripe sizes of 64 KiB to 1 MiB and 1 to 5 stripes each; components may
// share chains.
func randomPFL(rng *rand.Rand) Layout {
	var l Layout
	var end int64
	n := 2 + rng.IntN(3)
	for i := range n {
		c := Comp{StripeSize: uint32(64<<10) * uint32(1+rng.IntN(16)), StripeCount: uint16(1 + rng.IntN(5))}
		if i < n-1 {
			end += int64(c.StripeSize) * int64(1+rng.IntN(6))
			c.End = end
		}
		perm := rng.Perm(8)
		for j := range int(c.StripeCount) {
			l.Chains = append(l.Chains, ChainID(1+perm[j]))
		}
		l.Comps = append(l.Comps, c)
		l.StripeCount += c.StripeCount
	}
	l.StripeSize = l.Comps[0].StripeSize
	return l
}

// TestPFLMapping: for random progressive layouts, Locate and FileOff are
// inverses, Split cuts a range into contiguous extents each inside one
// stripe of one component, and ChunkSize is the end of what Split puts in
// each slot.
func TestPFLMapping(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 21))
	for range 300 {
		l := randomPFL(rng)
		if err := l.Validate(); err != nil {
			t.Fatalf("%v: %v", l, err)
		}
		last := l.Comps[len(l.Comps)-2].End
		span := last + int64(l.Comps[len(l.Comps)-1].StripeSize)*int64(1+rng.IntN(12))
		for range 50 {
			off := rng.Int64N(span)
			slot, coff := l.Locate(off)
			if slot < 0 || slot >= len(l.Chains) {
				t.Fatalf("%v: Locate(%d) = slot %d", l, off, slot)
			}
			if got := l.FileOff(slot, coff); got != off {
				t.Fatalf("%v: FileOff(Locate(%d) = %d, %d) = %d", l, off, slot, coff, got)
			}
		}
		size := rng.Int64N(span)
		off := rng.Int64N(size + 1)
		next := off
		for _, e := range l.Split(off, size-off) {
			if e.FileOff != next || e.Len <= 0 {
				t.Fatalf("%v: extent %+v after %d", l, e, next)
			}
			if s, c := l.Locate(e.FileOff); s != e.Slot || c != e.ChunkOff || l.Chains[e.Slot] != e.Chain {
				t.Fatalf("%v: extent %+v, Locate says %d, %d", l, e, s, c)
			}
			if s, c := l.Locate(e.FileOff + e.Len - 1); s != e.Slot || c != e.ChunkOff+e.Len-1 {
				t.Fatalf("%v: extent %+v crosses a stripe or component", l, e)
			}
			next += e.Len
		}
		if next != size {
			t.Fatalf("%v: Split(%d, %d) ends at %d", l, off, size-off, next)
		}
		ends := make([]int64, len(l.Chains))
		for _, e := range l.Split(0, size) {
			ends[e.Slot] = max(ends[e.Slot], e.ChunkOff+e.Len)
		}
		for slot := range l.Chains {
			if got := l.ChunkSize(slot, size); got != ends[slot] {
				t.Fatalf("%v: ChunkSize(%d, %d) = %d, want %d", l, slot, size, got, ends[slot])
			}
		}
	}
}

func TestPFLValidate(t *testing.T) {
	ok := Layout{StripeSize: 1 << 20, StripeCount: 3, Chains: []ChainID{1, 1, 2},
		Comps: []Comp{{End: 64 << 20, StripeSize: 1 << 20, StripeCount: 1}, {StripeSize: 4 << 20, StripeCount: 2, Pool: "hdd"}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid layout: %v", err)
	}
	dir := Layout{StripeSize: 1 << 20, StripeCount: 1, Comps: []Comp{{End: 1 << 20, StripeSize: 1 << 20, StripeCount: 1}, {StripeSize: 1 << 20}}}
	if err := dir.Validate(); err != nil {
		t.Fatalf("a directory's layout with a component of every target: %v", err)
	}
	bad := func(f func(l *Layout)) Layout {
		l := ok
		l.Comps = append([]Comp(nil), ok.Comps...)
		l.Chains = append([]ChainID(nil), ok.Chains...)
		f(&l)
		return l
	}
	for name, l := range map[string]Layout{
		"one component":        bad(func(l *Layout) { l.Comps = l.Comps[:1]; l.Comps[0].End = 0; l.StripeCount = 1; l.Chains = l.Chains[:1] }),
		"last not open":        bad(func(l *Layout) { l.Comps[1].End = 128 << 20 }),
		"end not on 64 KiB":    bad(func(l *Layout) { l.Comps[0].End = 3 << 14 }),
		"ends not increasing":  bad(func(l *Layout) { l.Comps = []Comp{l.Comps[0], l.Comps[0], l.Comps[1]} }),
		"counts do not add up": bad(func(l *Layout) { l.StripeCount = 2; l.Chains = l.Chains[:2] }),
		"twice in a component": bad(func(l *Layout) { l.Chains[2] = 1 }),
		"bad stripe size":      bad(func(l *Layout) { l.Comps[1].StripeSize = 1000 }),
		"bad pool":             bad(func(l *Layout) { l.Comps[1].Pool = "Bad Pool" }),
		"file comp of 0":       bad(func(l *Layout) { l.Comps[0].StripeCount = 0; l.StripeCount = 2; l.Chains = l.Chains[1:] }),
	} {
		if err := l.Validate(); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s: %v, want EINVAL", name, err)
		}
	}
	if ok.SlotStripeSize(0) != 1<<20 || ok.SlotStripeSize(2) != 4<<20 || (Layout{StripeSize: 64 << 10}).SlotStripeSize(3) != 64<<10 {
		t.Error("SlotStripeSize")
	}
	// A file past every component's end is in the last one.
	if s, _ := ok.Locate(1 << 40); s != 1 && s != 2 {
		t.Errorf("offset 1 TiB in slot %d", s)
	}
}
