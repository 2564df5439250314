// Package bench_test runs `sluice bench`, the metrics endpoint and the
// dashboard against real `sluice serve` processes: it builds the binary
// once, starts servers on loopback with an admin port, and stops every
// process by PID when its test ends.
package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-bench-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sluice")
	build := exec.Command("go", "build", "-o", binary, "../../cmd/sluice")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building sluice:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type server struct {
	t      testing.TB
	addr   string // wire
	admin  string // HTTP admin port
	cmd    *exec.Cmd
	exited chan struct{}
	logs   *syncBuffer
}

var (
	readyLine = regexp.MustCompile(`serving on (\S+)`)
	// The admin address: "sluice: admin on ADDR" on stdout, or the log line.
	adminLine = regexp.MustCompile(`admin on (\S+)|msg="admin port" addr=(\S+)`)
)

func startServer(t testing.TB) *server {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--targets", "3")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, exited: make(chan struct{}), logs: logs}
	t.Cleanup(s.kill)
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			logs.Write([]byte(sc.Text() + "\n"))
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addrc <- m[1]
				sent = true
			}
		}
		cmd.Wait()
		close(s.exited)
	}()
	select {
	case s.addr = <-addrc:
	case <-s.exited:
		t.Fatalf("sluice serve exited before it was ready: %s", logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("sluice serve did not get ready in 60s: %s", logs.String())
	}
	for deadline := time.Now().Add(10 * time.Second); s.admin == ""; time.Sleep(20 * time.Millisecond) {
		if m := adminLine.FindStringSubmatch(logs.String()); m != nil {
			s.admin = m[1] + m[2]
		} else if time.Now().After(deadline) {
			t.Fatalf("no admin address in the server's output: %s", logs.String())
		}
	}
	return s
}

func (s *server) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

func (s *server) client() *client.Client {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Options{Server: s.addr})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { c.Close() })
	return c
}

// cli runs `sluice ARGS...` against the server and fails the test on a
// non-zero exit.
func (s *server) cli(args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "SLUICE_SERVER="+s.addr)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("sluice %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
