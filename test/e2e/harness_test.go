// Package e2e runs the real sluice binary: it builds it once, starts
// `sluice serve` as a separate process on loopback, and talks to it with the
// CLI and the client library. Every process is stopped by PID when its test
// ends, even on failure.
package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

var binary string // path of the sluice binary built by TestMain

func TestMain(m *testing.M) { os.Exit(proctest.Main(m, &binary)) }

// server is a running `sluice serve` process.
type server struct {
	t       testing.TB
	dataDir string
	addr    string
	proc    *proctest.Proc
}

var readyLine = regexp.MustCompile(`serving on (\S+)`)

// startServer runs `sluice serve` on dataDir (a new temp dir if empty) and
// waits until it prints its address.
func startServer(t testing.TB, dataDir string, extra ...string) *server {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	args := append([]string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0"}, extra...)
	p, addr := proctest.Start(t, binary, nil, readyLine, args...)
	return &server{t: t, dataDir: dataDir, addr: addr, proc: p}
}

// kill stops the process with SIGKILL (by PID) and waits for it.
func (s *server) kill() { s.proc.Kill() }

// stop asks the server to shut down with SIGTERM and waits for a clean exit.
func (s *server) stop() {
	s.t.Helper()
	if err := s.proc.Stop(30 * time.Second); err != nil {
		s.t.Fatalf("sluice serve: %v", err)
	}
}

// client connects the client library to the server.
func (s *server) client() *client.Client {
	s.t.Helper()
	return proctest.Client(s.t, s.addr)
}

type result struct {
	stdout, stderr string
	code           int
}

// cli runs `sluice ARGS...` against the server.
func (s *server) cli(args ...string) result {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "SLUICE_SERVER="+s.addr)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else {
			s.t.Fatalf("sluice %s: %v", strings.Join(args, " "), err)
		}
	}
	return r
}

// mustCLI runs the CLI and fails the test on a non-zero exit.
func (s *server) mustCLI(args ...string) string {
	s.t.Helper()
	r := s.cli(args...)
	if r.code != 0 {
		s.t.Fatalf("sluice %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// failCLI runs the CLI, expects a failure with a one-line message that
// contains want, and returns the message.
func (s *server) failCLI(want string, args ...string) string {
	s.t.Helper()
	r := s.cli(args...)
	if r.code == 0 {
		s.t.Fatalf("sluice %s succeeded, want an error containing %q", strings.Join(args, " "), want)
	}
	msg := strings.TrimRight(r.stderr, "\n")
	if strings.Contains(msg, "\n") {
		s.t.Errorf("sluice %s: error is not one line: %q", strings.Join(args, " "), msg)
	}
	if !strings.Contains(strings.ToLower(msg), strings.ToLower(want)) {
		s.t.Errorf("sluice %s: error %q does not contain %q", strings.Join(args, " "), msg, want)
	}
	return msg
}
