package tier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMountRead reads released files through a real FUSE mount (`sluice
// mount`, its own process): byte-exact from the tier; EIO after the mount's
// --op-timeout while the backend is stopped, not a hang; success once it
// is back. It needs root and /dev/fuse (in CI it fails without them).
func TestMountRead(t *testing.T) {
	requireFUSE(t)
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "m/")
	c := newClient(t, fs.addr, 0)
	a, b := randomData(11, 5<<20+3), randomData(12, 2<<20)
	if err := writeSluice(ctx, c, "/a", a); err != nil {
		t.Fatal(err)
	}
	if err := writeSluice(ctx, c, "/b", b); err != nil {
		t.Fatal(err)
	}
	fs.mustCLI("hsm", "archive", "/a", "/b")
	fs.mustCLI("hsm", "release", "/a", "/b")

	mp := mountFS(t, fs.addr, "--op-timeout", "2s", "--no-restore-on-read")
	fi, err := os.Stat(filepath.Join(mp, "a"))
	if err != nil || fi.Size() != int64(len(a)) {
		t.Fatalf("stat of released on the mount: %v %v", fi, err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Blocks != 0 {
		t.Errorf("released file has %d blocks; du must count none", st.Blocks)
	}
	got, err := os.ReadFile(filepath.Join(mp, "a"))
	if err != nil || sha256.Sum256(got) != sha256.Sum256(a) {
		t.Fatalf("read of released on the mount: %d bytes, %v", len(got), err)
	}
	be.proc.Pause(t)
	_, err = os.ReadFile(filepath.Join(mp, "b"))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read with the backend stopped: %v; want EIO", err)
	}
	be.proc.Resume()
	got, err = os.ReadFile(filepath.Join(mp, "b"))
	if err != nil || sha256.Sum256(got) != sha256.Sum256(b) {
		t.Fatalf("read after the backend came back: %d bytes, %v", len(got), err)
	}
}

// mountFS runs `sluice mount --server addr [args] MP` as its own process
// and returns the mountpoint once mounted; the test's end stops it
// (SIGTERM, then SIGKILL by PID) and detaches what is left.
func mountFS(t testing.TB, addr string, args ...string) string {
	mp, _ := mountFSProc(t, addr, args...)
	return mp
}

// mountFSProc is mountFS, also returning the mount's process ID.
// SLUICE_TIER_MOUNT_CPUPROFILE names a file the mount writes its CPU
// profile to (a diagnostic for the benchmarks).
func mountFSProc(t testing.TB, addr string, args ...string) (string, int) {
	t.Helper()
	mp := t.TempDir()
	cmd := exec.Command(binary, append(append([]string{"mount", "--server", addr}, args...), mp)...)
	if prof := os.Getenv("SLUICE_TIER_MOUNT_CPUPROFILE"); prof != "" {
		cmd.Env = append(os.Environ(), "SLUICE_CPUPROFILE="+prof)
	}
	var logs syncLog
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		}
		for i := 0; mounted(mp) && i < 50; i++ {
			syscall.Unmount(mp, syscall.MNT_DETACH)
			time.Sleep(20 * time.Millisecond)
		}
	})
	waitFor(t, "mount", func() bool {
		select {
		case <-exited:
			t.Fatalf("sluice mount exited: %s", logs.String())
		default:
		}
		return mounted(mp)
	})
	return mp, cmd.Process.Pid
}

func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir && strings.Contains(line, "fuse.sluice") {
			return true
		}
	}
	return false
}

// TestMountReadImported: files imported from a bucket's listing read
// through a mount byte for byte (their GETs pinned to the objects'
// ETags), and one whose object was replaced in the bucket gives EIO.
func TestMountReadImported(t *testing.T) {
	requireFUSE(t)
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	s3c := be.s3(t)
	x, y := randomData(13, 3<<20+11), randomData(14, 300<<10)
	for k, d := range map[string][]byte{"lake/x": x, "lake/y": y} {
		putObject(t, s3c, k, d)
	}
	fs.mustCLI("tier", "import", "t/lake/", "/lake")
	other := randomData(15, len(y))
	putObject(t, s3c, "lake/y", other)
	mp := mountFS(t, fs.addr, "--op-timeout", "5s", "--no-restore-on-read")
	got, err := os.ReadFile(filepath.Join(mp, "lake", "x"))
	if err != nil || !bytes.Equal(got, x) {
		t.Fatalf("read of an imported file on the mount: %d bytes, %v", len(got), err)
	}
	got, err = os.ReadFile(filepath.Join(mp, "lake", "y"))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read of an imported file whose object was replaced: %d bytes, %v; want EIO", len(got), err)
	}
}
