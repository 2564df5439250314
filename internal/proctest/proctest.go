// Package proctest runs the real sluice binary in tests: it builds the
// binary once per test binary, starts a role (serve, gateway, mount, ...) as
// a separate process, waits until the process prints a line that says it is
// ready, and stops it by PID when the test ends, even when the test fails.
// It is the shared harness of the end-to-end test packages (test/...).
package proctest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// ReadyTimeout bounds how long Start waits for the ready line.
var ReadyTimeout = 60 * time.Second

// BuildBinary builds cmd/sluice (found from the package directory dir,
// usually "../..") into a temporary directory, or returns $SLUICE_BINARY if
// set. Call it from TestMain and call cleanup after m.Run.
func BuildBinary(moduleRoot string) (path string, cleanup func(), err error) {
	if b := os.Getenv("SLUICE_BINARY"); b != "" {
		return b, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "sluice-bin")
	if err != nil {
		return "", nil, err
	}
	path = filepath.Join(dir, "sluice")
	build := exec.Command("go", "build", "-o", path, "./cmd/sluice")
	build.Dir = moduleRoot
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building sluice: %w", err)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// Proc is a running process started by Start.
type Proc struct {
	Cmd    *exec.Cmd
	exited chan struct{}
	logs   syncBuffer

	mu    sync.Mutex
	lines []string // stdout lines so far
	cond  *sync.Cond
}

// Start runs binary with args (env is added to the environment) and waits
// until a stdout line matches ready; it returns the process and the
// regexp's first submatch (e.g. the served address). The process is killed
// by PID when the test ends, and sent SIGTERM if the test process dies
// first.
func Start(tb testing.TB, binary string, env []string, ready *regexp.Regexp, args ...string) (*Proc, string) {
	tb.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	// If the test process dies without its cleanups (a test binary's
	// timeout panics, a kill), the kernel asks the process to stop too
	// (SIGTERM: a server shuts down, a mount unmounts).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proc{Cmd: cmd, exited: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	cmd.Stderr = &p.logs
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Kill)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			p.logs.Write([]byte("stdout: " + line + "\n"))
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.cond.Broadcast()
			p.mu.Unlock()
		}
		cmd.Wait()
		close(p.exited)
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	m, err := p.WaitLine(ready, ReadyTimeout)
	if err != nil {
		tb.Fatalf("sluice %s: %v", strings.Join(args, " "), err)
	}
	return p, m
}

