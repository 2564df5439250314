// Package python runs the Python package (python/sluice) against a real
// `sluice serve`: it builds the sluice binary and libsluice (the client
// library as a C shared library) once, starts a server per test and runs
// the Python tests in python/tests with Debian's /usr/bin/python3, which
// needs python3-torch, python3-numpy and python3-fsspec (.ci/run installs
// them; elsewhere the tests skip without them).
package python

import (
	"archive/zip"
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// python is Debian's interpreter, by path: a python3 earlier on PATH (a
// pyenv one) lacks Debian's torch.
const python = "/usr/bin/python3"

var (
	binary  string // the sluice binary
	libPath string // _libsluice.so
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	bin, cleanup, err := proctest.BuildBinary("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	binary = bin
	lib, cleanupLib, err := buildLib("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanupLib()
	libPath = lib
	return m.Run()
}

// buildLib builds cmd/libsluice as a C shared library into a temporary
// directory, or returns $SLUICE_LIB if set.
func buildLib(moduleRoot string) (string, func(), error) {
	if p := os.Getenv("SLUICE_LIB"); p != "" {
		return p, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "libsluice")
	if err != nil {
		return "", nil, err
	}
	p := filepath.Join(dir, "_libsluice.so")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", p, "./cmd/libsluice")
	build.Dir = moduleRoot
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building libsluice: %w", err)
	}
	return p, func() { os.RemoveAll(dir) }, nil
}

// needPython skips the test (fails it in CI) without Debian's python3 and
// the packages the tests import.
func needPython(t *testing.T) {
	t.Helper()
	proctest.NeedTool(t, python)
	if out, err := exec.Command(python, "-c", "import torch, numpy, fsspec").CombinedOutput(); err != nil {
		proctest.SkipMissing(t, "%s lacks python3-torch, python3-numpy or python3-fsspec: %v: %s", python, err, out)
	}
}

var readyLine = regexp.MustCompile(`serving on (\S+)`)

// serve starts `sluice serve` and returns its process and address.
func serve(t *testing.T, extra ...string) (*proctest.Proc, string) {
	t.Helper()
	args := append([]string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", ""}, extra...)
	return proctest.Start(t, binary, nil, readyLine, args...)
}

func testsDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.Abs("../../python/tests")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func pythonCmd(ctx context.Context, t testing.TB, addr string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Dir = testsDir(t)
	cmd.Env = append(os.Environ(), "SLUICE_SERVER="+addr, "SLUICE_LIB="+libPath,
		"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "PYTHONPATH=")
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// unittest runs python3 -m unittest on a module of python/tests against
// the server at addr (with env added) and fails the test with its output if any fails.
func unittest(t *testing.T, addr, module string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := pythonCmd(ctx, t, addr, "-m", "unittest", "-v", module)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest %s: %v\n%s", module, err, out)
	}
	t.Logf("python3 -m unittest %s:\n%s", module, lastLines(string(out), 40))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// TestClient: files, buffers, errors, batches, file sets, the GIL, fork.
func TestClient(t *testing.T) {
	needPython(t)
	_, addr := serve(t)
	unittest(t, addr, "test_client")
}

// TestFsspec: the sluice:// file system.
func TestFsspec(t *testing.T) {
	needPython(t)
	_, addr := serve(t)
	unittest(t, addr, "test_fsspec")
}

// TestKV: the KV-cache store from Python (sluice.KVStore).
func TestKV(t *testing.T) {
	needPython(t)
	_, addr := serve(t)
	unittest(t, addr, "test_kv")
}

// TestAsyncFsspec: the asynchronous fsspec file system (sluice.asyncfs).
func TestAsyncFsspec(t *testing.T) {
	needPython(t)
	_, addr := serve(t)
	unittest(t, addr, "test_asyncfs")
}

// TestTorch: DataLoaders over files and tar shards with 0, 2 and 4
// workers, save/load and distributed checkpoints.
func TestTorch(t *testing.T) {
	needPython(t)
	_, addr := serve(t)
	unittest(t, addr, "test_torch")
}

// TestServerKilledDuringEpoch kills the server (SIGKILL) in the middle of a
// DataLoader epoch: the epoch must end with an OSError within the client's
// timeout, with and without worker processes, never hang.
func TestServerKilledDuringEpoch(t *testing.T) {
	needPython(t)
	for _, workers := range []string{"0", "2"} {
		t.Run("workers="+workers, func(t *testing.T) {
			p, addr := serve(t)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := pythonCmd(ctx, t, addr, "kill_during_epoch.py", workers)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stdout)
			var out []string
			for sc.Scan() {
				out = append(out, sc.Text())
				if sc.Text() == "READY" {
					p.Kill()
					io.WriteString(stdin, "killed\n")
				}
			}
			err = cmd.Wait()
			log := strings.Join(out, "\n") + "\n" + lastLines(stderr.String(), 30)
			if err != nil {
				t.Fatalf("kill_during_epoch.py %s: %v\n%s", workers, err, log)
			}
			if !strings.Contains(log, "RAISED") {
				t.Fatalf("no error reported:\n%s", log)
			}
			t.Logf("%s", strings.Join(out, "\n"))
		})
	}
}

// TestWheel builds the wheel as `make python` does (offline, Debian's
// setuptools and wheel, no build isolation), installs it into a directory
// and uses it from there: fsspec finds "sluice" through the package's entry
// point without sluice being imported first.
func TestWheel(t *testing.T) {
	needPython(t)
	if testing.Short() {
		t.Skip("builds a wheel")
	}
	if out, err := exec.Command(python, "-c", "import setuptools, wheel, pip").CombinedOutput(); err != nil {
		proctest.SkipMissing(t, "%s lacks python3-setuptools, python3-wheel or python3-pip: %v: %s", python, err, out)
	}
	_, addr := serve(t)
	src := t.TempDir()
	copyTree(t, "../../python", src)
	copyFile(t, libPath, filepath.Join(src, "sluice", "_libsluice.so"))
	dist := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--wheel-dir", dist, ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("pip wheel: %v\n%s", err, out)
	}
	wheels, _ := filepath.Glob(filepath.Join(dist, "sluice-*-py3-none-linux_*.whl"))
	if len(wheels) != 1 {
		t.Fatalf("wheels built: %v, want one sluice-*-py3-none-linux_*.whl", wheels)
	}
	zr, err := zip.OpenReader(wheels[0])
	if err != nil {
		t.Fatal(err)
	}
	has := map[string]bool{}
	for _, f := range zr.File {
		has[f.Name] = true
	}
	zr.Close()
	for _, want := range []string{"sluice/_libsluice.so", "sluice/client.py", "sluice/filesystem.py", "sluice/data.py", "sluice/dcp.py"} {
		if !has[want] {
			t.Errorf("the wheel lacks %s", want)
		}
	}
	site := t.TempDir()
	install := exec.CommandContext(ctx, python, "-m", "pip", "install", "--no-deps", "--no-index", "--target", site, wheels[0])
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("pip install: %v\n%s", err, out)
	}
	check := exec.CommandContext(ctx, python, "-c", `
import sys, fsspec
fs = fsspec.filesystem("sluice", server=sys.argv[1])
fs.pipe_file("/wheel", b"from the wheel")
assert fs.cat("/wheel") == b"from the wheel"
import sluice
assert sluice.__file__.startswith(sys.argv[2]), sluice.__file__
print("ok", type(fs).__module__)
`, addr, site)
	check.Dir = t.TempDir()
	check.Env = append(os.Environ(), "PYTHONPATH="+site, "PYTHONDONTWRITEBYTECODE=1", "SLUICE_LIB=")
	if out, err := check.CombinedOutput(); err != nil || !strings.Contains(string(out), "ok sluice.filesystem") {
		t.Fatalf("using the installed wheel: %v\n%s", err, out)
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			switch {
			case rel == ".":
			case d.Name() == "build", d.Name() == "dist", d.Name() == "__pycache__", d.Name() == "tests",
				strings.HasSuffix(d.Name(), ".egg-info"):
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if strings.HasSuffix(p, ".so") {
			return nil
		}
		copyFile(t, p, filepath.Join(to, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
