package mover

import (
	"cmp"
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluice-fs/sluice/internal/placement"
)

// File is what Plan knows of a regular file under a policy.
type File struct {
	Path  string
	Ino   uint64
	Size  int64
	Mtime time.Time // last change of the data
	Used  time.Time // last use: the later of atime and mtime
	State string    // resident, archived, released or dirty
	// Pinned files are never released (their bytes live in the metadata
	// service, not on targets: small inline files).
	Pinned bool
	Policy Policy
	// On is how many bytes of the file's chunks each target holds (every
	// replica counted on its own target; see TargetBytes): what a release
	// frees there.
	On map[uint32]int64
}

// Fill is a target's capacity and use in bytes.
type Fill struct{ Capacity, Used int64 }

// Fills are the targets' fills by target ID.
type Fills map[uint32]Fill

// Percent returns the fill in percent, 0 without capacity.
func (f Fill) Percent() float64 {
	if f.Capacity <= 0 {
		return 0
	}
	return 100 * float64(f.Used) / float64(f.Capacity)
}

// DefaultReleases is the default Limits.Releases of `sluice mover` and
// the mover of `sluice serve`: a release frees the file's chunks through
// the garbage collector, and a storm of them must not starve reads.
const DefaultReleases = 1000

// Limits cap one pass.
type Limits struct {
	// ArchiveBytes bounds the bytes a pass archives (the oldest changes
	// first); at least one file is archived when any is due. 0: no cap.
	ArchiveBytes int64
	// Releases bounds the files a pass releases. 0: no cap.
	Releases int
	// ArchiveRate bounds the bytes per second archives start at (the
	// mover paces them; Plan ignores it). 0: no cap.
	ArchiveRate int64
	// ReleaseRate bounds the files per second releases start at (the
	// mover paces them; Plan ignores it): each release queues its
	// chunks' removal, and a pass's releases spread out so that the
	// removals never come as one storm. 0: no cap.
	ReleaseRate float64
}

// Kind is what an Action does.
type Kind uint8

const (
	Archive Kind = iota + 1
	Release
)

func (k Kind) String() string {
	switch k {
	case Archive:
		return "archive"
	case Release:
		return "release"
	}
	return "?"
}

// Action is one move Plan decided, with why.
type Action struct {
	Kind   Kind
	File   File
	Reason string
}

// Plan decides one pass's moves at time now, given the files under
// policies and the targets' fills. In order:
//
//   - archives: resident or dirty files whose policy has ArchiveAfter and
//     whose data is at least that old, oldest first, within
//     Limits.ArchiveBytes;
//   - releases by age: archived files not used for their ReleaseAfter;
//   - releases by watermark, per target: an archived file with a
//     watermark is released, least recently used first, when one of the
//     targets holding its chunks was at or above the file's High at the
//     start of the pass and would still be above its Low less the bytes
//     of the releases planned before it (a pass stopped by
//     Limits.Releases goes on in the next only while a target is still at
//     High or above);
//
// all releases within Limits.Releases, and never a pinned file. A file
// gets at most one action; a file archived in this pass is released in a
// later one. With Limits.Releases set, the watermark's candidates are the
// Limits.Releases least recently used files that hold bytes on a target
// at or above its High (Planner): if some of them are not released (their
// targets came below Low first), the pass releases fewer than the cap and
// the next one goes on.
func Plan(files []File, fills Fills, now time.Time, lim Limits) []Action {
	p := NewPlanner(fills, now, lim)
	for _, f := range files {
		p.Add(f)
	}
	return p.Finish()
}

// A Planner makes Plan's plan from files given one at a time, keeping
// only those the plan can use: the files due for archiving, the releases
// by age (at most Limits.Releases) and the watermark's candidates (at most
// Limits.Releases of them, the least recently used, when it is set). So a
// pass over a tree of millions of files holds its candidates, not the
// tree.
type Planner struct {
	fills Fills
	now   time.Time
	lim   Limits
	due   []File   // due for archiving
	aged  []Action // releases by age, in the order given
	lru   lruHeap  // watermark candidates, the most recently used on top
}

// NewPlanner returns a Planner for a pass at time now.
func NewPlanner(fills Fills, now time.Time, lim Limits) *Planner {
	return &Planner{fills: fills, now: now, lim: lim}
}