// WaitLine waits until a stdout line (printed so far or later) matches re
// and returns its first submatch (or the whole match).
func (p *Proc) WaitLine(re *regexp.Regexp, timeout time.Duration) (string, error) {
	timer := time.AfterFunc(timeout, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(timeout)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 0; ; {
		for ; i < len(p.lines); i++ {
			if m := re.FindStringSubmatch(p.lines[i]); m != nil {
				return m[len(m)-1], nil
			}
		}
		select {
		case <-p.exited:
			return "", fmt.Errorf("exited before printing a line matching %q: %s", re, p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no line matching %q within %v: %s", re, timeout, p.logs.String())
		}
		p.cond.Wait()
	}
}

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Logs returns what the process printed so far (stderr, and stdout lines
// marked "stdout: ").
func (p *Proc) Logs() string { return p.logs.String() }

// Pause stops the process with SIGSTOP and waits until the kernel reports
// it stopped (state T in /proc/PID/stat): kill(2) returns before every
// thread of a busy process has stopped, and a request sent in between
// could still be answered. Resume continues it.
func (p *Proc) Pause(tb testing.TB) {
	tb.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		tb.Fatal(err)
	}
	stat := fmt.Sprintf("/proc/%d/stat", p.Cmd.Process.Pid)
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(stat)
		if err != nil {
			tb.Fatalf("pause: %v", err)
		}
		// The state follows the command name in parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("pause: process %d not stopped 30 s after SIGSTOP", p.Cmd.Process.Pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Resume continues a process stopped by Pause. Calling it again, or on a
// process that runs or exited, does nothing: a test defers it right after
// Pause, so that it never leaves the process stopped, and may resume
// earlier as well.
func (p *Proc) Resume() { p.Cmd.Process.Signal(syscall.SIGCONT) }

// Kill stops the process with SIGKILL (by PID) and waits for it.
func (p *Proc) Kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop asks the process to shut down with SIGTERM and waits up to timeout
// for it to exit; it returns an error if it had to be killed or exited
// with a non-zero status.
func (p *Proc) Stop(timeout time.Duration) error {
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("did not stop within %v of SIGTERM: %s", timeout, p.Logs())
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("exited with %d after SIGTERM: %s", code, p.Logs())
	}
	return nil
}

// syncBuffer is a bytes.Buffer safe for concurrent writers and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(b)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Main is the body of a TestMain for packages that run the sluice binary:
// it builds the binary into *binary (or takes $SLUICE_BINARY), runs the
// tests, removes the build and returns the exit code for os.Exit. A test
// binary started by StartProxy runs the proxy instead.
func Main(m *testing.M, binary *string) int {
	if code, ok := ProxyChild(); ok {
		return code // a proxy process of StartProxy, not a test run
	}
	path, cleanup, err := BuildBinary("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	*binary = path
	return m.Run()
}

// Client connects the client library to the server at addr, failing the
// test if it cannot within 10 s, and closes it when the test ends.
func Client(tb testing.TB, addr string) *client.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Options{Server: addr})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// WriteFile creates p through c, writes data and closes it. The close
// reports whether the data reached the targets, so its error counts.
func WriteFile(ctx context.Context, c *client.Client, p string, data []byte) error {
	f, err := c.Create(ctx, p)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadFile reads p whole through c.
func ReadFile(ctx context.Context, c *client.Client, p string) ([]byte, error) {
	f, err := c.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// CheckTree checks that c reads exactly files below dir (paths relative
// to dir, to content): each of them with its bytes, and no other file
// (directories may be there).
func CheckTree(ctx context.Context, tb testing.TB, c *client.Client, dir string, files map[string][]byte) {
	tb.Helper()
	seen := 0
	var walk func(d string)
	walk = func(d string) {
		ents, err := c.ReadDirAll(ctx, path.Join(dir, d))
		if err != nil {
			tb.Fatal(err)
		}
		for _, e := range ents {
			p := path.Join(d, e.Name)
			if e.Mode.IsDir() {
				walk(p)
				continue
			}
			if e.Mode&fs.ModeSymlink != 0 {
				continue
			}
			want, ok := files[p]
			got, err := ReadFile(ctx, c, path.Join(dir, p))
			if !ok || err != nil || !bytes.Equal(got, want) {
				tb.Fatalf("%s read by another client: %d bytes, %v; want it: %v (%d bytes)", p, len(got), err, ok, len(want))
			}
			seen++
		}
	}
	walk("")
	if seen != len(files) {
		tb.Fatalf("another client found %d files below %s, want %d", seen, dir, len(files))
	}
}

// WaitProfileClients waits until recording name of the I/O profiler counts
// at least n clients (a client joins at its next check, Options.ProfilePoll).
func WaitProfileClients(tb testing.TB, c *client.Client, name string, n uint32) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := c.Profile(context.Background(), name)
		if err != nil {
			tb.Fatal(err)
		}
		if s.Clients >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("recording %s: %d clients joined in 20 s, want %d", name, s.Clients, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// MemDir returns a new directory in memory (/dev/shm), removed when the
// test ends: a staging directory on a memory file system. It needs a
// /dev/shm of 1 GiB at least (staging keeps up to a quarter of it in
// reused files and a reserve) and says so when there is less.
func MemDir(t testing.TB) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil || int64(st.Blocks)*st.Bsize < 1<<30 {
		t.Fatalf("/dev/shm (%d bytes, %v): these tests need a memory file system of 1 GiB at least there", int64(st.Blocks)*st.Bsize, err)
	}
	d, err := os.MkdirTemp("/dev/shm", "sluice-test-staging-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// MountTmpfs mounts a tmpfs of the given size ("64m") on dir (made if
// missing) and unmounts it when the test ends, reporting a failure to.
// Register it before starting a server that uses dir: cleanups run last
// first, so the server stops before the unmount. Without root (or a
// tmpfs) the test is skipped, and fails under CI=true.
func MountTmpfs(t testing.TB, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipMissing(t, "mounting a tmpfs needs root")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "sluice-test", dir).CombinedOutput(); err != nil {
		SkipMissing(t, "cannot mount a tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}
