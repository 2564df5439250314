package mover

import (
	"cmp"
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
// later one.
func Plan(files []File, fills Fills, now time.Time, lim Limits) []Action {
	var out []Action
	var due []File
	for _, f := range files {
		p := f.Policy
		if p.ArchiveAfter > 0 && (f.State == "resident" || f.State == "dirty") && !f.Mtime.After(now.Add(-p.ArchiveAfter)) {
			due = append(due, f)
		}
	}
	slices.SortStableFunc(due, func(a, b File) int { return cmp.Or(a.Mtime.Compare(b.Mtime), cmp.Compare(a.Path, b.Path)) })
	var archived int64
	for _, f := range due {
		if lim.ArchiveBytes > 0 && archived > 0 && archived+f.Size > lim.ArchiveBytes {
			break
		}
		archived += f.Size
		out = append(out, Action{Kind: Archive, File: f, Reason: "unchanged for " + f.Policy.ArchiveAfter.String()})
	}

	releases := 0
	room := func() bool { return lim.Releases <= 0 || releases < lim.Releases }
	freed := map[uint32]int64{}
	release := func(f File) {
		for t, n := range f.On {
			freed[t] += n
		}
		releases++
	}
	var lru []File
	for _, f := range files {
		if f.State != "archived" || f.Pinned {
			continue
		}
		p := f.Policy
		if p.ReleaseAfter > 0 && !f.Used.After(now.Add(-p.ReleaseAfter)) && room() {
			out = append(out, Action{Kind: Release, File: f, Reason: "unused for " + p.ReleaseAfter.String()})
			release(f)
			continue
		}
		if p.High > 0 {
			lru = append(lru, f)
		}
	}
	slices.SortStableFunc(lru, func(a, b File) int { return cmp.Or(a.Used.Compare(b.Used), cmp.Compare(a.Path, b.Path)) })
	for _, f := range lru {
		if !room() {
			break
		}
		if t, ok := overWatermark(f, fills, freed); ok {
			out = append(out, Action{Kind: Release, File: f, Reason: fmt.Sprintf("target %d past the high watermark", t)})
			release(f)
		}
	}
	return out
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
