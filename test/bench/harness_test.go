// Package bench_test runs `sluice bench`, the metrics endpoint and the
// dashboard against real `sluice serve` processes: it builds the binary
// once, starts servers on loopback with an admin port, and stops every
// process by PID when its test ends.
package bench_test

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

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.Main(m, &binary)) }

type server struct {
	t     testing.TB
	addr  string // wire
	admin string // HTTP admin port
	proc  *proctest.Proc
}

var (
	readyLine = regexp.MustCompile(`serving on (\S+)`)
	adminLine = regexp.MustCompile(`admin on (\S+)`)
)

func startServer(t testing.TB) *server {
	t.Helper()
	p, addr := proctest.Start(t, binary, nil, readyLine,
		"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--targets", "3")
	admin, err := p.WaitLine(adminLine, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return &server{t: t, addr: addr, admin: admin, proc: p}
}

func (s *server) client() *client.Client {
	s.t.Helper()
	return proctest.Client(s.t, s.addr)
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
