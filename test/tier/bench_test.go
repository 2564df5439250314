package tier

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// BenchmarkTier measures the object tier beside baselines taken in the same
// run against the same backend (versitygw if installed, else a second
// `sluice serve --s3`):
//
//		go test -run '^$' -bench Tier -benchtime 1x ./test/tier
//
//	  - cold read of released files through the client library vs a direct
//	    S3 GET of the same objects with parallel ranged GETs (16 ranges of
//	    8 MiB in flight for the big file; 16 readers of whole objects for the
//	    small ones);
//	  - archive (`sluice hsm archive -r`) vs `aws s3 cp --recursive` of the
//	    same tree from a local directory (Debian's /usr/bin/aws).
//
// SLUICE_TIER_BENCH_BIG sets the big file's size in MiB (default 1024);
// SLUICE_TIER_BENCH_SMALL the number of 150 KiB files (default 1024).
func BenchmarkTier(b *testing.B) {
	ctx := context.Background()
	be := benchBackend(b)
	fs := startFS(b)
	addBackend(b, fs, be, "bench/")
	c := newClient(b, fs.addr, 0)
	bigMiB := envInt("SLUICE_TIER_BENCH_BIG", 1024)
	nSmall := envInt("SLUICE_TIER_BENCH_SMALL", 1024)
	const smallSize = 150 << 10

	big := randomData(1, 64<<20)
	if err := c.MkdirAll(ctx, "/cold/small", 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := c.Create(ctx, "/cold/big")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < bigMiB; i += 64 {
		if _, err := f.Write(big[:min(64, bigMiB-i)<<20]); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	small := randomData(2, smallSize)
	var g errgroup.Group
	g.SetLimit(16)
	for i := range nSmall {
		g.Go(func() error { return writeSluice(ctx, c, fmt.Sprintf("/cold/small/%05d", i), small) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	fs.mustCLI("hsm", "archive", "-r", "/cold")
	b.Logf("archived %d MiB + %d x 150 KiB in %v", bigMiB, nSmall, time.Since(start))
	fs.mustCLI("hsm", "release", "-r", "/cold")
	s3c := be.s3(b)

	bigBytes := int64(bigMiB) << 20
	smallKeys := make([]string, nSmall)
	for i := range smallKeys {
		smallKeys[i] = fmt.Sprintf("/cold/small/%05d", i)
	}
	_, fuseErr := os.Stat("/dev/fuse")
	canMount := os.Geteuid() == 0 && fuseErr == nil
	// mountRead reads files through a new mount (nothing in its page cache).
	mountRead := func(b *testing.B, paths []string, readers int) (time.Duration, int64) {
		mp, pid := mountFSProc(b, fs.addr, "--no-restore-on-read")
		var total atomic.Int64
		cpu := startCPU(map[string]int{"serve": fs.proc.Cmd.Process.Pid, "backend": be.proc.Cmd.Process.Pid, "mount": pid, "bench": os.Getpid()})
		defer func() { b.Logf("mount read of %d files: CPU per file: %s", len(paths), cpu.per(len(paths))) }()
		t0 := time.Now()
		if err := parallelEach(paths, readers, func(p string) error {
			f, err := os.Open(filepath.Join(mp, p))
			if err != nil {
				return err
			}
			defer f.Close()
			buf := readBufs.Get().(*[1 << 20]byte)
			defer readBufs.Put(buf)
			n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf[:])
			total.Add(n)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0), total.Load()
	}
	reportMount := func(b *testing.B, what string, bytes int64, mount, direct time.Duration) {
		b.ReportMetric(mount.Seconds()/direct.Seconds(), "direct/mount-time")
		b.Logf("%s through the mount: %.0f MiB/s, direct S3 %.0f MiB/s: ratio %.2f", what, float64(bytes)/mount.Seconds()/(1<<20), float64(bytes)/direct.Seconds()/(1<<20), direct.Seconds()/mount.Seconds())
	}
	report := func(b *testing.B, what string, bytes int64, sluice, direct time.Duration) {
		ratio := direct.Seconds() / sluice.Seconds()
		b.ReportMetric(float64(bytes)/sluice.Seconds()/(1<<20), "sluice-MiB/s")
		b.ReportMetric(float64(bytes)/direct.Seconds()/(1<<20), "direct-MiB/s")
		b.ReportMetric(ratio, "ratio")
		b.Logf("%s: sluice %.0f MiB/s, direct S3 %.0f MiB/s: ratio %.2f", what, float64(bytes)/sluice.Seconds()/(1<<20), float64(bytes)/direct.Seconds()/(1<<20), ratio)
	}
	b.Run("ColdRead/big", func(b *testing.B) {
		b.SetBytes(bigBytes)
		var ts, td time.Duration
		for range b.N {
			// A new client each round: nothing cached.
			cc := newClient(b, fs.addr, 0)
			t0 := time.Now()
			if n, err := readStream(ctx, cc, "/cold/big"); err != nil || n != bigBytes {
				b.Fatalf("sluice read: %d, %v", n, err)
			}
			ts += time.Since(t0)
			t0 = time.Now()
			if err := rangedGet(ctx, s3c, "bench/cold/big", bigBytes, 8<<20, 16); err != nil {
				b.Fatal(err)
			}
			td += time.Since(t0)
		}
		report(b, fmt.Sprintf("cold read of a released %d MiB file", bigMiB), bigBytes*int64(b.N), ts, td)
		if canMount {
			var tm time.Duration
			for range b.N {
				d, n := mountRead(b, []string{"/cold/big"}, 1)
				if n != bigBytes {
					b.Fatalf("mount read: %d bytes", n)
				}
				tm += d
			}
			reportMount(b, fmt.Sprintf("cold read of a released %d MiB file", bigMiB), bigBytes*int64(b.N), tm, td)
		}
	})
	b.Run("ColdRead/small-16readers", func(b *testing.B) {
		total := int64(nSmall) * smallSize
		b.SetBytes(total)
		var ts, td time.Duration
		for range b.N {
			cc := newClient(b, fs.addr, 0)
			cpu := startCPU(map[string]int{"serve": fs.proc.Cmd.Process.Pid, "backend": be.proc.Cmd.Process.Pid, "bench": os.Getpid()})
			t0 := time.Now()
			if err := parallelEach(smallKeys, 16, func(p string) error {
				n, err := readStream(ctx, cc, p)
				if err == nil && n != smallSize {
					err = fmt.Errorf("%s: %d bytes", p, n)
				}
				return err
			}); err != nil {
				b.Fatal(err)
			}
			ts += time.Since(t0)
			b.Logf("library read of %d files: CPU per file: %s", nSmall, cpu.per(nSmall))
			cpu = startCPU(map[string]int{"backend": be.proc.Cmd.Process.Pid, "bench": os.Getpid()})
			t0 = time.Now()
			if err := parallelEach(smallKeys, 16, func(p string) error {
				return rangedGet(ctx, s3c, "bench"+p, smallSize, smallSize, 1)
			}); err != nil {
				b.Fatal(err)
			}
			td += time.Since(t0)
			b.Logf("direct GETs of %d objects: CPU per object: %s", nSmall, cpu.per(nSmall))
		}
		report(b, fmt.Sprintf("cold read of %d released 150 KiB files, 16 readers", nSmall), total*int64(b.N), ts, td)
		if canMount {
			var tm time.Duration
			for range b.N {
				d, n := mountRead(b, smallKeys, 16)
				if n != total {
					b.Fatalf("mount read: %d bytes", n)
				}
				tm += d
			}
			reportMount(b, fmt.Sprintf("cold read of %d released 150 KiB files, 16 readers", nSmall), total*int64(b.N), tm, td)
		}
	})
	b.Run("Archive", func(b *testing.B) {
		aws := "/usr/bin/aws"
		if _, err := os.Stat(aws); err != nil {
			proctestSkip(b, "Debian's aws (awscli) is not installed: %v", err)
		}
		// The same tree in Sluice and in a local directory.
		local := b.TempDir()
		const nFiles, fileSize = 64, 4 << 20
		data := randomData(3, fileSize)
		if err := c.MkdirAll(ctx, "/tree", 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range nFiles {
			if err := writeSluice(ctx, c, fmt.Sprintf("/tree/f%02d", i), data); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(local, fmt.Sprintf("f%02d", i)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		total := int64(nFiles * fileSize)
		b.SetBytes(total)
		var ts, td time.Duration
		for round := range b.N {
			fs.mustCLI("hsm", "remove", "-r", "/tree") // archive again from resident
			t0 := time.Now()
			fs.mustCLI("hsm", "archive", "-r", "/tree")
			ts += time.Since(t0)
			cmd := exec.Command(aws, "s3", "cp", "--recursive", "--only-show-errors", "--endpoint-url", be.endpoint, local, fmt.Sprintf("s3://%s/awscp/%d/", bucket, round))
			cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+accessKey, "AWS_SECRET_ACCESS_KEY="+secretKey, "AWS_DEFAULT_REGION=us-east-1")
			t0 = time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("aws s3 cp: %v: %s", err, out)
			}
			td += time.Since(t0)
		}
		report(b, fmt.Sprintf("archive of %d x 4 MiB vs aws s3 cp --recursive", nFiles), total*int64(b.N), ts, td)
	})
}

// benchBackend is versitygw if installed, else a second sluice serve --s3.
func benchBackend(b *testing.B) *backend {
	if os.Getenv("SLUICE_TIER_BENCH_BACKEND") != "sluice" {
		if _, err := exec.LookPath("versitygw"); err == nil {
			return startVersity(b)
		}
		if home, _ := os.UserHomeDir(); home != "" {
			if _, err := os.Stat(filepath.Join(home, "go", "bin", "versitygw")); err == nil {
				return startVersity(b)
			}
		}
	}
	return startSluiceBackend(b)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// readBufs holds the 1 MiB buffers of readStream and of the mount reads. A
// buffer made per file cost the Sluice side of the small-file comparison
// 17% of the benchmark process's CPU (allocating and zeroing 1 MiB per
// 150 KiB file), which the direct GETs (io.Copy into io.Discard, pooled
// 8 KiB buffers) did not pay; a training reader reuses its buffers.
var readBufs = sync.Pool{New: func() any { return new([1 << 20]byte) }}

// readStream reads p to the end, 1 MiB at a time, as a training reader would.
func readStream(ctx context.Context, c *client.Client, p string) (int64, error) {
	f, err := c.Open(ctx, p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := readBufs.Get().(*[1 << 20]byte)
	defer readBufs.Put(buf)
	return io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf[:])
}

// rangedGet reads the object with ranged GETs of unit bytes, inflight at
// a time: the best a plain S3 client does.
func rangedGet(ctx context.Context, c *minio.Client, key string, size, unit int64, inflight int) error {
	var g errgroup.Group
	g.SetLimit(inflight)
	var got atomic.Int64
	for off := int64(0); off < size; off += unit {
		g.Go(func() error {
			var o minio.GetObjectOptions
			n := min(unit, size-off)
			if unit < size {
				o.SetRange(off, off+n-1)
			}
			obj, err := c.GetObject(ctx, bucket, key, o)
			if err != nil {
				return err
			}
			defer obj.Close()
			k, err := io.Copy(io.Discard, obj)
			got.Add(k)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if got.Load() != size {
		return fmt.Errorf("GET %s: %d of %d bytes", key, got.Load(), size)
	}
	return nil
}

func parallelEach(items []string, n int, fn func(string) error) error {
	var g errgroup.Group
	g.SetLimit(n)
	for _, it := range items {
		g.Go(func() error { return fn(it) })
	}
	return g.Wait()
}

// cpuMeter is the CPU time (user and system) of named processes since it
// started: where a benchmark's machine time went, process by process.
type cpuMeter struct {
	pids  map[string]int
	start map[string]time.Duration
}

func startCPU(pids map[string]int) *cpuMeter {
	m := &cpuMeter{pids: pids, start: make(map[string]time.Duration)}
	for name, pid := range pids {
		m.start[name] = procCPU(pid)
	}
	return m
}

// per formats each process's CPU time since the start divided by n.
func (m *cpuMeter) per(n int) string {
	names := make([]string, 0, len(m.pids))
	for name := range m.pids {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []string
	var sum time.Duration
	for _, name := range names {
		d := (procCPU(m.pids[name]) - m.start[name]) / time.Duration(max(n, 1))
		sum += d
		out = append(out, fmt.Sprintf("%s %v", name, d.Round(time.Microsecond)))
	}
	return strings.Join(out, ", ") + fmt.Sprintf("; all %v", sum.Round(time.Microsecond))
}

// procCPU is a process's user and system CPU time (0 when it cannot be
// read: the figure is a diagnostic, not an assertion).
func procCPU(pid int) time.Duration {
	d, _ := proctest.CPUTime(pid)
	return d
}
