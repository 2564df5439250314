package fuse

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestBenchSmallFiles measures what issue 13 sets goals for: create, stat
// and unlink of empty files and write and read of 64 KiB files, with 1 and
// 4 workers in one directory and 4 workers in a directory each, through `sluice serve --mount` beside a local directory in the
// same run, and prints each as a ratio to the local directory; beside them
// memFS (floor_test.go), the floor of what the FUSE requests cost. It runs
// only with SLUICE_FUSE_BENCH=1:
//
//	SLUICE_FUSE_BENCH=1 go test -run TestBenchSmallFiles -v -timeout 1h ./test/fuse
//
// Every job runs on every file system in turn, in an order that rotates
// each round; the table shows the median of the rounds. Stat and read run
// after the kernel's caches were dropped. Settings:
//
//	SLUICE_FUSE_BENCH_FILES   files per job (default 10000)
//	SLUICE_FUSE_BENCH_ROUNDS  rounds (default 1)
//	SLUICE_FUSE_BENCH_BASE    another sluice binary (say, a build of the
//	                          previous commit), run beside as "before"
//	SLUICE_FUSE_BENCH_ARGS    more flags for sluice serve (for example
//	                          "--http 127.0.0.1:9401" to profile it)
//	SLUICE_FUSE_BENCH_ONLY    a regexp: run only the jobs it matches
//	SLUICE_FUSE_BENCH_WORKERS numbers of workers, comma-separated (default
//	                          1,4; each above 1 runs in one directory and
//	                          in a directory per worker)
func TestBenchSmallFiles(t *testing.T) {
	requireFUSE(t)
	if os.Getenv("SLUICE_FUSE_BENCH") == "" {
		t.Skip("set SLUICE_FUSE_BENCH=1 to run the benchmarks")
	}
	n := envInt(t, "SLUICE_FUSE_BENCH_FILES", 10000)
	rounds := envInt(t, "SLUICE_FUSE_BENCH_ROUNDS", 1)
	only := regexp.MustCompile(os.Getenv("SLUICE_FUSE_BENCH_ONLY"))
	args := strings.Fields(os.Getenv("SLUICE_FUSE_BENCH_ARGS"))

	// pid: the process serving the root (0: the kernel, or this one),
	// whose CPU time per operation each job logs.
	type root struct {
		name, dir string
		pid       int
	}
	roots := []root{{"local dir", t.TempDir(), 0}}
	p, mp, _, _ := startServeMount(t, args...)
	roots = append(roots, root{"serve --mount", mp, p.Cmd.Process.Pid})
	if base := os.Getenv("SLUICE_FUSE_BENCH_BASE"); base != "" {
		p, mp, _, _ := startServeMountOf(t, base, args...)
		roots = append(roots, root{"before", mp, p.Cmd.Process.Pid})
	}
	roots = append(roots, root{"FUSE floor", startMemFS(t), 0})

	block := make([]byte, 64<<10)
	for i := range block {
		block[i] = byte(i)
	}
	type job struct {
		name string
		drop bool // drop the caches first
		op   func(path string) error
	}
	jobs := []job{
		{"create empty", false, func(p string) error {
			f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err == nil {
				err = f.Close()
			}
			return err
		}},
		{"stat", true, func(p string) error {
			_, err := os.Stat(p)
			return err
		}},
		{"unlink", false, os.Remove},
		{"write 64 KiB", false, func(p string) error { return os.WriteFile(p, block, 0o644) }},
		{"read 64 KiB", true, func(p string) error {
			b, err := os.ReadFile(p)
			if err == nil && len(b) != len(block) {
				err = fmt.Errorf("read %d bytes of %s, want %d", len(b), p, len(block))
			}
			return err
		}},
	}
	// results[job name with workers][root] holds one figure per round.
	results := map[string][][]float64{}
	var order []string
	type config struct {
		workers int
		dirs    bool // a directory per worker
	}
	var configs []config
	for _, f := range strings.Split(cmp.Or(os.Getenv("SLUICE_FUSE_BENCH_WORKERS"), "1,4"), ",") {
		w, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || w < 1 {
			t.Fatalf("SLUICE_FUSE_BENCH_WORKERS=%q: want numbers of workers, like 1,4", os.Getenv("SLUICE_FUSE_BENCH_WORKERS"))
		}
		configs = append(configs, config{w, false})
		if w > 1 {
			configs = append(configs, config{w, true})
		}
	}
	for round := range rounds {
		for _, cfg := range configs {
			workers := cfg.workers
			for k := range roots {
				r := (k + round) % len(roots)
				dir := filepath.Join(roots[r].dir, fmt.Sprintf("small-%d-%d-%v", round, workers, cfg.dirs))
				must(t, os.Mkdir(dir, 0o755))
				name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("f%05d", i)) }
				suffix := ""
				if cfg.dirs {
					// parallelOps gives worker w the indices i with i%workers == w.
					for w := range workers {
						must(t, os.Mkdir(filepath.Join(dir, fmt.Sprint("w", w)), 0o755))
					}
					name = func(i int) string { return filepath.Join(dir, fmt.Sprint("w", i%workers), fmt.Sprintf("f%05d", i)) }
					suffix = ", dir each"
				}
				for _, j := range jobs {
					key := fmt.Sprintf("%s, %d worker(s)%s", j.name, workers, suffix)
					if !only.MatchString(key) && !needed(j.name, only, workers, suffix) {
						continue
					}
					if j.drop {
						dropCaches()
					}
					cpu0, _ := proctest.CPUTime(roots[r].pid)
					v := parallelOps(n, workers, func(i int) error { return j.op(name(i)) }, t)
					cpu1, _ := proctest.CPUTime(roots[r].pid)
					if results[key] == nil {
						results[key] = make([][]float64, len(roots))
						order = append(order, key)
					}
					results[key][r] = append(results[key][r], v)
					if roots[r].pid != 0 {
						// Against the elapsed time per operation and
						// worker: far below it, the job waits (disk,
						// FUSE round trips) rather than computes.
						t.Logf("round %d, %s, %s: %.0f/s (server CPU %v per operation)", round, roots[r].name, key, v, (cpu1-cpu0)/time.Duration(n))
					} else {
						t.Logf("round %d, %s, %s: %.0f/s", round, roots[r].name, key, v)
					}
				}
				must(t, os.RemoveAll(dir))
			}
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n%d files per job, median of %d round(s), files/s and ratio to the local directory\n\n| %-36s |", n, rounds, "job")
	for _, r := range roots {
		fmt.Fprintf(&b, " %-16s |", r.name)
	}
	b.WriteString("\n|" + strings.Repeat("-", 38) + "|" + strings.Repeat(strings.Repeat("-", 18)+"|", len(roots)) + "\n")
	for _, key := range order {
		fmt.Fprintf(&b, "| %-36s |", key)
		local := median(results[key][0])
		for i, v := range results[key] {
			if i == 0 {
				fmt.Fprintf(&b, " %16.0f |", local)
				continue
			}
			fmt.Fprintf(&b, " %7.0f (%5.3fx) |", median(v), median(v)/local)
		}
		b.WriteString("\n")
	}
	t.Log(b.String())
}

// needed reports whether job name must run for a later job that only
// selects: stat and unlink need the files of create, read those of write.
func needed(name string, only *regexp.Regexp, workers int, suffix string) bool {
	sel := func(j string) bool { return only.MatchString(fmt.Sprintf("%s, %d worker(s)%s", j, workers, suffix)) }
	switch name {
	case "create empty":
		return sel("stat") || sel("unlink")
	case "write 64 KiB":
		return sel("read 64 KiB")
	}
	return false
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return v
}
