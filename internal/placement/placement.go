// Package placement holds the pure logic of where file data lives: a file's
// Layout, the mapping from a file offset to (target, chunk, chunk offset),
// and the choice of targets for a new file. It does no I/O.
//
// A file with stripe size S and stripe count N is cut into stripes of S
// bytes; stripe k lives in slot k mod N, and slot i of the file is one chunk,
// chunk.ID{Ino, Slot: i}, stored on the replicas of chain Chains[i] (see
// Chain). Inside that chunk, stripe k starts at offset (k / N) * S. This is
// Lustre's RAID-0 object layout: a small file touches only slot 0, a large
// one all N chains.
//
// A progressive layout (PFL, ADR 0021) is a list of components, each with
// its own stripe size and count over its own file range: component i
// covers [End of i-1, End of i) (the last to the end of the file) and owns
// the slots after those of the components before it; inside its range it
// stripes as above, its offsets counted from the range's start.
package placement

import (
	"fmt"

	"github.com/sluice-fs/sluice/internal/errs"
)

const (
	// MinStripeSize and MaxStripeSize bound a layout's stripe size, which
	// must also be a multiple of MinStripeSize.
	MinStripeSize = 64 << 10
	MaxStripeSize = 1 << 30
	// MaxStripeCount bounds a layout's stripe count (a progressive
	// layout's: all its components' together).
	MaxStripeCount = 256
	// MaxComps bounds the components of a progressive layout.
	MaxComps = 8
	// DefaultStripeSize is the stripe size of a file whose directory sets none.
	DefaultStripeSize = 1 << 20
)

// TargetID names a storage target cluster-wide.
type TargetID uint32

// Layout says how a file's bytes are spread over chains. A directory's
// default layout has StripeSize, StripeCount and Replicas and no Chains; a
// file's layout has len(Chains) == StripeCount. StripeCount 0 in a
// directory means "all chains, up to DefaultStripeCount". Replicas is the
// number of copies of each chunk (1 to MaxReplicas; 0 means 1): a file's
// chains all have that many replicas.
type Layout struct {
	StripeSize  uint32
	StripeCount uint16
	Replicas    uint8
	Chains      []ChainID
	// Data is the number the file's chunks are stored under (chunk.ID.Ino
	// on the targets); 0 means the inode number. A migration (ADR 0020)
	// writes the file's bytes under a fresh number and switches the
	// layout, so that the old and the new chunks never share a name.
	Data uint64
	// Comps, if not empty (at least 2), make the layout progressive (ADR
	// 0021): StripeSize is then the first component's, and StripeCount,
	// for a file, the number of all components' slots (len(Chains)); for a
	// directory, the first component's.
	Comps []Comp
}

// Comp is one component of a progressive layout.
type Comp struct {
	// End is where the component's file range ends (exclusive; its start
	// is the previous component's End, or 0); 0 in the last component:
	// the end of the file. A multiple of MinStripeSize.
	End         int64
	StripeSize  uint32
	StripeCount uint16 // in a directory, 0: every target (of the pool)
	// Pool is where the component's chains come from ("": the
	// directory's pool, or every target).
	Pool string
}

// Progressive reports whether l has components.
func (l Layout) Progressive() bool { return len(l.Comps) > 0 }

// comp returns the component holding file offset off, its first slot and
// the start of its range. Validate makes the last component open-ended.
func (l Layout) comp(off int64) (c Comp, first int, start int64) {
	for i, c := range l.Comps {
		if c.End == 0 || off < c.End || i == len(l.Comps)-1 {
			return c, first, start
		}
		first += int(c.StripeCount)
		start = c.End
	}
	return Comp{}, 0, 0
}

// compOfSlot returns the component owning slot, its first slot and the
// start of its range.
func (l Layout) compOfSlot(slot int) (c Comp, first int, start int64) {
	for i, c := range l.Comps {
		if slot < first+int(c.StripeCount) || i == len(l.Comps)-1 {
			return c, first, start
		}
		first += int(c.StripeCount)
		start = c.End
	}
	return Comp{}, 0, 0
}

// DataID returns the number the chunks of the file ino are stored under.
func (l Layout) DataID(ino uint64) uint64 {
	if l.Data != 0 {
		return l.Data
	}
	return ino
}

// ReplicaCount returns Replicas, with 0 read as 1.
func (l Layout) ReplicaCount() int { return max(int(l.Replicas), 1) }

