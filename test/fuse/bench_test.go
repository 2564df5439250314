package fuse

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestBench runs the mount benchmarks, each beside the same job on a local
// directory in the same run, and prints a table. It runs only with
// SLUICE_FUSE_BENCH=1 (it takes a few minutes and needs fio):
//
//	SLUICE_FUSE_BENCH=1 go test -run TestBench -v ./test/fuse
//
// Four file systems run every job: a local directory; a `sluice mount`
// process of a `sluice serve` (loopback TCP); `sluice serve --mount` (the
// mount calls the servers in process); and `sluice serve --mount
// --passthrough`, whose files the kernel reads straight from the chunk
// files. The Sluice file systems all use stripe count 1, so that they
// differ only in those respects. SLUICE_FUSE_BENCH_SIZE sets the fio file
// size per job (default 1G).
func TestBench(t *testing.T) {
	requireFUSE(t)
	if os.Getenv("SLUICE_FUSE_BENCH") == "" {
		t.Skip("set SLUICE_FUSE_BENCH=1 to run the benchmarks")
	}
	s := startServer(t, "", "")
	m := startMount(t, s.addr)
	_, inDir, _, inAddr := startServeMount(t)
	_, ptDir, _, ptAddr := startServeMount(t, "--passthrough")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, addr := range []string{s.addr, inAddr, ptAddr} {
		must(t, proctest.Client(t, addr).SetLayout(ctx, "/", client.Layout{StripeCount: 1}))
	}
	roots := []string{t.TempDir(), m.dir, inDir, ptDir}
	size := os.Getenv("SLUICE_FUSE_BENCH_SIZE")
	if size == "" {
		size = "1G"
	}
	type row struct {
		name string
		unit string
		r    []float64 // per root
	}
	var rows []row
	add := func(name, unit string, fn func(dir string) float64) {
		r := make([]float64, len(roots))
		for i, root := range roots {
			dir := filepath.Join(root, strings.NewReplacer(" ", "-", ",", "").Replace(name))
			must(t, os.MkdirAll(dir, 0o755))
			dropCaches()
			r[i] = fn(dir)
			os.RemoveAll(dir)
		}
		rows = append(rows, row{name, unit, r})
		t.Logf("%-40s %v %s", name, r, unit)
	}
	if _, err := exec.LookPath("fio"); err == nil {
		for _, jobs := range []int{1, 4} {
			// One directory for the write and then the read of the same files.
			dirs := make([]string, len(roots))
			for i, root := range roots {
				dirs[i] = filepath.Join(root, fmt.Sprintf("seq%d", jobs))
				must(t, os.MkdirAll(dirs[i], 0o755))
			}
			w, rd, cold := make([]float64, len(roots)), make([]float64, len(roots)), make([]float64, len(roots))
			for i := range dirs {
				w[i] = fio(t, dirs[i], "write", "1M", size, jobs)
			}
			for i := range dirs {
				dropCaches()
				rd[i] = fio(t, dirs[i], "read", "1M", size, jobs)
			}
			for i := range dirs {
				dropCaches()
				cold[i] = readFiles(t, dirs[i], jobs)
			}
			rows = append(rows, row{fmt.Sprintf("fio seq write 1 MiB, %d job(s)", jobs), "MB/s", w},
				row{fmt.Sprintf("fio seq read 1 MiB, %d job(s)", jobs), "MB/s", rd},
				row{fmt.Sprintf("open+read the same, %d reader(s)", jobs), "MB/s", cold})
			for i := range dirs {
				os.RemoveAll(dirs[i])
			}
		}
		add("fio rand read 4 KiB, 1 job", "MB/s", func(dir string) float64 {
			// Written and dropped from the caches first: fio's own
			// invalidation does not reach a passthrough file's backing
			// file, whose reads would otherwise come from memory.
			fio(t, dir, "write", "1M", "256M", 1)
			dropCaches()
			return fio(t, dir, "randread", "4k", "256M", 1)
		})
	} else {
		t.Log("fio is not installed: skipping the fio jobs")
	}
	for _, workers := range []int{1, 4} {
		add(fmt.Sprintf("create 10k empty files, %d worker(s)", workers), "ops/s", func(dir string) float64 {
			return parallelOps(10000, workers, func(i int) error {
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%05d", i)))
				if err == nil {
					err = f.Close()
				}
				return err
			}, t)
		})
	}
	for _, workers := range []int{1, 4} {
		var stat, unlink []float64
		for i, root := range roots {
			dir := filepath.Join(root, fmt.Sprintf("csu%d", workers))
			must(t, os.MkdirAll(dir, 0o755))
			for i := range 10000 {
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%05d", i)))
				must(t, err)
				f.Close()
			}
			dropCaches()
			stat = append(stat, parallelOps(10000, workers, func(i int) error {
				_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("f%05d", i)))
				return err
			}, t))
			unlink = append(unlink, parallelOps(10000, workers, func(i int) error {
				return os.Remove(filepath.Join(dir, fmt.Sprintf("f%05d", i)))
			}, t))
			os.RemoveAll(dir)
			t.Logf("root %d: stat %.0f/s, unlink %.0f/s", i, stat[i], unlink[i])
		}
		rows = append(rows, row{fmt.Sprintf("stat 10k files, %d worker(s)", workers), "ops/s", stat},
			row{fmt.Sprintf("unlink 10k files, %d worker(s)", workers), "ops/s", unlink})
	}
	block := make([]byte, 64<<10)
	for i := range block {
		block[i] = byte(i)
	}
	w64, r64 := make([]float64, len(roots)), make([]float64, len(roots))
	for i, root := range roots {
		dir := filepath.Join(root, "small64k")
		must(t, os.MkdirAll(dir, 0o755))
		w64[i] = parallelOps(10000, 4, func(k int) error {
			return os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", k)), block, 0o644)
		}, t) * 64 / 1024
		dropCaches()
		r64[i] = parallelOps(10000, 4, func(k int) error {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("f%05d", k)))
			if err == nil && len(b) != len(block) {
				err = fmt.Errorf("read %d bytes", len(b))
			}
			return err
		}, t) * 64 / 1024
		os.RemoveAll(dir)
	}
	rows = append(rows, row{"write 10k files of 64 KiB, 4 workers", "MiB/s", w64},
		row{"read 10k files of 64 KiB, 4 workers", "MiB/s", r64})

	var b strings.Builder
	fmt.Fprintf(&b, "\n| %-38s | %-6s | %9s | %-16s | %-16s | %-16s |\n|%s|%s|%s|%s|%s|%s|\n",
		"job", "unit", "local dir", "mount (TCP)", "serve --mount", "--passthrough",
		strings.Repeat("-", 40), strings.Repeat("-", 8), strings.Repeat("-", 11),
		strings.Repeat("-", 18), strings.Repeat("-", 18), strings.Repeat("-", 18))
	for _, r := range rows {
		fmt.Fprintf(&b, "| %-38s | %-6s | %9.0f |", r.name, r.unit, r.r[0])
		for _, v := range r.r[1:] {
			fmt.Fprintf(&b, " %7.0f (%5.2fx) |", v, v/r.r[0])
		}
		b.WriteString("\n")
	}
	t.Log(b.String())
	m.stop()
}

