package mover

// Staging ahead of readers (docs/tier.md, `sluice stage --follow`): a
// stager restores a job's released files in the order a recorded epoch
// read them, keeping Depth files ahead of the furthest file the job's
// readers have reached in this epoch; a reader that reaches a file the
// stager has not restored yet (a miss) doubles the depth. The decisions
// are these pure functions; internal/cli carries them out.

// StageState is what a stager knows, by index in the staging order.
type StageState struct {
	Started []bool  // the stager started restoring it
	DoneAt  []int64 // when its restore finished (Unix ns; 0: not yet)
	ReadAt  []int64 // when a reader first read it (Unix ns; 0: not yet)
	Depth   int     // files to keep restored ahead of the readers
}

// NewStageState returns the state of a stager of n files starting with
// depth files ahead.
func NewStageState(n, depth int) *StageState {
	return &StageState{Started: make([]bool, n), DoneAt: make([]int64, n), ReadAt: make([]int64, n), Depth: max(depth, 1)}
}

// Position is the index after the furthest file the readers have read.
func (s *StageState) Position() int {
	for i := len(s.ReadAt) - 1; i >= 0; i-- {
		if s.ReadAt[i] != 0 {
			return i + 1
		}
	}
	return 0
}

// Next returns the indexes to start restoring now, at most free of them:
// first the files not started from the readers' position up to Depth
// beyond it, in order; then, with the readers ahead of or done with them,
// the rest (the files behind the readers, and those beyond the depth once
// every file ahead is done), so that the whole order ends up restored for
// the next epoch.
func (s *StageState) Next(free int) []int {
	if free <= 0 {
		return nil
	}
	var out []int
	pos := s.Position()
	limit := min(pos+s.Depth, len(s.Started))
	for i := pos; i < limit && len(out) < free; i++ {
		if !s.Started[i] {
			out = append(out, i)
		}
	}
	if len(out) > 0 {
		return out
	}
	// Ahead is covered: go further only once it is done.
	for i := pos; i < limit; i++ {
		if s.DoneAt[i] == 0 {
			return nil
		}
	}
	for i := range s.Started {
		if len(out) == free {
			break
		}
		if !s.Started[i] && (i < pos || i >= limit) {
			out = append(out, i)
			if i >= limit {
				break // one at a time past the depth: the readers may come
			}
		}
	}
	return out
}

// Read records that a reader first read file i at t and returns whether
// it was a hit (restored before the read started). A miss doubles the
// depth, up to maxDepth.
func (s *StageState) Read(i int, t int64, maxDepth int) (hit, first bool) {
	if s.ReadAt[i] != 0 {
		return false, false
	}
	s.ReadAt[i] = t
	hit = s.DoneAt[i] != 0 && s.DoneAt[i] <= t
	if !hit {
		s.Depth = min(max(2*s.Depth, 1), max(maxDepth, 1))
	}
	return hit, true
}

// AllRead reports whether the readers have read every file.
func (s *StageState) AllRead() bool {
	for _, t := range s.ReadAt {
		if t == 0 {
			return false
		}
	}
	return true
}

// Done reports whether every file has been restored.
func (s *StageState) Done() bool {
	for _, d := range s.DoneAt {
		if d == 0 {
			return false
		}
	}
	return true
}
