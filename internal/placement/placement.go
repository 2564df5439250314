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
	// MaxStripeCount bounds a layout's stripe count.
	MaxStripeCount = 256
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
	seen := make(map[ChainID]bool, len(l.Chains))
	for _, t := range l.Chains {
		if seen[t] {
			return errs.New(errs.Invalid, "placement: chain %d appears twice in a layout", t)
		}
		seen[t] = true
	}
	return nil
}

func (l Layout) String() string {
	s := fmt.Sprintf("stripe_size=%d stripe_count=%d replicas=%d chains=%v", l.StripeSize, l.StripeCount, l.ReplicaCount(), l.Chains)
	if l.Data != 0 {
		s += fmt.Sprintf(" data=%d", l.Data)
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
	s, n := int64(l.StripeSize), int64(l.StripeCount)
	k := off / s
	return int(k % n), (k/n)*s + off%s
}

// FileOff maps an offset inside slot's chunk back to the file offset it
// holds: the inverse of Locate.
func (l Layout) FileOff(slot int, chunkOff int64) int64 {
	s, n := int64(l.StripeSize), int64(l.StripeCount)
	m := chunkOff / s // the chunk's m-th stripe is the file's stripe m*n+slot
	return (m*n+int64(slot))*s + chunkOff%s
}

// Split cuts the file range [off, off+length) into extents, in file order.
// Consecutive stripes of the same slot are not merged: each extent is at
// most one stripe long.
func (l Layout) Split(off, length int64) []Extent {
	if length <= 0 {
		return nil
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