// readFiles opens and reads every file in dir, one reader per file (up to
// jobs at once), and returns MB/s: unlike fio, the open is timed too (a
// passthrough open checks the chunk's checksums).
func readFiles(t *testing.T, dir string, jobs int) float64 {
	ents, err := os.ReadDir(dir)
	must(t, err)
	var total atomic.Int64
	start := time.Now()
	parallelOps(len(ents), jobs, func(i int) error {
		f, err := os.Open(filepath.Join(dir, ents[i].Name()))
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := io.CopyBuffer(io.Discard, f, make([]byte, 1<<20))
		total.Add(n)
		return err
	}, t)
	return float64(total.Load()) / time.Since(start).Seconds() / 1e6
}

// fio runs one fio job group in dir and returns its bandwidth in MB/s.
func fio(t *testing.T, dir, rw, bs, size string, jobs int) float64 {
	t.Helper()
	args := []string{"--name=bench", "--directory=" + dir, "--rw=" + rw, "--bs=" + bs, "--size=" + size,
		fmt.Sprintf("--numjobs=%d", jobs), "--group_reporting", "--output-format=json", "--ioengine=psync"}
	switch rw {
	case "write":
		args = append(args, "--end_fsync=1")
	case "randread":
		// One pass over the file, each block once, and no access-pattern
		// hint: fio's hints and cache invalidation reach a FUSE file but
		// not a passthrough file's backing file, so they would make the
		// file systems differ in what they are asked, not in what they do.
		args = append(args, "--fadvise_hint=0")
	}
	out, err := exec.Command("fio", args...).Output()
	if err != nil {
		t.Fatalf("fio %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var res struct {
		Jobs []struct {
			Read, Write struct {
				BwBytes float64 `json:"bw_bytes"`
			}
		}
	}
	if i := strings.IndexByte(string(out), '{'); i > 0 {
		out = out[i:] // fio may print notes before the JSON
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Jobs) == 0 {
		t.Fatalf("fio output: %v\n%s", err, out)
	}
	bw := res.Jobs[0].Read.BwBytes + res.Jobs[0].Write.BwBytes
	return bw / 1e6
}

// parallelOps runs op(0..n-1) on workers goroutines and returns ops/s.
func parallelOps(n, workers int, op func(i int) error, t *testing.T) float64 {
	start := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if err := op(i); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return float64(n) / time.Since(start).Seconds()
}

// dropCaches empties the page, dentry and inode caches (root only), so
// that reads measure the file system rather than memory.
func dropCaches() {
	exec.Command("sync").Run()
	os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
}
