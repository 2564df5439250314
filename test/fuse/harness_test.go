// Package fuse tests the FUSE mount end to end: it builds the real sluice
// binary, starts `sluice serve` and `sluice mount` as separate processes,
// and runs POSIX conformance checks, a randomized model test against a
// local directory, real tools (tar, git, go build, sqlite3, rsync, cp -a)
// and benchmarks on the mount. Every process is stopped by PID and every
// mount removed when its test ends, even on failure.
//
// The tests need root and /dev/fuse; elsewhere they skip with the reason
// (and fail in CI, where CI=true).
// SLUICE_BIN names a prebuilt binary to use instead of building one.
package fuse

import (
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
	"github.com/sluice-fs/sluice/internal/proctest"
)

var (
	binary     string // the sluice binary
	skipReason string // why FUSE tests cannot run here, if they cannot
)

func TestMain(m *testing.M) {
	if code, ok := proctest.ProxyChild(); ok {
		os.Exit(code)
	}
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper())
	}
	if mp := os.Getenv(memFSEnv); mp != "" {
		os.Exit(runMemFS(mp))
	}
	switch {
	case os.Geteuid() != 0:
		skipReason = "FUSE tests need root (they mount with DirectMount and switch users)"
	default:
		if _, err := os.Stat("/dev/fuse"); err != nil {
			skipReason = "FUSE tests need /dev/fuse: " + err.Error()
		}
	}
	cleanup := func() {}
	binary = os.Getenv("SLUICE_BIN")
	if binary == "" && skipReason == "" {
		var err error
		if binary, cleanup, err = proctest.BuildBinary("../.."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	removeHelper()
	if mountDirs != "" {
		os.Remove(mountDirs) // only if empty: never remove through a live mount
	}
	cleanup()
	os.Exit(code)
}

// requireFUSE skips the test where FUSE tests cannot run (it fails it in
// CI, which must run them).
func requireFUSE(t testing.TB) {
	t.Helper()
	if skipReason != "" {
		proctest.SkipMissing(t, "%s", skipReason)
	}
}

// server is a running `sluice serve` process.
type server struct {
	t       testing.TB
	dataDir string
	addr    string
	proc    *proctest.Proc
	cmd     *exec.Cmd // proc.Cmd, for signals
}

var readyLine = regexp.MustCompile(`serving on (\S+)`)

// startServer runs `sluice serve` on dataDir (a new temp dir if empty),
// listening on listen (127.0.0.1:0 if empty), and waits until it is ready.
func startServer(t testing.TB, dataDir, listen string) *server {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	p, addr := proctest.Start(t, binary, nil, readyLine, "serve", "--data-dir", dataDir, "--listen", listen, "--http", "")
	return &server{t: t, dataDir: dataDir, addr: addr, proc: p, cmd: p.Cmd}
}

// kill stops the server with SIGKILL (by PID) and waits for it.
func (s *server) kill() { s.proc.Kill() }

// client connects the client library to the server.
func (s *server) client() *client.Client {
	s.t.Helper()
	return proctest.Client(s.t, s.addr)
}

// mount is a running `sluice mount` process and its mountpoint.
type mount struct {
	t      testing.TB
	dir    string // the mountpoint
	cmd    *exec.Cmd
	exited chan struct{}
	logs   *syncBuffer
}

// mountDirs is a directory every user can traverse, holding mountpoints.
var (
	mountDirsOnce sync.Once
	mountDirs     string
)

func newMountpoint(t testing.TB) string {
	t.Helper()
	mountDirsOnce.Do(func() {
		d, err := os.MkdirTemp("", "sluice-fuse-mnt")
		if err == nil {
			os.Chmod(d, 0o755)
			mountDirs = d
		}
	})
	if mountDirs == "" {
		t.Fatal("cannot create a directory for mountpoints")
	}
	d, err := os.MkdirTemp(mountDirs, "m")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.Remove(d) })
	return d
}

// startMount runs `sluice mount --server ADDR [args] MOUNTPOINT` in the
// foreground as its own process and waits until the file system is there.
func startMount(t testing.TB, addr string, args ...string) *mount {
	t.Helper()
	mp := newMountpoint(t)
	return startMountAt(t, addr, mp, args...)
}

func startMountAt(t testing.TB, addr, mp string, args ...string) *mount {
	t.Helper()
	all := append([]string{"mount", "--server", addr}, args...)
	// SLUICE_FUSE_MOUNT_ARGS adds flags to every mount, e.g. to debug.
	all = append(all, strings.Fields(os.Getenv("SLUICE_FUSE_MOUNT_ARGS"))...)
	all = append(all, mp)
	cmd := exec.Command(binary, all...)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &mount{t: t, dir: mp, cmd: cmd, exited: make(chan struct{}), logs: logs}
	go func() {
		cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(m.cleanup)
	deadline := time.Now().Add(30 * time.Second)
	for !isMounted(mp) {
		select {
		case <-m.exited:
			t.Fatalf("sluice mount exited before mounting: %s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice mount did not mount in 30s: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return m
}

// path returns the path of a name on the mount.
func (m *mount) path(elem ...string) string {
	return filepath.Join(append([]string{m.dir}, elem...)...)
}

// stop sends SIGTERM and expects a clean exit and no mount left.
func (m *mount) stop() {
	m.t.Helper()
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(30 * time.Second):
		m.t.Fatalf("sluice mount did not exit within 30s of SIGTERM: %s", m.logs.String())
	}
	if code := m.cmd.ProcessState.ExitCode(); code != 0 {
		m.t.Errorf("sluice mount exited with %d after SIGTERM: %s", code, m.logs.String())
	}
	if isMounted(m.dir) {
		m.t.Errorf("%s is still mounted after the mount process exited", m.dir)
	}
}

// kill stops the mount process with SIGKILL, leaving a dead mount.
func (m *mount) kill() {
	select {
	case <-m.exited:
		return
	default:
	}
	m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.exited
}

// cleanup ends the process and removes the mount whatever state they are in.
func (m *mount) cleanup() {
	select {
	case <-m.exited:
	default:
		m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(20 * time.Second):
			m.kill()
		}
	}
	for i := 0; isMounted(m.dir) && i < 50; i++ {
		syscall.Unmount(m.dir, syscall.MNT_DETACH)
		time.Sleep(20 * time.Millisecond)
	}
}

// isMounted reports whether a FUSE file system is mounted exactly at dir.
func isMounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMount(f[4]) == dir && strings.Contains(line, "fuse.sluice") {
			return true
		}
	}
	return false
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// run runs a command in dir, failing the test on error.
func run(t testing.TB, dir string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(dir, nil, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func runErr(dir string, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// syncBuffer is a bytes.Buffer safe for concurrent writers and readers.
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
