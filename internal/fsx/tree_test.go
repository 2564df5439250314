package fsx

import (
	"os"
	"strings"
	"testing"
)

// RunNames and RunTree against a local directory find nothing wrong (the
// models agree with a POSIX file system), and every kind of operation
// runs.
func TestNamesLocalDir(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3} {
		_, c, err := RunNames(DirNames(t.TempDir()), []string{"a", "b", "c", "d", "e"}, seed, 2000)
		if err != nil {
			t.Fatal(err)
		}
		if c.Writes == 0 || c.Renames == 0 || c.Removes == 0 || c.Reads == 0 || c.Stats == 0 || c.Lists == 0 {
			t.Errorf("seed %d: %+v: an operation never ran", seed, c)
		}
	}
}

func TestTreeLocalDir(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3} {
		dir := t.TempDir()
		files, c, err := RunTree(DirNames(dir), seed, 3000)
		if err != nil {
			t.Fatal(err)
		}
		if c.Writes == 0 || c.Renames == 0 || c.DirRenames == 0 || c.Mkdirs == 0 || c.Rmdirs == 0 || c.Removes == 0 || c.Reads == 0 || c.Lists == 0 || c.Links == 0 || c.HardLinks == 0 {
			t.Errorf("seed %d: %+v: an operation never ran", seed, c)
		}
		for p, want := range files {
			if got, err := os.ReadFile(dir + "/" + p); err != nil || string(got) != string(want) {
				t.Fatalf("seed %d: %s: %d bytes, %v; want %d", seed, p, len(got), err, len(want))
			}
		}
	}
}

// A file system that loses directory renames' files is caught.
func TestTreeCatchesLostRename(t *testing.T) {
	t.Parallel()
	_, _, err := RunTree(lossyRenames{DirNames(t.TempDir())}, 1, 3000)
	if err == nil || !strings.Contains(err.Error(), "SLUICE_FSX_SEED=1") {
		t.Fatalf("RunTree over directory renames that lose files: %v; want a failure naming the seed", err)
	}
}

// lossyRenames removes the files of a directory it renames.
type lossyRenames struct{ DirNames }

func (l lossyRenames) Rename(from, to string) error {
	if fi, err := os.Stat(l.p(from)); err == nil && fi.IsDir() {
		ents, _ := os.ReadDir(l.p(from))
		for _, e := range ents {
			os.Remove(l.p(from + "/" + e.Name()))
		}
	}
	return l.DirNames.Rename(from, to)
}
