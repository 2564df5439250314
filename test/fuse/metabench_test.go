package fuse

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchMetaSync measures create, stat and unlink of 10,000 empty files
// through `sluice serve --mount` under both metadata sync policies, beside
// a local directory in the same run, and prints a table with the ratios to
// the local directory (ADR 0006). It runs only with SLUICE_FUSE_BENCH=1:
//
//	SLUICE_FUSE_BENCH=1 go test -run TestBenchMetaSync -v ./test/fuse
func TestBenchMetaSync(t *testing.T) {
	requireFUSE(t)
	if os.Getenv("SLUICE_FUSE_BENCH") == "" {
		t.Skip("set SLUICE_FUSE_BENCH=1 to run the benchmarks")
	}
	_, groupDir, _, _ := startServeMount(t, "--meta-sync", "group")
	_, alwaysDir, _, _ := startServeMount(t, "--meta-sync", "always")
	roots := []string{t.TempDir(), groupDir, alwaysDir}
	const n = 10000
	type row struct {
		name string
		r    []float64 // ops/s per root
	}
	var rows []row
	for _, workers := range []int{1, 4} {
		create, stat, unlink := make([]float64, len(roots)), make([]float64, len(roots)), make([]float64, len(roots))
		for i, root := range roots {
			dir := filepath.Join(root, fmt.Sprintf("meta%d", workers))
			must(t, os.MkdirAll(dir, 0o755))
			name := func(k int) string { return filepath.Join(dir, fmt.Sprintf("f%05d", k)) }
			create[i] = parallelOps(n, workers, func(k int) error {
				f, err := os.OpenFile(name(k), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
				if err == nil {
					err = f.Close()
				}
				return err
			}, t)
			dropCaches()
			stat[i] = parallelOps(n, workers, func(k int) error {
				_, err := os.Stat(name(k))
				return err
			}, t)
			unlink[i] = parallelOps(n, workers, func(k int) error { return os.Remove(name(k)) }, t)
			must(t, os.Remove(dir))
		}
		rows = append(rows,
			row{fmt.Sprintf("create 10k empty files, %d worker(s)", workers), create},
			row{fmt.Sprintf("stat 10k files, %d worker(s)", workers), stat},
			row{fmt.Sprintf("unlink 10k files, %d worker(s)", workers), unlink})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| %-34s | %9s | %-20s | %-20s |\n|%s|%s|%s|%s|\n",
		"job (ops/s)", "local dir", "--meta-sync group", "--meta-sync always",
		strings.Repeat("-", 36), strings.Repeat("-", 11), strings.Repeat("-", 22), strings.Repeat("-", 22))
	for _, r := range rows {
		fmt.Fprintf(&b, "| %-34s | %9.0f |", r.name, r.r[0])
		for _, v := range r.r[1:] {
			fmt.Fprintf(&b, " %9.0f (%5.3fx) |", v, v/r.r[0])
		}
		b.WriteString("\n")
	}
	t.Log(b.String())
}
