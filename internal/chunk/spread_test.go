package chunk

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// skipMissing skips the test for want of something this machine lacks,
// and fails it under CI=true instead, as proctest.SkipMissing does (which
// this package's tests cannot import: proctest imports chunk).
func skipMissing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: .ci/run's machine must have it)", args...)
	}
	t.Skipf(format, args...)
}

func dirFlags(t *testing.T, dir string) (uint32, error) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
}

// TestSpreadDirs checks that a new store marks its directory and chunks/
// for spread placement (spread.go) on a file system that has the flag, and
// that a store whose directories carry it opens again unchanged.
func TestSpreadDirs(t *testing.T) {
	probe := t.TempDir()
	ok, err := spreadSubdirs(probe)
	if err != nil {
		t.Fatalf("spreadSubdirs(%s): %v", probe, err)
	}
	if !ok {
		// The flag is ext2/3/4's; CI's temporary directory is on ext4.
		skipMissing(t, "the file system of %s has no FS_TOPDIR_FL", probe)
	}
	if fl, err := dirFlags(t, probe); err != nil || fl&fsTopdirFL == 0 {
		t.Fatalf("flags of %s after spreadSubdirs: %#x, %v; want FS_TOPDIR_FL set", probe, fl, err)
	}

	dir := filepath.Join(t.TempDir(), "store")
	s := openStore(t, dir)
	for _, d := range []string{dir, filepath.Join(dir, "chunks")} {
		fl, err := dirFlags(t, d)
		if err != nil {
			t.Fatalf("flags of %s: %v", d, err)
		}
		if fl&fsTopdirFL == 0 {
			t.Errorf("%s: flags %#x, want FS_TOPDIR_FL (%#x) set", d, fl, fsTopdirFL)
		}
	}
	// Subdirectories do not inherit the flag: only the two marked
	// directories spread theirs.
	if fl, err := dirFlags(t, filepath.Join(dir, "chunks", "00")); err != nil || fl&fsTopdirFL != 0 {
		t.Errorf("chunks/00: flags %#x, %v; want FS_TOPDIR_FL clear", fl, err)
	}
	id := ID{Ino: 42, Slot: 1}
	want := pattern(1, 3*BlockSize+17)
	mustWrite(t, s, id, 0, want, true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if got, n := mustRead(t, s, id, 0, len(want)+10); n != int64(len(want)) || string(got) != string(want) {
		t.Fatalf("after reopening: read %d bytes, chunk length %d; want the %d bytes written", len(got), n, len(want))
	}
}

// TestSpreadUnsupported: on a file system without the flag (tmpfs)
// spreadSubdirs reports false and no error, and a store opens there as
// anywhere else.
func TestSpreadUnsupported(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		skipMissing(t, "no tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "sluice-spread-")
	if err != nil {
		skipMissing(t, "no directory on /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ok, err := spreadSubdirs(dir)
	if ok || err != nil {
		t.Fatalf("spreadSubdirs on tmpfs = %v, %v; want false, nil", ok, err)
	}
	s := openStore(t, filepath.Join(dir, "store"))
	id := ID{Ino: 7, Slot: 0}
	want := pattern(2, 5000)
	mustWrite(t, s, id, 0, want, true)
	if got, _ := mustRead(t, s, id, 0, len(want)); string(got) != string(want) {
		t.Fatal("a store on tmpfs reads back other bytes than it wrote")
	}
}
