package qos

import (
	"testing"
	"time"
)

func TestReserveDecisions(t *testing.T) {
	for c, want := range map[Class]bool{Interactive: false, Training: false, Checkpoint: true, Background: true} {
		if got := Throttled(c); got != want {
			t.Errorf("Throttled(%v) = %v, want %v", c, got, want)
		}
	}
	const w = time.Second
	now := int64(100 * time.Second)
	for _, tc := range []struct {
		last int64
		want bool
	}{
		{0, false},                            // no interactive request yet
		{now, true},                           // one just now
		{now - int64(w) + 1, true},            // within the window
		{now - int64(w), false},               // the window has passed
		{now - int64(10*time.Second), false},  // long ago
		{now + int64(time.Millisecond), true}, // a clock that stepped back
	} {
		if got := Engaged(now, tc.last, w); got != tc.want {
			t.Errorf("Engaged(now, now%+d, 1s) = %v, want %v", tc.last-now, got, tc.want)
		}
	}
	for _, tc := range []struct{ procs, reserve, want int }{
		{2, 1, 1}, {8, 1, 7}, {8, 3, 5}, {1, 1, 1}, {2, 5, 1},
	} {
		if got := ReserveSlots(tc.procs, tc.reserve); got != tc.want {
			t.Errorf("ReserveSlots(%d, %d) = %d, want %d", tc.procs, tc.reserve, got, tc.want)
		}
	}
}

func TestReserveAdmit(t *testing.T) {
	r := NewReserve(1, time.Hour)
	done := make(chan struct{})
	// Not engaged: nothing is held.
	if rel, ok := r.Admit(Checkpoint, done); rel != nil || !ok {
		t.Fatalf("Admit(checkpoint) before any interactive request = %v, %v; want nil, true", rel != nil, ok)
	}
	if rel, _ := r.Admit(Interactive, done); rel != nil {
		t.Fatal("an interactive request holds a slot")
	}
	// Engaged: training passes, checkpoint and background share the slot.
	if rel, _ := r.Admit(Training, done); rel != nil {
		t.Fatal("a training request holds a slot")
	}
	rel1, ok := r.Admit(Checkpoint, done)
	if rel1 == nil || !ok {
		t.Fatal("an engaged checkpoint request holds no slot")
	}
	got := make(chan func())
	go func() {
		rel, _ := r.Admit(Background, done)
		got <- rel
	}()
	select {
	case <-got:
		t.Fatal("a second throttled request took the only slot while it was held")
	case <-time.After(50 * time.Millisecond):
	}
	rel1()
	rel2 := <-got
	if rel2 == nil {
		t.Fatal("the waiting request holds no slot after the release")
	}
	if st := r.Stats(); st.Slots != 1 || st.Held != 2 || st.Waited != 1 {
		t.Fatalf("stats %+v, want 1 slot, 2 held, 1 waited", st)
	}
	// A stopping server ends a wait.
	stopped := make(chan bool)
	go func() {
		_, ok := r.Admit(Checkpoint, done)
		stopped <- ok
	}()
	close(done)
	if <-stopped {
		t.Fatal("Admit returned ok after done was closed while every slot was held")
	}
	rel2()
}
