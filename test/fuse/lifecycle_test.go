package fuse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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

// hangLimit tells an operation that waits for a server to come back from
// one that fails on its own: far above the op timeouts the tests set, so
// that a slow machine is not mistaken for a hang.
const hangLimit = 60 * time.Second

// returnsAlone runs op and reports whether it returned within hangLimit,
// and its error; if it did not, op is still running (and returns once what
// it waits for comes back).
func returnsAlone(op func() error) (returned bool, err error) {
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return true, err
	case <-time.After(hangLimit):
		return false, nil
	}
}

// TestServerUnavailable: operations fail on their own (by the op timeout)
// while the server hangs or is gone, rather than waiting for it, and work
// again once it is back. What is checked is the order (the operation
// returns before the server resumes) and the error, not how fast.
func TestServerUnavailable(t *testing.T) {
	requireFUSE(t)
	data, addr := t.TempDir(), freePort(t)
	s := startServer(t, data, addr)
	m := startMount(t, s.addr, "--op-timeout", "2s")
	writeFile(t, m.path("before"), "x")

	// A hung server: the operation times out while the server is still
	// stopped (Pause waits until it is: kill(2) returns before a busy
	// process has stopped, and it could still answer the stat).
	s.proc.Pause(t)
	start := time.Now()
	returned, err := returnsAlone(func() error { _, err := os.Stat(m.path("new-name-1")); return err })
	took := time.Since(start)
	must(t, s.cmd.Process.Signal(syscall.SIGCONT))
	if !returned {
		t.Fatalf("stat while the server is stopped did not return in %v: it waits for the server instead of failing by the 2s op timeout", hangLimit)
	}
	if err == nil || errnoOf(err) == syscall.ENOENT {
		t.Errorf("stat while the server is stopped: %v, want a timeout error", err)
	}
	t.Logf("hung server: %v after %v", err, took)

	// A dead server: operations fail before it is restarted; after a
	// restart they work.
	s.kill()
	start = time.Now()
	returned, err = returnsAlone(func() error { return os.WriteFile(m.path("new-name-2"), []byte("y"), 0o644) })
	if !returned {
		t.Fatalf("create with the server down did not return in %v", hangLimit)
	}
	if err == nil {
		t.Error("create with the server down succeeded")
	}
	t.Logf("dead server: %v after %v", err, time.Since(start))
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
// changes made through the first: at once on open (close-to-open), and
// once its kernel caches of attributes and names expired (checked after
// waiting out their timeouts, never against a deadline).
func TestTwoMounts(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "")
	const cacheTimeout = time.Second
	a := startMount(t, s.addr)
	b := startMount(t, s.addr, "--attr-timeout", cacheTimeout.String(), "--entry-timeout", cacheTimeout.String(),
		"--negative-timeout", cacheTimeout.String())
	// expire waits until what b cached before now has expired.
	expire := func() { time.Sleep(cacheTimeout + 100*time.Millisecond) }
	writeFile(t, a.path("shared"), "version 1")
	if got := readFile(t, b.path("shared")); got != "version 1" {
		t.Errorf("second mount read %q", got)
	}
	// Overwrite with the same size: only the open-time check can tell.
	writeFile(t, a.path("shared"), "version 2")
	if got := readFile(t, b.path("shared")); got != "version 2" {
		t.Errorf("second mount read %q after a same-size overwrite (close-to-open)", got)
	}
	// Growth, at once: the open must drop the size the kernel cached from
	// the previous read (close-to-open), not wait for the attribute
	// timeout. Read without a stat, which would refresh the size anyway
	// (the previous read left the cached atime stale).
	writeFile(t, a.path("shared"), "version 2, longer")
	f, err := os.Open(b.path("shared"))
	must(t, err)
	got, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(got) != "version 2, longer" {
		t.Errorf("second mount read %q, %v right after the file grew (close-to-open)", got, err)
	}
	// Growth, and a new name, once the attribute and entry timeouts passed.
	writeFile(t, a.path("shared"), "version 3, longer still")
	writeFile(t, a.path("new"), "n")
	expire()
	if got, gotNew := readFileOr(b.path("shared")), readFileOr(b.path("new")); got != "version 3, longer still" || gotNew != "n" {
		t.Fatalf("second mount, %v after the changes: shared %q, new %q", cacheTimeout, got, gotNew)
	}
	// A removal, once the entry timeout passed.
	must(t, os.Remove(a.path("new")))
	expire()
	if _, err := os.Stat(b.path("new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("second mount, %v after the removal: stat %v, want ENOENT", cacheTimeout, err)
	}
	a.stop()
	b.stop()
}

// TestTwoMountsGrowth repeats the step of TestTwoMounts that a loaded
// machine broke now and then: one mount makes a file longer, the other,
// whose kernel holds the shorter size, opens it and reads it whole without
// a stat first (close-to-open). The second mount follows the change feed,
// whose invalidations of the file's attributes arrive at any time; one
// that crossed the kernel's GETATTR after the open made the kernel drop
// the new size, and the read stopped at the old end (kernelStamps.fresh).
func TestTwoMountsGrowth(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "")
	a, b := startMount(t, s.addr), startMount(t, s.addr)
	want := "v"
	writeFile(t, a.path("grows"), want)
	for i := range 300 {
		if got := readFile(t, b.path("grows")); got != want {
			t.Fatalf("turn %d: second mount read %q before the change, want %q", i, got, want)
		}
		want += fmt.Sprintf(" %d", i)
		writeFile(t, a.path("grows"), want)
		f, err := os.Open(b.path("grows"))
		must(t, err)
		got, err := io.ReadAll(f)
		f.Close()
		if err != nil || string(got) != want {
			t.Fatalf("turn %d: second mount read %d bytes (%v) right after the file grew to %d (close-to-open)", i, len(got), err, len(want))
		}
	}
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
