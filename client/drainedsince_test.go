package client

import "testing"

// TestDrainedSince: a drain counts for a token taken before it, not for
// one taken after; the largest size of several drains of one file counts;
// the ring forgets drains older than recentDrains.
func TestDrainedSince(t *testing.T) {
	var s stager
	tok0 := s.nDrained
	if _, ok := s.drainedSince(7, tok0); ok {
		t.Fatal("a drain reported before any")
	}
	s.noteDrainedLocked(7, 100)
	s.noteDrainedLocked(8, 50)
	tok1 := s.nDrained
	s.noteDrainedLocked(7, 300)
	s.noteDrainedLocked(7, 200)
	if size, ok := s.drainedSince(7, tok0); !ok || size != 300 {
		t.Errorf("since tok0: %d, %v; want 300, true", size, ok)
	}
	if size, ok := s.drainedSince(8, tok0); !ok || size != 50 {
		t.Errorf("file 8 since tok0: %d, %v; want 50, true", size, ok)
	}
	if _, ok := s.drainedSince(8, tok1); ok {
		t.Error("file 8 drained before tok1 counts since it")
	}
	if _, ok := s.drainedSince(7, s.nDrained); ok {
		t.Error("a drain counts for a token taken after it")
	}
	for i := 0; i < recentDrains; i++ {
		s.noteDrainedLocked(9, 1)
	}
	if _, ok := s.drainedSince(7, tok0); ok {
		t.Error("a drain older than the ring still counts")
	}
}
