package e2e

import (
	"context"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkMigrate times `sluice migrate` of a file beside `sluice cp` of
// the same file inside Sluice (the plain copy a user would otherwise make),
// in the same run (each alone), and the rate a foreground reader of another
// file gets alone and during a second migration, back to one stripe:
//
//	go test -run '^$' -bench Migrate -benchtime 3x ./test/e2e
//
// SLUICE_BENCH_MIGRATE_RATE caps the second migration (sluice migrate
// --rate; default none). SLUICE_BENCH_MIGRATE_SIZE sets the file size
// (default 512M). Each
// iteration migrates the file from 1 stripe to 4 and back.
func BenchmarkMigrate(b *testing.B) {
	size := int64(512 << 20)
	if v := os.Getenv("SLUICE_BENCH_MIGRATE_SIZE"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		size = n
	}
	rate := os.Getenv("SLUICE_BENCH_MIGRATE_RATE") // of the migration beside the reader
	if rate == "" {
		rate = "0"
	}
	s := startServer(b, "")
	c := s.client()
	ctx := context.Background()
	s.mustCLI("mkdir", "/b")
	s.mustCLI("layout", "set", "/b", "--stripe-count", "1")
	for _, p := range []string{"/b/f", "/b/other"} {
		f, err := c.Create(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		chunk := randBytes(7, 8<<20)
		for off := int64(0); off < size; off += int64(len(chunk)) {
			if _, err := f.Write(chunk[:min(int64(len(chunk)), size-off)]); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	// readAll reads /b/other once and returns its rate in MiB/s.
	readAll := func() float64 {
		start := time.Now()
		f, err := c.Open(ctx, "/b/other")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, f)
		f.Close()
		if err != nil || n != size {
			b.Fatalf("read /b/other: %d bytes, %v", n, err)
		}
		return float64(size) / (1 << 20) / time.Since(start).Seconds()
	}
	var cpRate, migRate, migDuring, readAlone, readDuring float64
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		s.mustCLI("cp", "-q", "sluice:/b/f", "sluice:/b/copy")
		cpRate += float64(size) / (1 << 20) / time.Since(start).Seconds()
		s.mustCLI("rm", "/b/copy")

		readAlone += readAll()

		start = time.Now()
		s.mustCLI("migrate", "-q", "--stripe-count", "4", "/b/f")
		migRate += float64(size) / (1 << 20) / time.Since(start).Seconds()
		var wg sync.WaitGroup
		var during float64
		done := make(chan struct{})
		wg.Go(func() {
			// 8 MiB reads of the other file for as long as the migration runs.
			f, err := c.Open(ctx, "/b/other")
			if err != nil {
				b.Error(err)
				return
			}
			defer f.Close()
			buf := make([]byte, 8<<20)
			start := time.Now()
			var n int64
			for off := int64(0); ; off = (off + int64(len(buf))) % size {
				select {
				case <-done:
					during = float64(n) / (1 << 20) / time.Since(start).Seconds()
					return
				default:
				}
				k, err := f.ReadAt(buf, off)
				if err != nil && err != io.EOF {
					b.Error(err)
					return
				}
				n += int64(k)
			}
		})
		start = time.Now()
		s.mustCLI("migrate", "-q", "--stripe-count", "1", "--rate", rate, "/b/f")
		migDuring += float64(size) / (1 << 20) / time.Since(start).Seconds()
		close(done)
		wg.Wait()
		readDuring += during
	}
	n := float64(b.N)
	b.ReportMetric(migRate/n, "migrate-MiB/s")
	b.ReportMetric(cpRate/n, "cp-MiB/s")
	b.ReportMetric(migRate/cpRate, "migrate/cp")
	b.ReportMetric(migDuring/n, "migrate-beside-reader-MiB/s")
	b.ReportMetric(readAlone/n, "read-alone-MiB/s")
	b.ReportMetric(readDuring/n, "read-during-MiB/s")
	b.ReportMetric(readDuring/readAlone, "read-kept")
}
