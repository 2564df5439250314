package fuse

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// freePort returns a loopback address nobody listens on, so that a server
// can be restarted on the same address.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestServerUnavailable: operations fail within the configured bound while
// the server hangs or is gone, and work again once it is back.
func TestServerUnavailable(t *testing.T) {
	requireFUSE(t)
	data, addr := t.TempDir(), freePort(t)
	s := startServer(t, data, addr)
	m := startMount(t, s.addr, "--op-timeout", "2s")
	writeFile(t, m.path("before"), "x")

	// A hung server: the operation times out.
	must(t, s.cmd.Process.Signal(syscall.SIGSTOP))
	start := time.Now()
	_, err := os.Stat(m.path("new-name-1"))
	took := time.Since(start)
	must(t, s.cmd.Process.Signal(syscall.SIGCONT))
	if err == nil || errnoOf(err) == syscall.ENOENT {
		t.Errorf("stat while the server is stopped: %v, want a timeout error", err)
	}
	if took > 6*time.Second {
		t.Errorf("stat while the server is stopped took %v, want about the 2s op timeout", took)
	}
	t.Logf("hung server: %v after %v", err, took)

	// A dead server: operations fail fast; after a restart they work.
	s.kill()
	start = time.Now()
	err = os.WriteFile(m.path("new-name-2"), []byte("y"), 0o644)
	if err == nil {
		t.Error("create with the server down succeeded")
	}
	if took := time.Since(start); took > 6*time.Second {
		t.Errorf("create with the server down took %v", took)
	}
	startServer(t, data, addr)
	deadline := time.Now().Add(20 * time.Second)
	for {
		err = os.WriteFile(m.path("after"), []byte("back"), 0o644)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mount did not reconnect within 20s of the restart: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if readFile(t, m.path("before")) != "x" || readFile(t, m.path("after")) != "back" {
		t.Error("data wrong after reconnecting")
	}
	m.stop()
}

// TestCrashCleanup: a killed mount process leaves a dead mount that
// `sluice umount` removes; the next mount frees the file that the dead
// one had open and unlinked.
func TestCrashCleanup(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "")
	c := s.client()
	m := startMount(t, s.addr)
	p := m.path("open-unlinked")
	f, err := os.Create(p)
	must(t, err)
	f.WriteString("orphan data")
	must(t, f.Sync())
	var st syscall.Stat_t
	must(t, syscall.Fstat(int(f.Fd()), &st))
	must(t, os.Remove(p))
	if n := orphanCount(t, c); n != 1 {
		t.Errorf("orphans while the unlinked file is open: %d, want 1", n)
	}
	m.kill()
	f.Close() // ENOTCONN: the mount is dead
	if !isMounted(m.dir) {
		t.Fatal("the mount vanished with its process; expected a dead mount to clean up")
	}
	if out, err := exec.Command(binary, "umount", m.dir).CombinedOutput(); err != nil {
		t.Fatalf("sluice umount of a dead mount: %v: %s", err, out)
	}
	if isMounted(m.dir) {
		t.Fatal("still mounted after sluice umount")
	}
	m2 := startMountAt(t, s.addr, m.dir)
	if n := orphanCount(t, c); n != 0 {
		t.Errorf("orphans after the next mount: %d, want 0", n)
	}
	ctx, cancel := contextTimeout()
	defer cancel()
	if _, err := c.GetAttrIno(ctx, st.Ino); err == nil {
		t.Errorf("inode %d of the dead mount's unlinked file still exists", st.Ino)
	}
	m2.stop()
}

// TestSIGTERMBusy: SIGTERM unmounts cleanly even while a file is open on
// the mount, after writing its data back.
func TestSIGTERMBusy(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "")
	c := s.client()
	m := startMount(t, s.addr)
	f, err := os.Create(m.path("busy"))
	must(t, err)
	data := bytes.Repeat([]byte("b"), 100000)
	_, err = f.Write(data)
	must(t, err)
	m.stop() // exit code 0 and no mount left, or the test fails
	f.Close()
	ctx, cancel := contextTimeout()
	defer cancel()
	r, err := c.Open(ctx, "/busy")
	must(t, err)
	got := make([]byte, len(data)+1)
	n, _ := r.ReadAt(got, 0)
	r.Close()
	if n != len(data) {
		t.Errorf("after SIGTERM with the file open, %d of %d bytes were written back", n, len(data))
	}
}

// TestBackground: `sluice mount -d` returns once mounted; `sluice umount`
// ends the background process.
func TestBackground(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "")
	mp := newMountpoint(t)
	out, err := exec.Command(binary, "mount", "-d", "--server", s.addr, mp).CombinedOutput()
	if err != nil {
		t.Fatalf("sluice mount -d: %v: %s", err, out)
	}
	mm := regexp.MustCompile(`pid (\d+)`).FindSubmatch(out)
	if mm == nil {
		t.Fatalf("sluice mount -d did not print its pid: %s", out)
	}
	pid, _ := strconv.Atoi(string(mm[1]))
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
		for i := 0; isMounted(mp) && i < 50; i++ {
			syscall.Unmount(mp, syscall.MNT_DETACH)
			time.Sleep(20 * time.Millisecond)
		}
	})
	if !isMounted(mp) {
		t.Fatal("not mounted when sluice mount -d returned")
	}
	writeFile(t, mp+"/f", "background")
	if out, err := exec.Command(binary, "umount", mp).CombinedOutput(); err != nil {
		t.Fatalf("sluice umount: %v: %s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("background mount process %d still running 10s after sluice umount", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if isMounted(mp) {
		t.Error("still mounted")
	}
	// A failing background mount reports why.
	out, err = exec.Command(binary, "mount", "-d", "--server", "127.0.0.1:1", mp).CombinedOutput()
	if err == nil {
		t.Errorf("background mount of an unreachable server succeeded: %s", out)
	}
}

// TestTwoMounts: what a second mount of the same file system sees of
// changes made through the first, and after how long.
func TestTwoMounts(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "")
	a := startMount(t, s.addr)
	b := startMount(t, s.addr)
	writeFile(t, a.path("shared"), "version 1")
	if got := readFile(t, b.path("shared")); got != "version 1" {
		t.Errorf("second mount read %q", got)
	}
	// Overwrite with the same size: only the open-time check can tell.
	writeFile(t, a.path("shared"), "version 2")
	if got := readFile(t, b.path("shared")); got != "version 2" {
		t.Errorf("second mount read %q after a same-size overwrite (close-to-open)", got)
	}
	// Growth, and a new name, within the attribute and entry timeouts.
	writeFile(t, a.path("shared"), "version 3, longer")
	writeFile(t, a.path("new"), "n")
	start := time.Now()
	for readFileOr(b.path("shared")) != "version 3, longer" || readFileOr(b.path("new")) != "n" {
		if time.Since(start) > 3*time.Second {
			t.Fatalf("second mount did not see the changes within 3s: %q %q",
				readFileOr(b.path("shared")), readFileOr(b.path("new")))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("second mount saw growth and a new name after %v", time.Since(start))
	// A removal is seen within the entry timeout.
	must(t, os.Remove(a.path("new")))
	start = time.Now()
	for {
		_, err := os.Stat(b.path("new"))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Since(start) > 3*time.Second {
			t.Fatalf("second mount still sees a removed name after 3s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("second mount saw the removal after %v", time.Since(start))
	a.stop()
	b.stop()
}

func readFileOr(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Sprint("error: ", err)
	}
	return string(b)
}
