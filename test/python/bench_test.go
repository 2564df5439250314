package python

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
	"golang.org/x/sync/errgroup"
)

// BenchmarkSamples compares reading the same small samples (one file of
// 60-200 KiB each, the sizes of an image dataset) from one `sluice serve`:
// the Python client's batch call (from a file set and by path), the Go
// client library (64 reads in flight), the mount and a local directory
// (Python, 1 and 16 threads), and a DataLoader epoch with 4 workers over
// the native client, the mount and the local directory (samples as bytes,
// and as tensors read into shared memory); then the cost of
// one 4 KiB read from Python, from Go and through the mount. Every
// measurement runs in rounds, interleaved, each after the page cache of
// every file involved was dropped (posix_fadvise DONTNEED on the server's
// data directory, the local directory and the files through the mount). It
// prints a table of medians with ratios. Run it with
//
//	go test -run '^$' -bench Samples -benchtime 1x ./test/python
//
// SLUICE_BENCH_FILES sets the number of samples (default 2000).
func BenchmarkSamples(b *testing.B) {
	if _, err := os.Stat(python); err != nil {
		proctest.SkipMissing(b, "python: %v", err)
	}
	nfiles := 2000
	if s := os.Getenv("SLUICE_BENCH_FILES"); s != "" {
		nfiles, _ = strconv.Atoi(s)
	}
	addr, dataDir, mp := startBenchServer(b)
	ctx := context.Background()
	c := proctest.Client(b, addr)

	// The samples, in Sluice (one target per sample) and in a local directory.
	const root = "/bench"
	if err := c.Mkdir(ctx, root, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := c.SetLayout(ctx, root, client.Layout{StripeCount: 1}); err != nil {
		b.Fatal(err)
	}
	if err := c.Mkdir(ctx, root+"/d", 0o755); err != nil {
		b.Fatal(err)
	}
	local := b.TempDir()
	os.Mkdir(filepath.Join(local, "d"), 0o755)
	r := rand.New(rand.NewPCG(1, 2))
	paths := make([]string, nfiles)
	var total int64
	{
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(32)
		for i := range nfiles {
			paths[i] = fmt.Sprintf("d/%06d.jpg", i)
			data := make([]byte, 60<<10+r.IntN(140<<10))
			for j := 0; j < len(data); j += 8 {
				copy(data[j:], strconv.AppendUint(nil, r.Uint64(), 36))
			}
			total += int64(len(data))
			g.Go(func() error {
				if err := proctest.WriteFile(gctx, c, root+"/"+paths[i], data); err != nil {
					return err
				}
				return os.WriteFile(filepath.Join(local, paths[i]), data, 0o644)
			})
		}
		big := make([]byte, 64<<20)
		g.Go(func() error { return proctest.WriteFile(gctx, c, root+"/big", big) })
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
	}

	// The Go library's measurements, run when the Python script asks for
	// them (interleaved with its own, after it dropped the caches).
	goSamples := func() float64 {
		start := time.Now()
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(64)
		for _, p := range paths {
			g.Go(func() error {
				f, err := c.Open(gctx, root+"/"+p)
				if err != nil {
					return err
				}
				defer f.Close()
				st, err := f.Stat()
				if err != nil {
					return err
				}
				buf := make([]byte, st.Size())
				_, err = f.ReadAt(buf, 0)
				return err
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start).Seconds()
	}
	goPread := func() float64 {
		f, err := c.Open(ctx, root+"/big")
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		rr := rand.New(rand.NewPCG(3, 4))
		buf := make([]byte, 4096)
		const n = 2000
		start := time.Now()
		for range n {
			if _, err := f.ReadAt(buf, rr.Int64N(64<<20-4096)&^4095); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start).Seconds() / n * 1e6
	}

	pyArgs := []string{"bench_samples.py", "--root", root + "/d", "--local", filepath.Join(local, "d"),
		"--big", root + "/big", "--drop", dataDir, "--go"}
	if mp != "" {
		pyArgs = append(pyArgs, "--mount", "mount="+filepath.Join(mp, "bench", "d"))
		// A training node mounts with `sluice mount`: a process of its own,
		// reaching the server over TCP as the native client does.
		mp2 := b.TempDir()
		startTCPMount(b, addr, mp2)
		pyArgs = append(pyArgs, "--mount", "tcpmount="+filepath.Join(mp2, "bench", "d"))
		// The same with direct reads (ADR 0025), in the same run.
		mp3 := b.TempDir()
		startTCPMount(b, addr, mp3, "--direct-read")
		pyArgs = append(pyArgs, "--mount", "tcpdirect="+filepath.Join(mp3, "bench", "d"))
	}
	b.ResetTimer()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	cmd := pythonCmd(pctx, b, addr, pyArgs...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var res map[string]any
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "RUN samples":
			fmt.Fprintf(stdin, "DONE %f\n", goSamples())
		case line == "RUN pread4k":
			fmt.Fprintf(stdin, "DONE %f\n", goPread())
		case strings.HasPrefix(line, "RESULT "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "RESULT ")), &res); err != nil {
				b.Fatalf("bench_samples.py printed %q: %v", line, err)
			}
		}
	}
	if err := cmd.Wait(); err != nil || res == nil {
		b.Fatalf("bench_samples.py: %v\n%s", err, lastLines(stderr.String(), 40))
	}
	// Each method's median over its rounds (and its best).
	med := map[string]float64{}
	best := map[string]float64{}
	for k, v := range res {
		xs, ok := v.([]any)
		if !ok || len(xs) == 0 {
			continue
		}
		fs := make([]float64, len(xs))
		for i, x := range xs {
			fs[i] = x.(float64)
		}
		slices.Sort(fs)
		med[k], best[k] = fs[len(fs)/2], fs[0]
	}

	var sb strings.Builder
	mb := float64(total) / (1 << 20)
	fmt.Fprintf(&sb, "%d samples, %.0f MiB, cold caches; median (best) of the rounds; mount = sluice serve --mount (in the server's process)\n", nfiles, mb)
	row := func(name, key, baseKey string) {
		s, ok := med[key]
		if !ok {
			return
		}
		ratio := ""
		if base, ok := med[baseKey]; ok && key != baseKey {
			ratio = fmt.Sprintf("%.2fx %s", base/s, baseKey)
		}
		fmt.Fprintf(&sb, "%-50s %7.2fs (%5.2fs) %7.0f files/s %7.1f MiB/s  %s\n", name, s, best[key], float64(nfiles)/s, mb/s, ratio)
	}
	row("python batch call, file set", "native_fileset", "mount_16threads")
	row("python batch call, by path", "native_paths", "mount_16threads")
	row("go library, 64 goroutines", "go_library", "mount_16threads")
	row("mount, python, 16 threads", "mount_16threads", "")
	row("mount, python, 1 thread", "mount_1thread", "mount_16threads")
	row("sluice mount (TCP), python, 16 threads", "tcpmount_16threads", "mount_16threads")
	row("sluice mount (TCP), python, 1 thread", "tcpmount_1thread", "mount_16threads")
	row("sluice mount --direct-read, python, 16 threads", "tcpdirect_16threads", "tcpmount_16threads")
	row("sluice mount --direct-read, python, 1 thread", "tcpdirect_1thread", "tcpmount_1thread")
	row("local dir, python, 16 threads", "local_16threads", "mount_16threads")
	row("local dir, python, 1 thread", "local_1thread", "mount_16threads")
	row("DataLoader 4 workers, native, bytes", "loader_native", "loader_mount")
	row("DataLoader 4 workers, mount, bytes", "loader_mount", "")
	row("DataLoader 4 workers, sluice mount (TCP), bytes", "loader_tcpmount", "loader_mount")
	row("DataLoader 4 workers, sluice mount --direct-read, bytes", "loader_tcpdirect", "loader_tcpmount")
	row("DataLoader 4 workers, local dir, bytes", "loader_local", "loader_mount")
	row("DataLoader 4 workers, no storage (memory), bytes", "loader_memory", "loader_mount")
	row("DataLoader 4 workers, native, tensors", "loader_native_tensor", "loader_mount_tensor")
	row("DataLoader 4 workers, mount, tensors", "loader_mount_tensor", "")
	row("DataLoader 4 workers, sluice mount (TCP), tensors", "loader_tcpmount_tensor", "loader_mount_tensor")
	row("DataLoader 4 workers, sluice mount --direct-read, tensors", "loader_tcpdirect_tensor", "loader_tcpmount_tensor")
	row("DataLoader 4 workers, local dir, tensors", "loader_local_tensor", "loader_mount_tensor")
	row("DataLoader 4 workers, no storage (memory), tensors", "loader_memory_tensor", "loader_mount_tensor")
	for _, k := range []string{"", "_tensor"} {
		if l, n := med["loader_local"+k], med["loader_native"+k]; l > 0 && n > 0 {
			fmt.Fprintf(&sb, "DataLoader%s native / local dir: %.2f\n", k, l/n)
		}
		// The DataLoader's own work, no storage behind it (not a floor:
		// with bytes a local directory came out ahead of it).
		if m, mm := med["loader_memory"+k], med["loader_mount"+k]; m > 0 && mm > 0 {
			fmt.Fprintf(&sb, "DataLoader%s no storage / mount: %.2fx; native / no storage: %.2f\n", k, mm/m, m/med["loader_native"+k])
		}
	}
	fmt.Fprintf(&sb, "4 KiB read, one at a time (median): python %.1f us, go %.1f us, mount %.1f us\n",
		med["pread4k_native_us"], med["pread4k_go_us"], med["pread4k_mount_us"])
	b.Logf("\n%s", sb.String())
	fmt.Print(sb.String())
	if s := med["native_fileset"]; s > 0 {
		b.ReportMetric(float64(nfiles)/s, "files/s-native")
		if m := med["mount_16threads"]; m > 0 {
			b.ReportMetric(m/s, "x-mount")
		}
	}
}

