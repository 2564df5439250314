package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// makeTree writes a local tree of files of mixed sizes and returns the
// SHA-256 of each file by relative path.
func makeTree(t *testing.T, root string, seed uint64) map[string]string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	sizes := []int{0, 1, 4095, 4096, 65535, 65536, 65537, 1 << 20, 1<<20 + 3, 5<<20 + 7, 20 << 20}
	sums := make(map[string]string)
	for i, n := range sizes {
		dir := filepath.Join(root, []string{"", "a", "a/b", "c"}[i%4])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(rng.UintN(256))
		}
		p := filepath.Join(dir, "file"+string(rune('0'+i%10))+strings.Repeat("x", i)+".bin")
		if err := os.WriteFile(p, data, 0o640); err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		sum := sha256.Sum256(data)
		sums[rel] = hex.EncodeToString(sum[:])
	}
	return sums
}

// hashTree returns the SHA-256 of each regular file below root.
func hashTree(t *testing.T, root string) map[string]string {
	t.Helper()
	sums := make(map[string]string)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		sum := sha256.Sum256(data)
		sums[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

func sameSums(t *testing.T, want, got map[string]string) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("tree has %d files, want %d", len(got), len(want))
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: checksum %q, want %q", p, got[p], w)
		}
	}
}

// TestCLICopyTreeRoundTrip copies a tree of mixed sizes into Sluice, from
// Sluice to Sluice and back out, and compares checksums.
func TestCLICopyTreeRoundTrip(t *testing.T) {
	s := startServer(t, "")
	src := filepath.Join(t.TempDir(), "src")
	want := makeTree(t, src, 1)

	s.mustCLI("mkdir", "-p", "/data/in")
	s.mustCLI("cp", "-r", src, "sluice:/data/in/")
	s.mustCLI("cp", "-r", "sluice:/data/in/src", "sluice:/data/copy")
	out := filepath.Join(t.TempDir(), "out")
	s.mustCLI("cp", "-r", "sluice:/data/copy", out)
	sameSums(t, want, hashTree(t, out))

	// Single-file copies, into a directory and to a new name.
	one := filepath.Join(t.TempDir(), "one")
	os.Mkdir(one, 0o755)
	s.mustCLI("cp", "sluice:/data/in/src/c/file3xxx.bin", one)
	s.mustCLI("cp", "sluice:/data/in/src/c/file3xxx.bin", filepath.Join(one, "renamed"))
	a, _ := os.ReadFile(filepath.Join(one, "file3xxx.bin"))
	b, _ := os.ReadFile(filepath.Join(one, "renamed"))
	orig, _ := os.ReadFile(filepath.Join(src, "c/file3xxx.bin"))
	if len(orig) == 0 || string(a) != string(orig) || string(b) != string(orig) {
		t.Fatalf("single-file copies differ from the original (%d, %d, %d bytes)", len(a), len(b), len(orig))
	}

	ls := s.mustCLI("ls", "/data/in/src")
	for _, name := range []string{"a", "c", "file0.bin", "file4xxxx.bin", "file8xxxxxxxx.bin"} {
		if !strings.Contains(ls, name+"\n") {
			t.Errorf("ls output lacks %q:\n%s", name, ls)
		}
	}
	long := s.mustCLI("ls", "-l", "/data/in/src")
	if !strings.Contains(long, "-rw-r-----") || !strings.Contains(long, "drwx") {
		t.Errorf("ls -l does not show modes:\n%s", long)
	}
	st := s.mustCLI("stat", "/data/in/src/file0.bin")
	if !strings.Contains(st, "Size: 0") || !strings.Contains(st, "stripe_size=") {
		t.Errorf("stat output:\n%s", st)
	}
	if got := s.mustCLI("cat", "/data/in/src/a/file1x.bin"); len(got) != 1 {
		t.Errorf("cat of a 1-byte file printed %d bytes", len(got))
	}
}

