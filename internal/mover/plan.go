package mover

import (
	"cmp"
	"slices"
	"time"
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
}

// Fill is the targets' capacity and use in bytes.
type Fill struct{ Capacity, Used int64 }

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
// policies and the targets' fill. In order:
//
//   - archives: resident or dirty files whose policy has ArchiveAfter and
//     whose data is at least that old, oldest first, within
//     Limits.ArchiveBytes;
//   - releases by age: archived files not used for their ReleaseAfter;
//   - releases by watermark: when the fill at the start of the pass is at
//     or above a file's High, archived files with a watermark, least
//     recently used first, until the fill less the bytes of the releases
//     planned would be at the file's Low or below (a pass stopped by
//     Limits.Releases goes on in the next only while the fill is still
//     at High or above);
//
// all releases within Limits.Releases, and never a pinned file. A file
// gets at most one action; a file archived in this pass is released in a
// later one.
func Plan(files []File, fill Fill, now time.Time, lim Limits) []Action {
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
	freed := int64(0)
	var lru []File
	for _, f := range files {
		if f.State != "archived" || f.Pinned {
			continue
		}
		p := f.Policy
		if p.ReleaseAfter > 0 && !f.Used.After(now.Add(-p.ReleaseAfter)) && room() {
			out = append(out, Action{Kind: Release, File: f, Reason: "unused for " + p.ReleaseAfter.String()})
			freed += f.Size
			releases++
			continue
		}
		if p.High > 0 {
			lru = append(lru, f)
		}
	}
	slices.SortStableFunc(lru, func(a, b File) int { return cmp.Or(a.Used.Compare(b.Used), cmp.Compare(a.Path, b.Path)) })
	start := fill.Percent()
	for _, f := range lru {
		if !room() {
			break
		}
		left := Fill{Capacity: fill.Capacity, Used: fill.Used - freed}
		if start < float64(f.Policy.High) || left.Percent() <= float64(f.Policy.Low) {
			continue
		}
		out = append(out, Action{Kind: Release, File: f, Reason: "targets past the high watermark"})
		freed += f.Size
		releases++
	}
	return out
}
