package mover

import (
	"testing"
	"time"
)

// TestPacer: moves start no earlier than the units started before them
// allow at the rate; without a rate, at once.
func TestPacer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := Pacer{Start: t0, Rate: 100 << 20} // 100 MiB/s
	for i, want := range []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 520 * time.Millisecond} {
		if got := p.Due().Sub(t0); got != want {
			t.Errorf("move %d: due after %v, want %v", i, got, want)
		}
		size := float64(1 << 20) // 1 MiB: 10 ms at the rate
		if i == 2 {
			size = 50 << 20 // 500 ms
		}
		p.Add(size)
	}
	files := Pacer{Start: t0, Rate: 4} // 4 releases a second
	for i := range 9 {
		if got, want := files.Due().Sub(t0), time.Duration(i)*250*time.Millisecond; got != want {
			t.Errorf("release %d: due after %v, want %v", i, got, want)
		}
		files.Add(1)
	}
	free := Pacer{Start: t0}
	free.Add(1 << 40)
	if got := free.Due(); !got.Equal(t0) {
		t.Errorf("no rate: due %v, want the start", got)
	}
}
