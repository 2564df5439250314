package cli

import (
	"testing"
	"time"
)

// TestPacer: restores start no earlier than the bytes started before them
// allow at the rate; without a rate, at once.
func TestPacer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := pacer{start: t0, rate: 100 << 20} // 100 MiB/s
	for i, want := range []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 520 * time.Millisecond} {
		if got := p.due().Sub(t0); got != want {
			t.Errorf("restore %d: due after %v, want %v", i, got, want)
		}
		size := int64(1 << 20) // 1 MiB: 10 ms at the rate
		if i == 2 {
			size = 50 << 20 // 500 ms
		}
		p.started += size
	}
	free := pacer{start: t0}
	free.started = 1 << 40
	if got := free.due(); !got.Equal(t0) {
		t.Errorf("no rate: due %v, want the start", got)
	}
}
