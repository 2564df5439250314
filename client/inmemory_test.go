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
		if got := inMemory(dir); got != want {
			t.Errorf("%s (%s): inMemory %v, want %v", dir, typ, got, want)
		}
		sawMemory = sawMemory || want
	}
	if !sawMemory {
		t.Fatal("/dev/shm is not a memory file system here: nothing was checked that says yes")
	}
	if inMemory(filepath.Join(t.TempDir(), "missing")) {
		t.Error("a missing directory is said to be in memory")
	}
}