// Validate checks the shape of a layout (not whether its targets exist).
func (l Layout) Validate() error {
	if l.Progressive() {
		if err := l.validateComps(); err != nil {
			return err
		}
	}
	if l.StripeSize < MinStripeSize || l.StripeSize > MaxStripeSize || l.StripeSize%MinStripeSize != 0 {
		return errs.New(errs.Invalid, "placement: stripe size %d must be a multiple of %d between %d and %d",
			l.StripeSize, MinStripeSize, MinStripeSize, MaxStripeSize)
	}
	if l.StripeCount > MaxStripeCount {
		return errs.New(errs.Invalid, "placement: stripe count %d is over the limit of %d", l.StripeCount, MaxStripeCount)
	}
	if l.Replicas > MaxReplicas {
		return errs.New(errs.Invalid, "placement: %d replicas is over the limit of %d", l.Replicas, MaxReplicas)
	}
	if len(l.Chains) != 0 && len(l.Chains) != int(l.StripeCount) {
		return errs.New(errs.Invalid, "placement: layout has %d chains for stripe count %d", len(l.Chains), l.StripeCount)
	}
	// A chain holds one slot of a component: components may share chains.
	groups := [][]ChainID{l.Chains}
	if l.Progressive() && len(l.Chains) > 0 {
		groups = nil
		first := 0
		for _, c := range l.Comps {
			groups = append(groups, l.Chains[first:first+int(c.StripeCount)])
			first += int(c.StripeCount)
		}
	}
	for _, g := range groups {
		seen := make(map[ChainID]bool, len(g))
		for _, t := range g {
			if seen[t] {
				return errs.New(errs.Invalid, "placement: chain %d appears twice in a layout", t)
			}
			seen[t] = true
		}
	}
	return nil
}

// validateComps checks a progressive layout's components; with chains (a
// file's layout) every component has its stripe count and they add up to
// the layout's.
func (l Layout) validateComps() error {
	if len(l.Comps) < 2 || len(l.Comps) > MaxComps {
		return errs.New(errs.Invalid, "placement: a progressive layout has 2 to %d components, not %d", MaxComps, len(l.Comps))
	}
	var prev int64
	total := 0
	for i, c := range l.Comps {
		last := i == len(l.Comps)-1
		switch {
		case c.StripeSize < MinStripeSize || c.StripeSize > MaxStripeSize || c.StripeSize%MinStripeSize != 0:
			return errs.New(errs.Invalid, "placement: component %d: stripe size %d must be a multiple of %d between %d and %d",
				i+1, c.StripeSize, MinStripeSize, MinStripeSize, MaxStripeSize)
		case c.StripeCount > MaxStripeCount:
			return errs.New(errs.Invalid, "placement: component %d: stripe count %d is over the limit of %d", i+1, c.StripeCount, MaxStripeCount)
		case last && c.End != 0:
			return errs.New(errs.Invalid, "placement: the last component must extend to the end of the file")
		case !last && c.End <= prev:
			return errs.New(errs.Invalid, "placement: component %d ends at %d, not after the previous end %d", i+1, c.End, prev)
		case !last && c.End%MinStripeSize != 0:
			return errs.New(errs.Invalid, "placement: component %d ends at %d, not a multiple of %d", i+1, c.End, MinStripeSize)
		case c.Pool != "" && ValidPoolName(c.Pool) != nil:
			return errs.New(errs.Invalid, "placement: component %d: %v", i+1, ValidPoolName(c.Pool))
		case len(l.Chains) > 0 && c.StripeCount == 0:
			return errs.New(errs.Invalid, "placement: component %d of a file has no stripes", i+1)
		}
		prev = c.End
		total += int(c.StripeCount)
	}
	if total > MaxStripeCount {
		return errs.New(errs.Invalid, "placement: the components have %d stripes, over the limit of %d", total, MaxStripeCount)
	}
	if len(l.Chains) > 0 && (int(l.StripeCount) != total || l.StripeSize != l.Comps[0].StripeSize) {
		return errs.New(errs.Invalid, "placement: a progressive file layout of %d slots has stripe count %d and size %d", total, l.StripeCount, l.StripeSize)
	}
	return nil
}

func (l Layout) String() string {
	s := fmt.Sprintf("stripe_size=%d stripe_count=%d replicas=%d chains=%v", l.StripeSize, l.StripeCount, l.ReplicaCount(), l.Chains)
	if l.Data != 0 {
		s += fmt.Sprintf(" data=%d", l.Data)
	}
	for i, c := range l.Comps {
		end := "eof"
		if c.End != 0 {
			end = fmt.Sprint(c.End)
		}
		s += fmt.Sprintf(" comp%d=%s/%d/%d", i+1, end, c.StripeSize, c.StripeCount)
		if c.Pool != "" {
			s += "/" + c.Pool
		}
	}
	return s
}

// Extent is one contiguous piece of a file range that lives in one chunk.
type Extent struct {
	Slot     int     // index into Layout.Chains; also the chunk's Slot
	Chain    ChainID // Layout.Chains[Slot]
	FileOff  int64   // offset in the file
	ChunkOff int64   // offset inside the chunk
	Len      int64
}

// Locate maps a file offset to its slot and the offset inside that slot's chunk.
func (l Layout) Locate(off int64) (slot int, chunkOff int64) {
	if l.Progressive() {
		c, first, start := l.comp(off)
		slot, chunkOff = stripe(off-start, int64(c.StripeSize), int64(c.StripeCount))
		return first + slot, chunkOff
	}
	return stripe(off, int64(l.StripeSize), int64(l.StripeCount))
}

