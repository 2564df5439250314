// Package s3 tests the S3 gateway end to end: it builds the real sluice
// binary, starts `sluice serve --s3` (or `sluice gateway`) as separate
// processes on loopback and talks to them with real S3 clients (awscli,
// boto3, rclone, s3cmd from Debian packages), with a small independent
// SigV4 signer for raw HTTP, and with the client library on the same
// namespace. Every process is stopped by PID when its test ends.
//
// A missing client binary skips the tests that need it, with a message;
// CI installs them all (.ci/run). SLUICE_BINARY runs a prebuilt binary
// instead of building one.
package s3

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

var binary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	path, cleanup, err := proctest.BuildBinary("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	binary = path
	if out, err := exec.Command(binary, "gateway", "--help").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "the sluice binary has no gateway command: %v: %s\n", err, out)
		return 1
	}
	return m.Run()
}

// Test credentials of every gateway the tests start.
const (
	testAK = "SLUICETESTKEY0000001"
	testSK = "sluice-test-secret-key-0123456789abcdefgh"
)

// gateway is a running `sluice serve --s3` process (or a serve process
// plus a `sluice gateway` process).
type gateway struct {
	t        testing.TB
	dataDir  string
	addr     string // the wire address of the file system
	endpoint string // http://127.0.0.1:PORT
	procs    []*proc
}

// proc is one process the test started.
type proc = proctest.Proc

var (
	readyLine   = regexp.MustCompile(`serving on (\S+)`)
	gatewayLine = regexp.MustCompile(`s3 gateway on (\S+)`)
)

// startProc runs the binary and returns once want matched a stdout line.
func startProc(t testing.TB, env []string, want *regexp.Regexp, args ...string) (*proc, string) {
	t.Helper()
	return proctest.Start(t, binary, env, want, args...)
}

// startGateway runs `sluice serve --s3 127.0.0.1:0` with the test
// credentials on a new data dir.
func startGateway(t testing.TB, extra ...string) *gateway {
	t.Helper()
	g := &gateway{t: t, dataDir: t.TempDir()}
	g.start(extra...)
	return g
}

// start runs `sluice serve --s3` on g's data directory (again, after a
// kill) and makes it the gateway g's endpoint and address name. It returns
// the new process.
func (g *gateway) start(extra ...string) *proc {
	g.t.Helper()
	args := append([]string{"serve", "--data-dir", g.dataDir, "--listen", "127.0.0.1:0", "--s3", "127.0.0.1:0",
		"--s3-access-key", testAK, "--s3-secret-key", testSK}, extra...)
	// SLUICE_S3_SERVE_ARGS adds flags, e.g. "--http 127.0.0.1:9401" to
	// profile a benchmark.
	args = append(args, strings.Fields(os.Getenv("SLUICE_S3_SERVE_ARGS"))...)
	p, endpoint := startProc(g.t, nil, gatewayLine, args...)
	g.procs = append(g.procs, p)
	g.endpoint = endpoint
	if m := readyLine.FindStringSubmatch(p.Logs()); m != nil {
		g.addr = m[1]
	} else {
		g.t.Fatalf("no serving line in %s", p.Logs())
	}
	return p
}

// logs returns the logs of every process.
func (g *gateway) logs() string {
	var b strings.Builder
	for _, p := range g.procs {
		b.WriteString(p.Logs())
	}
	return b.String()
}

// alive fails the test if a process has exited.
func (g *gateway) alive() {
	g.t.Helper()
	for _, p := range g.procs {
		select {
		case <-p.Exited():
			g.t.Fatalf("a sluice process exited: %s", p.Logs())
		default:
		}
	}
}

// client connects the client library to the gateway's file system.
func (g *gateway) client() *client.Client {
	g.t.Helper()
	return proctest.Client(g.t, g.addr)
}

// need skips the test if a program is missing.
func need(t testing.TB, prog string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		proctest.SkipMissing(t, "%s is not installed (apt-get install awscli python3-boto3 rclone s3cmd): %v", prog, err)
	}
	return p
}

// clientEnv is an environment for S3 tools that ignores the user's
// configuration and uses the test credentials.
func (g *gateway) clientEnv(t testing.TB) []string {
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") || k == "HOME" || strings.HasPrefix(k, "RCLONE_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "AWS_ACCESS_KEY_ID="+testAK, "AWS_SECRET_ACCESS_KEY="+testSK,
		"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE="+filepath.Join(home, "aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "aws-credentials"), "AWS_PAGER=",
		"S3_ENDPOINT="+g.endpoint)
}

type result struct {
	stdout, stderr string
	code           int
}

// runTool runs a program with env and returns its output.
func runTool(t testing.TB, env []string, stdin []byte, prog string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%s %s: %v", prog, strings.Join(args, " "), err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// mustRun is runTool that fails the test on a non-zero exit.
func mustRun(t testing.TB, env []string, prog string, args ...string) string {
	t.Helper()
	r := runTool(t, env, nil, prog, args...)
	if r.code != 0 {
		t.Fatalf("%s %s: exit %d\nstdout: %s\nstderr: %s", prog, strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// runScript runs a Python script of checks (with py, in env) that prints
// OK at its end, and fails the test with its output and the gateway's
// logs unless it exits 0 having printed OK. what names it in the failure.
// It returns the script's output.
func (g *gateway) runScript(t testing.TB, py, what, script string, env []string) string {
	t.Helper()
	r := runTool(t, env, []byte(script), py, "-")
	if r.code != 0 || !strings.Contains(r.stdout, "OK") {
		t.Fatalf("%s script failed (exit %d):\n%s\n%s\ngateway logs:\n%s", what, r.code, r.stdout, r.stderr, lastLines(g.logs(), 30))
	}
	return r.stdout
}
