package mover

import (
	"slices"
	"testing"
)

func TestStageNext(t *testing.T) {
	s := NewStageState(10, 2)
	if got := s.Next(4); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("first starts %v, want the depth's 2", got)
	}
	s.Started[0], s.Started[1] = true, true
	if got := s.Next(4); got != nil {
		t.Fatalf("with the depth started and not done: %v, want nothing", got)
	}
	s.DoneAt[0], s.DoneAt[1] = 5, 6
	// Ahead is done: one more past the depth.
	if got := s.Next(4); !slices.Equal(got, []int{2}) {
		t.Fatalf("past the depth: %v, want [2]", got)
	}
	s.Started[2] = true
	// A reader reads 0 after it was restored: a hit; the position moves.
	if hit, first := s.Read(0, 10, 64); !hit || !first {
		t.Errorf("read of a restored file: hit %v first %v", hit, first)
	}
	if hit, first := s.Read(0, 11, 64); hit || first {
		t.Errorf("second read of a file counted: hit %v first %v", hit, first)
	}
	// A reader reaches 3, not started: a miss; the depth doubles.
	if hit, _ := s.Read(3, 12, 64); hit || s.Depth != 4 {
		t.Errorf("miss: hit %v depth %d, want a miss and depth 4", hit, s.Depth)
	}
	if s.Position() != 4 {
		t.Errorf("position %d, want 4", s.Position())
	}
	// From position 4, depth 4: 4..7 first; 3 (behind, read) after.
	if got := s.Next(10); !slices.Equal(got, []int{4, 5, 6, 7}) {
		t.Errorf("after the miss: %v, want [4 5 6 7]", got)
	}
	for _, i := range []int{4, 5, 6, 7} {
		s.Started[i], s.DoneAt[i] = true, 20
	}
	s.DoneAt[2] = 20
	if got := s.Next(10); !slices.Equal(got, []int{3, 8}) {
		t.Errorf("ahead done: %v, want the file behind and one past the depth", got)
	}
	// A miss of a file restored late (after the read started).
	s2 := NewStageState(3, 1)
	s2.Started[0], s2.DoneAt[0] = true, 50
	if hit, _ := s2.Read(0, 40, 2); hit || s2.Depth != 2 {
		t.Errorf("read before the restore finished: hit %v depth %d", hit, s2.Depth)
	}
	s2.Read(1, 60, 2)
	if s2.Depth != 2 {
		t.Errorf("depth %d over its bound 2", s2.Depth)
	}
	if s2.Done() {
		t.Error("done with files not restored")
	}
	s2.DoneAt[1], s2.DoneAt[2] = 1, 1
	if !s2.Done() {
		t.Error("not done with every file restored")
	}
	if s2.AllRead() {
		t.Error("all read with file 2 unread")
	}
	s2.Read(2, 70, 2)
	if !s2.AllRead() {
		t.Error("not all read")
	}
}