// Add considers f for the plan.
func (p *Planner) Add(f File) {
	pol := f.Policy
	if pol.ArchiveAfter > 0 && (f.State == "resident" || f.State == "dirty") && !f.Mtime.After(p.now.Add(-pol.ArchiveAfter)) {
		p.due = append(p.due, f)
		return
	}
	if f.State != "archived" || f.Pinned {
		return
	}
	if pol.ReleaseAfter > 0 && !f.Used.After(p.now.Add(-pol.ReleaseAfter)) {
		if p.lim.Releases <= 0 || len(p.aged) < p.lim.Releases {
			p.aged = append(p.aged, Action{Kind: Release, File: f, Reason: "unused for " + pol.ReleaseAfter.String()})
		}
		return // with no room left for it, no watermark release happens either
	}
	if pol.High <= 0 || !startsOver(f, p.fills) {
		return
	}
	heap.Push(&p.lru, f)
	if p.lim.Releases > 0 && p.lru.Len() > p.lim.Releases {
		heap.Pop(&p.lru) // the most recently used
	}
}

// Finish returns the plan of the files added.
func (p *Planner) Finish() []Action {
	var out []Action
	slices.SortStableFunc(p.due, func(a, b File) int { return cmp.Or(a.Mtime.Compare(b.Mtime), cmp.Compare(a.Path, b.Path)) })
	var archived int64
	for _, f := range p.due {
		if p.lim.ArchiveBytes > 0 && archived > 0 && archived+f.Size > p.lim.ArchiveBytes {
			break
		}
		archived += f.Size
		out = append(out, Action{Kind: Archive, File: f, Reason: "unchanged for " + f.Policy.ArchiveAfter.String()})
	}

	releases := 0
	freed := map[uint32]int64{}
	release := func(a Action) {
		out = append(out, a)
		for t, n := range a.File.On {
			freed[t] += n
		}
		releases++
	}
	for _, a := range p.aged {
		release(a)
	}
	lru := []File(p.lru)
	slices.SortStableFunc(lru, lessUsed)
	for _, f := range lru {
		if p.lim.Releases > 0 && releases >= p.lim.Releases {
			break
		}
		if t, ok := overWatermark(f, p.fills, freed); ok {
			release(Action{Kind: Release, File: f, Reason: fmt.Sprintf("target %d past the high watermark", t)})
		}
	}
	return out
}

// lessUsed orders files least recently used first (by path among equals).
func lessUsed(a, b File) int { return cmp.Or(a.Used.Compare(b.Used), cmp.Compare(a.Path, b.Path)) }

// lruHeap is a heap of files with the most recently used on top.
type lruHeap []File

func (h lruHeap) Len() int           { return len(h) }
func (h lruHeap) Less(i, j int) bool { return lessUsed(h[i], h[j]) > 0 }
func (h lruHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lruHeap) Push(x any)        { *h = append(*h, x.(File)) }
func (h *lruHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	*h = old[:len(old)-1]
	return f
}

// startsOver reports whether a target holding bytes of f was at or above
// f's High at the start of the pass: only then can a watermark release f.
func startsOver(f File, fills Fills) bool {
	for t, n := range f.On {
		if fl, ok := fills[t]; ok && n > 0 && fl.Percent() >= float64(f.Policy.High) {
			return true
		}
	}
	return false
}

// overWatermark returns the first target (lowest ID) holding bytes of f
// that started the pass at or above f's High and, less the bytes freed so
// far, is still above its Low.
func overWatermark(f File, fills Fills, freed map[uint32]int64) (uint32, bool) {
	for _, t := range slices.Sorted(maps.Keys(f.On)) {
		fl, ok := fills[t]
		if f.On[t] <= 0 || !ok || fl.Percent() < float64(f.Policy.High) {
			continue
		}
		if left := (Fill{Capacity: fl.Capacity, Used: fl.Used - freed[t]}); left.Percent() > float64(f.Policy.Low) {
			return t, true
		}
	}
	return 0, false
}

// TargetBytes returns how many bytes of a file of the given size and
// layout each target holds: each slot's chunk (placement.Layout.ChunkSize)
// on every replica of its chain. replicas gives a replicated chain's
// targets; a layout of one replica names targets directly.
func TargetBytes(l placement.Layout, size int64, replicas func(placement.ChainID) []placement.TargetID) map[uint32]int64 {
	out := map[uint32]int64{}
	for slot, ch := range l.Chains {
		n := l.ChunkSize(slot, size)
		if n <= 0 {
			continue
		}
		if l.ReplicaCount() <= 1 {
			out[uint32(ch)] += n
			continue
		}
		for _, t := range replicas(ch) {
			out[uint32(t)] += n
		}
	}
	return out
}
