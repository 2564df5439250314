package fuse

import (
	"archive/tar"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchTar measures what issue 13 asks of a source-tree-like workload:
// `tar -x` of a tarball of 20,000 files (a tree of directories, files of 0
// to 16 KiB, like a source tree) and `rm -rf` of the result, with GNU tar
// and rm, through `sluice serve --mount` beside a local ext4 directory and
// the in-memory FUSE floor (floor_test.go) in the same run, as times and
// ratios. The extracted tree is compared with the tarball's file list and
// sizes. It runs only with SLUICE_FUSE_BENCH=1:
//
//	SLUICE_FUSE_BENCH=1 go test -run TestBenchTar -v -timeout 1h ./test/fuse
//
// SLUICE_FUSE_BENCH_FILES sets the number of files (default 20000),
// SLUICE_FUSE_BENCH_ROUNDS the rounds (default 1; medians are shown),
// SLUICE_FUSE_BENCH_BASE another sluice binary run beside as "before",
// SLUICE_FUSE_BENCH_TAR_MEAN the files' mean size in bytes (default 3000;
// sizes are capped at 8 times the mean, at least 16 KiB: a larger mean
// puts most files' data on the targets instead of inline).
func TestBenchTar(t *testing.T) {
	requireFUSE(t)
	if os.Getenv("SLUICE_FUSE_BENCH") == "" {
		t.Skip("set SLUICE_FUSE_BENCH=1 to run the benchmarks")
	}
	if _, err := exec.LookPath("tar"); err != nil {
		t.Fatal("tar is needed: apt-get install tar")
	}
	n := envInt(t, "SLUICE_FUSE_BENCH_FILES", 20000)
	rounds := envInt(t, "SLUICE_FUSE_BENCH_ROUNDS", 1)
	mean := envInt(t, "SLUICE_FUSE_BENCH_TAR_MEAN", 3000)

	// The tarball: 20 top directories of 10 subdirectories each, files
	// spread over them, sizes skewed small.
	ball := filepath.Join(t.TempDir(), "tree.tar")
	f, err := os.Create(ball)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	rng := rand.New(rand.NewPCG(13, 13))
	buf := make([]byte, max(16<<10, 8*mean))
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	now := time.Now().Truncate(time.Second) // as the archive keeps it
	var total int64
	for d := range 20 {
		for s := range 10 {
			dir := fmt.Sprintf("src/d%02d/s%d/", d, s)
			if s == 0 {
				must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: fmt.Sprintf("src/d%02d/", d), Mode: 0o755, ModTime: now}))
			}
			must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: now}))
		}
	}
	for i := range n {
		size := int64(rng.ExpFloat64() * float64(mean))
		size = min(size, int64(len(buf)))
		name := fmt.Sprintf("src/d%02d/s%d/f%05d.c", i%20, (i/20)%10, i)
		must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: now}))
		if _, err := tw.Write(buf[:size]); err != nil {
			t.Fatal(err)
		}
		total += size
	}
	must(t, tw.Close())
	must(t, f.Close())
	t.Logf("tarball: %d files, %d directories, %.1f MiB of data", n, 20*11, float64(total)/(1<<20))

	type root struct{ name, dir string }
	roots := []root{{"local dir", t.TempDir()}}
	_, mp, _, _ := startServeMount(t)
	roots = append(roots, root{"serve --mount", mp})
	if base := os.Getenv("SLUICE_FUSE_BENCH_BASE"); base != "" {
		_, mp, _, _ := startServeMountOf(t, base)
		roots = append(roots, root{"before", mp})
	}
	roots = append(roots, root{"FUSE floor", startMemFS(t)})

	times := map[string][][]float64{"tar -x": make([][]float64, len(roots)), "rm -rf": make([][]float64, len(roots))}
	run := func(dir string, name string, args ...string) float64 {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
		}
		return time.Since(start).Seconds()
	}
	for round := range rounds {
		for k := range roots {
			r := (k + round) % len(roots)
			dir := filepath.Join(roots[r].dir, fmt.Sprint("tar-", round))
			must(t, os.Mkdir(dir, 0o755))
			dropCaches()
			times["tar -x"][r] = append(times["tar -x"][r], run(dir, "tar", "-xf", ball))
			if roots[r].name != "FUSE floor" { // memFS keeps no data
				files, bytes := 0, int64(0)
				must(t, filepath.Walk(filepath.Join(dir, "src"), func(p string, fi os.FileInfo, err error) error {
					if err == nil && fi.Mode().IsRegular() {
						files++
						bytes += fi.Size()
						// tar restored the archive's mode and time (held
						// by the mount until each file's close).
						if fi.Mode().Perm() != 0o644 || fi.ModTime().Unix() != now.Unix() {
							t.Fatalf("%s: %s has mode %v and mtime %v, want 0644 and %v", roots[r].name, p, fi.Mode().Perm(), fi.ModTime(), now)
						}
					}
					return err
				}))
				if files != n || bytes != total {
					t.Fatalf("%s: extracted %d files of %d bytes, want %d of %d", roots[r].name, files, bytes, n, total)
				}
			}
			dropCaches()
			times["rm -rf"][r] = append(times["rm -rf"][r], run(dir, "rm", "-rf", "src"))
			if _, err := os.Stat(filepath.Join(dir, "src")); !os.IsNotExist(err) {
				t.Fatalf("%s: src still there after rm -rf: %v", roots[r].name, err)
			}
			t.Logf("round %d, %s: tar -x %.2f s, rm -rf %.2f s", round, roots[r].name,
				times["tar -x"][r][len(times["tar -x"][r])-1], times["rm -rf"][r][len(times["rm -rf"][r])-1])
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d files, median of %d round(s): seconds, and the local directory's time divided by each (higher is better)\n\n| job    |", n, rounds)
	for _, r := range roots {
		fmt.Fprintf(&b, " %-18s |", r.name)
	}
	b.WriteString("\n|--------|" + strings.Repeat(strings.Repeat("-", 20)+"|", len(roots)) + "\n")
	for _, job := range []string{"tar -x", "rm -rf"} {
		fmt.Fprintf(&b, "| %-6s |", job)
		local := median(times[job][0])
		for i, v := range times[job] {
			if i == 0 {
				fmt.Fprintf(&b, " %18.2f |", local)
				continue
			}
			fmt.Fprintf(&b, " %7.2f (%5.3fx)   |", median(v), local/median(v))
		}
		b.WriteString("\n")
	}
	t.Log(b.String())
}
