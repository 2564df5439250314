package fuse

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBench runs the mount benchmarks, each beside the same job on a local
// directory in the same run, and prints a table. It runs only with
// SLUICE_FUSE_BENCH=1 (it takes a few minutes and needs fio):
//
//	SLUICE_FUSE_BENCH=1 go test -run TestBench -v ./test/fuse
//
// SLUICE_FUSE_BENCH_SIZE sets the fio file size per job (default 1G).
func TestBench(t *testing.T) {
	requireFUSE(t)
	if os.Getenv("SLUICE_FUSE_BENCH") == "" {
		t.Skip("set SLUICE_FUSE_BENCH=1 to run the benchmarks")
	}
	s := startServer(t, "", "")
	m := startMount(t, s.addr)
	local := t.TempDir()
	size := os.Getenv("SLUICE_FUSE_BENCH_SIZE")
	if size == "" {
		size = "1G"
	}
	type row struct {
		name          string
		unit          string
		local, sluice float64
	}
	var rows []row
	add := func(name, unit string, fn func(dir string) float64) {
		var r [2]float64
		for i, root := range []string{local, m.dir} {
			dir := filepath.Join(root, strings.NewReplacer(" ", "-", ",", "").Replace(name))
			must(t, os.MkdirAll(dir, 0o755))
			dropCaches()
			r[i] = fn(dir)
			os.RemoveAll(dir)
		}
		rows = append(rows, row{name, unit, r[0], r[1]})
		t.Logf("%-40s local %10.1f %s   sluice %10.1f %s", name, r[0], unit, r[1], unit)
	}
	if _, err := exec.LookPath("fio"); err == nil {
		for _, jobs := range []int{1, 4} {
			// One directory for the write and then the read of the same files.
			var dirs [2]string
			for i, root := range []string{local, m.dir} {
				dirs[i] = filepath.Join(root, fmt.Sprintf("seq%d", jobs))
				must(t, os.MkdirAll(dirs[i], 0o755))
			}
			var w, rd [2]float64
			for i := range dirs {
				w[i] = fio(t, dirs[i], "write", "1M", size, jobs)
			}
			for i := range dirs {
				dropCaches()
				rd[i] = fio(t, dirs[i], "read", "1M", size, jobs)
			}
			rows = append(rows, row{fmt.Sprintf("fio seq write 1 MiB, %d job(s)", jobs), "MB/s", w[0], w[1]})
			rows = append(rows, row{fmt.Sprintf("fio seq read 1 MiB, %d job(s)", jobs), "MB/s", rd[0], rd[1]})
			for i := range dirs {
				os.RemoveAll(dirs[i])
			}
		}
		add("fio rand read 4 KiB, 1 job", "MB/s", func(dir string) float64 {
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
		add(fmt.Sprintf("create+stat+unlink 10k, %d worker(s)", workers), "files/s", func(dir string) float64 {
			for i := range 10000 {
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%05d", i)))
				must(t, err)
				f.Close()
			}
			dropCaches()
			stat := parallelOps(10000, workers, func(i int) error {
				_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("f%05d", i)))
				return err
			}, t)
			unlink := parallelOps(10000, workers, func(i int) error {
				return os.Remove(filepath.Join(dir, fmt.Sprintf("f%05d", i)))
			}, t)
			t.Logf("  stat %.0f/s, unlink %.0f/s", stat, unlink)
			return 1 / (1/stat + 1/unlink)
		})
	}
	block := make([]byte, 64<<10)
	for i := range block {
		block[i] = byte(i)
	}
	var w64, r64 [2]float64
	for i, root := range []string{local, m.dir} {
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
	rows = append(rows, row{"write 10k files of 64 KiB, 4 workers", "MiB/s", w64[0], w64[1]})
	rows = append(rows, row{"read 10k files of 64 KiB, 4 workers", "MiB/s", r64[0], r64[1]})

	var b strings.Builder
	fmt.Fprintf(&b, "\n| %-40s | %12s | %12s | %7s |\n|%s|%s|%s|%s|\n", "job", "local dir", "sluice", "ratio",
		strings.Repeat("-", 42), strings.Repeat("-", 14), strings.Repeat("-", 14), strings.Repeat("-", 9))
	for _, r := range rows {
		fmt.Fprintf(&b, "| %-40s | %6.0f %-5s | %6.0f %-5s | %6.2fx |\n", r.name, r.local, r.unit, r.sluice, r.unit, r.sluice/r.local)
	}
	t.Log(b.String())
	m.stop()
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
		args = append(args, "--time_based", "--runtime=10s")
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