func TestCLINamespaceCommands(t *testing.T) {
	s := startServer(t, "")
	local := filepath.Join(t.TempDir(), "f")
	os.WriteFile(local, []byte("hello sluice\n"), 0o644)

	s.mustCLI("mkdir", "/d")
	s.mustCLI("cp", local, "sluice:/d/f")
	s.mustCLI("mv", "/d/f", "/d/g")
	s.failCLI("not found", "stat", "/d/f")
	s.mustCLI("ln", "/d/g", "/d/hard")
	s.mustCLI("ln", "-s", "/d/g", "/d/soft")
	if got := s.mustCLI("cat", "/d/soft"); got != "hello sluice\n" {
		t.Errorf("cat through a symlink: %q", got)
	}
	if st := s.mustCLI("stat", "/d/g"); !strings.Contains(st, "Links: 2") {
		t.Errorf("hard link count not 2:\n%s", st)
	}
	s.mustCLI("mkdir", "/e")
	s.mustCLI("mv", "/d/hard", "/e") // into an existing directory
	if got := s.mustCLI("cat", "/e/hard"); got != "hello sluice\n" {
		t.Errorf("moved hard link: %q", got)
	}
	s.failCLI("is a directory", "rm", "/d")
	s.mustCLI("rm", "-r", "/d")
	s.failCLI("not found", "ls", "/d")
	s.mustCLI("rm", "/e/hard")
	s.failCLI("not found", "cat", "/nope")
	s.failCLI("exists", "mkdir", "/e")
	s.failCLI("name too long", "mkdir", "/"+strings.Repeat("n", 256))
	s.mustCLI("mkdir", "/"+strings.Repeat("n", 255))
	s.failCLI("refusing", "rm", "-r", "/")
	if r := s.cli("mv", "only-one-arg"); r.code != 2 {
		t.Errorf("usage error exit code %d, want 2 (%s)", r.code, r.stderr)
	}
}

func TestCLILayout(t *testing.T) {
	s := startServer(t, "")
	s.mustCLI("mkdir", "/wide", "/narrow")
	s.mustCLI("layout", "set", "/wide", "--stripe-count", "4", "--stripe-size", "256K")
	s.mustCLI("layout", "set", "/narrow", "--stripe-count", "1")
	if got := s.mustCLI("layout", "get", "/wide"); !strings.Contains(got, "stripe_size=262144 stripe_count=4") {
		t.Errorf("layout get /wide: %q", got)
	}
	local := filepath.Join(t.TempDir(), "big")
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	os.WriteFile(local, data, 0o644)
	s.mustCLI("cp", local, "sluice:/wide/big")
	s.mustCLI("cp", local, "sluice:/narrow/big")
	wide := s.mustCLI("layout", "get", "/wide/big")
	if !strings.Contains(wide, "stripe_count=4") || strings.Count(wide, " ") < 4 {
		t.Errorf("file in /wide: %q", wide)
	}
	if got := s.mustCLI("layout", "get", "/narrow/big"); !strings.Contains(got, "stripe_count=1 ") {
		t.Errorf("file in /narrow: %q", got)
	}
	back := filepath.Join(t.TempDir(), "back")
	s.mustCLI("cp", "sluice:/wide/big", back)
	if got, _ := os.ReadFile(back); string(got) != string(data) {
		t.Fatal("striped file does not read back equal")
	}
	s.failCLI("targets", "layout", "set", "/wide", "--stripe-count", "99")
	s.failCLI("stripe size", "layout", "set", "/wide", "--stripe-size", "1000")
	s.failCLI("invalid size", "layout", "set", "/wide", "--stripe-size", "lots")
}

// TestCLICPUProfile: SLUICE_CPUPROFILE makes a command write a CPU profile
// (gzip-compressed pprof) of its run, and a path it cannot create fails
// the command before it does anything, naming the variable.
func TestCLICPUProfile(t *testing.T) {
	s := startServer(t, "")
	prof := filepath.Join(t.TempDir(), "cp.prof")
	src := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(src, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(profPath string, args ...string) ([]byte, error) {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), "SLUICE_SERVER="+s.addr, "SLUICE_CPUPROFILE="+profPath)
		return cmd.CombinedOutput()
	}
	if out, err := run(prof, "cp", src, "sluice:/f"); err != nil {
		t.Fatalf("sluice cp with a profile: %v: %s", err, out)
	}
	b, err := os.ReadFile(prof)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile: %d bytes, %v; want a gzip-compressed pprof", len(b), err)
	}
	out, err := run(filepath.Join(t.TempDir(), "no", "such", "dir", "p"), "cp", src, "sluice:/g")
	if err == nil || !strings.Contains(string(out), "SLUICE_CPUPROFILE") {
		t.Fatalf("unwritable profile path: %v: %s; want a failure naming the variable", err, out)
	}
	if r := s.cli("stat", "/g"); r.code == 0 {
		t.Errorf("the command ran although its profile could not be written")
	}
}