// startTCPMount runs `sluice mount --server addr mp` and waits until mp is
// mounted; the process is stopped (and mp unmounted) when b ends.
func startTCPMount(b *testing.B, addr, mp string, args ...string) {
	b.Helper()
	cmd := exec.Command(binary, append(append([]string{"mount", "--server", addr}, args...), mp)...)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		syscall.Unmount(mp, syscall.MNT_DETACH)
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m, _ := os.ReadFile("/proc/self/mounts"); strings.Contains(string(m), " "+mp+" ") {
			return
		}
		select {
		case <-exited:
			b.Fatalf("sluice mount exited: %s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("sluice mount did not mount %s within 30 s: %s", mp, logs.String())
		}
	}
}

// BenchmarkDCP compares torch.distributed.checkpoint save and load of one
// state dict (SLUICE_BENCH_DCP_SIZE bytes, default 1 GiB, in float32
// tensors of 64 MiB) through the native client (sluice.dcp), through
// torch's FileSystemWriter/Reader on the `sluice serve --mount` mount and
// on a local directory, in interleaved rounds, loads cold; each load is
// checked against what was saved (python/tests/bench_dcp.py). It prints
// the medians and their ratios to the local directory:
//
//	go test -run '^$' -bench DCP -benchtime 1x ./test/python
func BenchmarkDCP(b *testing.B) {
	if _, err := os.Stat(python); err != nil {
		proctest.SkipMissing(b, "python: %v", err)
	}
	size := int64(1 << 30)
	if s := os.Getenv("SLUICE_BENCH_DCP_SIZE"); s != "" {
		size, _ = strconv.ParseInt(s, 10, 64)
	}
	addr, dataDir, mp := startBenchServer(b)
	args := []string{"bench_dcp.py", "--size", fmt.Sprint(size), "--tensor", fmt.Sprint(64 << 20),
		"--drop", dataDir, "--local", b.TempDir()}
	// Through a staging area in memory under the absorb policy (the
	// checkpoint's stall; ADR 0013).
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		staging, err := os.MkdirTemp("/dev/shm", "sluice-bench-staging")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(staging) })
		ac := proctest.Client(b, addr)
		if err := ac.Mkdir(context.Background(), "/absorb", 0o755); err != nil {
			b.Fatal(err)
		}
		if err := ac.SetAbsorb(context.Background(), "/absorb", client.AbsorbOn); err != nil {
			b.Fatal(err)
		}
		args = append(args, "--staging", staging, "--absorb", "/absorb")
	}
	if mp != "" {
		args = append(args, "--mount", mp)
		// torch's FileSystemWriter through a `sluice mount` staging in
		// memory under the absorb policy, with its admin port to wait for
		// the drain.
		if staging, err := os.MkdirTemp("/dev/shm", "sluice-bench-mstaging"); err == nil {
			b.Cleanup(func() { os.RemoveAll(staging) })
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			admin := ln.Addr().String()
			ln.Close()
			mp2 := b.TempDir()
			startTCPMount(b, addr, mp2, "--staging-dir", staging, "--http", admin)
			args = append(args, "--mount-staged", filepath.Join(mp2, "absorb"), "--mount-metrics", admin)
		}
	}
	b.ResetTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	out, err := pythonCmd(ctx, b, addr, args...).CombinedOutput()
	if err != nil {
		b.Fatalf("bench_dcp.py: %v\n%s", err, out)
	}
	var res struct {
		Methods map[string]map[string][]float64
		Bytes   float64
	}
	for _, line := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(line, "RESULT "); ok {
			if err := json.Unmarshal([]byte(s), &res); err != nil {
				b.Fatalf("bench_dcp.py printed %q: %v", line, err)
			}
		}
	}
	if res.Methods == nil {
		b.Fatalf("bench_dcp.py printed no result:\n%s", out)
	}
	med := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	var tb strings.Builder
	fmt.Fprintf(&tb, "\nDCP of %.0f MiB, medians of %d rounds (MiB/s, ratio to the local directory)\n\n| method | save | load |\n|---|---|---|\n",
		res.Bytes/(1<<20), len(res.Methods["native"]["save"]))
	local := res.Methods["local"]
	for _, name := range []string{"local", "native", "mount", "staged", "mountstaged"} {
		mm, ok := res.Methods[name]
		if !ok {
			continue
		}
		cell := func(op string) string {
			s := fmt.Sprintf("%.0f", res.Bytes/(1<<20)/med(mm[op]))
			if local != nil && name != "local" {
				s += fmt.Sprintf(" (%.2f)", med(local[op])/med(mm[op]))
			}
			return s
		}
		fmt.Fprintf(&tb, "| %s | %s | %s |\n", name, cell("save"), cell("load"))
		b.ReportMetric(res.Bytes/(1<<20)/med(mm["save"]), name+"-save-MiB/s")
		b.ReportMetric(res.Bytes/(1<<20)/med(mm["load"]), name+"-load-MiB/s")
	}
	for name, what := range map[string]string{"staged": "native client", "mountstaged": "sluice mount, torch's FileSystemWriter"} {
		if st, ok := res.Methods[name]; ok {
			fmt.Fprintf(&tb, "\n%s (%s, staging in /dev/shm, absorb policy): the save returned in %.2f s (median), the drain to the targets took %.2f s more (the local directory's save: %.2f s)\n",
				name, what, med(st["save"]), med(st["drain"]), med(local["save"]))
		}
	}
	b.Log(tb.String())
}

// startBenchServer starts `sluice serve` on a fresh data directory, with a
// mount (`--mount`) when this process may mount FUSE, and stops it when
// the benchmark ends. It returns the service's address, the data
// directory and the mountpoint ("" without a mount).
func startBenchServer(b *testing.B) (addr, dataDir, mp string) {
	dataDir = b.TempDir()
	sargs := []string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--http", ""}
	ready := readyLine
	if os.Geteuid() == 0 {
		if _, err := os.Stat("/dev/fuse"); err == nil {
			mp = b.TempDir()
			sargs = append(sargs, "--mount", mp)
			ready = regexp.MustCompile(`mounted on (\S+)`)
		}
	}
	p, _ := proctest.Start(b, binary, nil, ready, sargs...)
	b.Cleanup(func() {
		p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Exited():
		case <-time.After(30 * time.Second):
		}
		if mp != "" {
			syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	})
	m := readyLine.FindStringSubmatch(p.Logs())
	if m == nil {
		b.Fatalf("no serving line: %s", p.Logs())
	}
	return m[1], dataDir, mp
}
