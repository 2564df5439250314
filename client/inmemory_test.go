package client

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fsTypeOf returns the type of the file system mounted where dir is, from
// /proc/mounts (the mount point that is dir's longest prefix).
func fsTypeOf(t *testing.T, dir string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	best, typ := "", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		mp := strings.ReplaceAll(fields[1], `\040`, " ")
		if (dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, typ = mp, fields[2]
		}
	}
	if best == "" {
		t.Fatalf("no mount holds %s", dir)
	}
	return typ
}

// TestInMemory: a staging directory is said to be in memory exactly when
// /proc/mounts says its file system is tmpfs or ramfs; /dev/shm is one.
func TestInMemory(t *testing.T) {
	sawMemory := false
	for _, dir := range []string{t.TempDir(), "/dev/shm", "/"} {
		typ := fsTypeOf(t, dir)
		want := typ == "tmpfs" || typ == "ramfs"
		if got, total := inMemory(dir); got != want || (got != (total > 0)) {
			t.Errorf("%s (%s): inMemory %v (size %d), want %v", dir, typ, got, total, want)
		}
		sawMemory = sawMemory || want
	}
	if !sawMemory {
		t.Fatal("/dev/shm is not a memory file system here: nothing was checked that says yes")
	}
	if got, _ := inMemory(filepath.Join(t.TempDir(), "missing")); got {
		t.Error("a missing directory is said to be in memory")
	}
}

// TestKeepForReuse: drained data files are kept only in memory, only
// while the pool stays under the smaller of poolMax and a quarter of the
// file system.
func TestKeepForReuse(t *testing.T) {
	for _, c := range []struct {
		mem, pooled, size int64
		want              bool
	}{
		{0, 0, 1 << 20, false},                   // on a disk: never
		{8 << 30, 0, 1 << 20, true},              // in memory, room
		{8 << 30, 0, 0, false},                   // nothing to keep
		{8 << 30, 2<<30 - 1<<20, 1 << 20, true},  // exactly a quarter
		{8 << 30, 2<<30 - 1<<20, 2 << 20, false}, // past a quarter
		{1 << 40, poolMax - 1, 1, true},          // poolMax bounds a big file system
		{1 << 40, poolMax, 1, false},
	} {
		if got := keepForReuse(c.mem, c.pooled, c.size); got != c.want {
			t.Errorf("keepForReuse(%d, %d, %d) = %v, want %v", c.mem, c.pooled, c.size, got, c.want)
		}
	}
}

func TestReservePlan(t *testing.T) {
	for _, c := range []struct {
		mem, reserve int64
		n            int
		size         int64
	}{
		{0, 4 << 30, 0, 0},                // on a disk: none
		{24 << 30, 0, 0, 0},               // none asked
		{24 << 30, 4 << 30, 8, 512 << 20}, // an eighth each
		{24 << 30, 32 << 20, 1, 32 << 20}, // under the smallest piece: one file
		{24 << 30, 1<<30 + 1, 8, 128 << 20},
		{24 << 30, 200 << 20, 3, 64 << 20}, // whole pieces only
		{8 << 30, 8 << 30, 8, 256 << 20},   // a quarter of the file system
		{1 << 40, 100 << 30, 8, 2 << 30},   // poolMax, in pieces of at most 2 GiB
	} {
		n, size := reservePlan(c.mem, c.reserve)
		if n != c.n || size != c.size {
			t.Errorf("reservePlan(%d, %d) = %d, %d; want %d, %d", c.mem, c.reserve, n, size, c.n, c.size)
		}
		if n > 0 && !keepForReuse(c.mem, int64(n-1)*size, size) {
			t.Errorf("reservePlan(%d, %d): %d files of %d do not fit the pool", c.mem, c.reserve, n, size)
		}
	}
}