// SlotStripeSize returns the stripe size of slot's chunk: its component's
// in a progressive layout.
func (l Layout) SlotStripeSize(slot int) uint32 {
	if l.Progressive() {
		c, _, _ := l.compOfSlot(slot)
		return c.StripeSize
	}
	return l.StripeSize
}

// stripe maps offset off of a range striped s bytes at a time over n
// slots to its slot and the offset inside that slot's chunk.
func stripe(off, s, n int64) (int, int64) {
	k := off / s
	return int(k % n), (k/n)*s + off%s
}

// FileOff maps an offset inside slot's chunk back to the file offset it
// holds: the inverse of Locate.
func (l Layout) FileOff(slot int, chunkOff int64) int64 {
	s, n, start := int64(l.StripeSize), int64(l.StripeCount), int64(0)
	if l.Progressive() {
		var c Comp
		var first int
		c, first, start = l.compOfSlot(slot)
		s, n, slot = int64(c.StripeSize), int64(c.StripeCount), slot-first
	}
	m := chunkOff / s // the chunk's m-th stripe is the range's stripe m*n+slot
	return start + (m*n+int64(slot))*s + chunkOff%s
}

// Split cuts the file range [off, off+length) into extents, in file order.
// Consecutive stripes of the same slot are not merged: each extent is at
// most one stripe long.
func (l Layout) Split(off, length int64) []Extent {
	if length <= 0 {
		return nil
	}
	if l.Progressive() {
		var out []Extent
		for length > 0 {
			c, first, start := l.comp(off)
			s := int64(c.StripeSize)
			n := min(s-(off-start)%s, length)
			if c.End != 0 && off < c.End {
				n = min(n, c.End-off)
			}
			slot, coff := stripe(off-start, s, int64(c.StripeCount))
			out = append(out, Extent{Slot: first + slot, Chain: l.Chains[first+slot], FileOff: off, ChunkOff: coff, Len: n})
			off += n
			length -= n
		}
		return out
	}
	s := int64(l.StripeSize)
	out := make([]Extent, 0, length/s+2)
	for length > 0 {
		slot, coff := l.Locate(off)
		n := min(s-off%s, length)
		out = append(out, Extent{Slot: slot, Chain: l.Chains[slot], FileOff: off, ChunkOff: coff, Len: n})
		off += n
		length -= n
	}
	return out
}

// ChunkSize returns how many bytes slot's chunk holds for a file of the
// given size: the chunk's logical length, used to truncate chunks.
func (l Layout) ChunkSize(slot int, fileSize int64) int64 {
	s, n := int64(l.StripeSize), int64(l.StripeCount)
	if l.Progressive() {
		c, first, start := l.compOfSlot(slot)
		// The component's part of the file.
		fileSize = max(fileSize-start, 0)
		if c.End != 0 {
			fileSize = min(fileSize, c.End-start)
		}
		s, n, slot = int64(c.StripeSize), int64(c.StripeCount), slot-first
	}
	full := fileSize / s // complete stripes
	rem := fileSize % s
	size := (full / n) * s
	switch k := full % n; {
	case int64(slot) < k:
		size += s
	case int64(slot) == k:
		size += rem
	}
	return size
}

// TargetInfo is what Choose knows of a target.
type TargetInfo struct {
	ID      TargetID
	Healthy bool
	Free    int64 // bytes
}

// Choose picks count distinct healthy targets with free space for a new
// file (healthy full targets if too few have space: writes then fail with
// errs.NoSpace, not the create), rotating the starting point by seed (the inode number) so that files
// spread evenly. It fails with errs.Invalid if fewer targets exist.
func Choose(targets []TargetInfo, count int, seed uint64) ([]TargetID, error) {
	var ok []TargetID
	for _, t := range targets {
		if t.Healthy && t.Free > 0 {
			ok = append(ok, t.ID)
		}
	}
	if count <= 0 {
		return nil, errs.New(errs.Invalid, "placement: stripe count must be positive, got %d", count)
	}
	if count > len(ok) {
		// Not enough free space: place on healthy full targets too, so
		// that creating a file works and writing to it says ENOSPC.
		var healthy []TargetID
		for _, t := range targets {
			if t.Healthy {
				healthy = append(healthy, t.ID)
			}
		}
		if count <= len(healthy) {
			ok = healthy
		}
	}
	if count > len(ok) {
		if count > len(targets) {
			return nil, errs.New(errs.Invalid, "placement: layout asks for %d targets but only %d exist", count, len(targets))
		}
		return nil, errs.New(errs.NoSpace, "placement: layout asks for %d targets but only %d are healthy with free space", count, len(ok))
	}
	out := make([]TargetID, count)
	start := int(seed % uint64(len(ok)))
	for i := range out {
		out[i] = ok[(start+i)%len(ok)]
	}
	return out, nil
}
