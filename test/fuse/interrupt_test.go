package fuse

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterrupt stops the server (SIGSTOP), lets a program block on a
// lookup through the mount, and sends it SIGINT, as Ctrl-C does: the
// kernel interrupts the request, and the mount must answer it at once,
// not after its 5-minute operation timeout. The program must be gone while
// the server is still stopped, and the mount must work again once the
// server continues.
func TestInterrupt(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "")
	m := startMount(t, s.addr, "--op-timeout", "5m")
	if err := os.WriteFile(m.path("present"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.proc.Pause(t)
	stopped := true
	cont := func() {
		if stopped {
			s.cmd.Process.Signal(syscall.SIGCONT)
			stopped = false
		}
	}
	t.Cleanup(cont)

	cmd := exec.Command("cat", m.path("never-looked-up"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	// Wait until cat is blocked in the FUSE request (its wait channel
	// names the FUSE request wait), or at most 10 s.
	wchan := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/wchan"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(wchan); strings.Contains(string(b), "request_wait_answer") || strings.Contains(string(b), "fuse") {
			break
		}
	}
	select {
	case err := <-exited:
		t.Fatalf("cat exited before it was interrupted, with the server stopped: %v", err)
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err == nil {
			t.Fatal("cat succeeded on a name that does not exist")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("cat still blocked 60 s after SIGINT: the mount did not answer the interrupt")
	}
	if !stopped {
		t.Fatal("the server was continued before cat exited")
	}
	cont()
	if b, err := os.ReadFile(m.path("present")); err != nil || string(b) != "x" {
		t.Fatalf("after the server continued: %q, %v", b, err)
	}
	m.stop()
}
