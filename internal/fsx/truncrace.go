package fsx

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// TruncRace is one round of a shrinking truncate racing another client's
// synced write past the new size (the truncate race tests, through the
// library and through mounts; ADR 0031): a file of Size bytes, all Old,
// is cut to Cut while Mark is written at At.
type TruncRace struct {
	Size, Cut, At int64
	Old           byte
	Mark          []byte
}

// Order is the order a round's truncate and write took, as the file's
// size after the round shows it.
type Order int

const (
	// WrittenThenCut: the file ends at the cut size.
	WrittenThenCut Order = iota
	// CutThenWritten: the file ends at the write's end.
	CutThenWritten
)

// Check checks what a round left: ended is the file's size after the
// race, got its bytes once grown back to Size (a truncate up, so that
// bytes left in the chunks past the size would show). Either order must
// leave no old byte past the cut and zeros between the cut and the write.
// Written then cut, the file ends at Cut and the write's bytes are gone;
// cut then written, it ends at the write's end with the write's bytes
// there (an acknowledged write is never lost). Any other end is an error.
func (r TruncRace) Check(got []byte, ended int64) (Order, error) {
	end := r.At + int64(len(r.Mark))
	if int64(len(got)) != r.Size {
		return 0, fmt.Errorf("%d bytes after growing to %d", len(got), r.Size)
	}
	if k := bytes.IndexByte(got[r.Cut:], r.Old); k >= 0 {
		return 0, fmt.Errorf("an old byte came back at offset %d past the cut", r.Cut+int64(k))
	}
	if k := bytes.IndexFunc(got[r.Cut:r.At], func(c rune) bool { return c != 0 }); k >= 0 {
		return 0, fmt.Errorf("byte %d, between the cut and the write, is %#x, want 0", r.Cut+int64(k), got[r.Cut+int64(k)])
	}
	region := got[r.At:end]
	switch ended {
	case r.Cut:
		if k := bytes.IndexFunc(region, func(c rune) bool { return c != 0 }); k >= 0 {
			return 0, fmt.Errorf("the file ended at the cut size %d, yet growing it shows byte %#x at %d (a write committed between the cut and the size change)", r.Cut, region[k], r.At+int64(k))
		}
		return WrittenThenCut, nil
	case end:
		for k := range region {
			if region[k] != r.Mark[k] {
				return 0, fmt.Errorf("the file ended at the write's end %d, yet byte %d of the write is %#x: an acknowledged write lost to the truncate", end, r.At+int64(k), region[k])
			}
		}
		return CutThenWritten, nil
	default:
		return 0, fmt.Errorf("the file ended at %d bytes, want %d or %d", ended, r.Cut, end)
	}
}

// TruncRaceRounds returns the rounds a truncate race test runs:
// SLUICE_TRUNCRACE_ROUNDS, or def.
func TruncRaceRounds(def int) (int, error) {
	v := os.Getenv("SLUICE_TRUNCRACE_ROUNDS")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("SLUICE_TRUNCRACE_ROUNDS=%q: want a positive number", v)
	}
	return n, nil
}
