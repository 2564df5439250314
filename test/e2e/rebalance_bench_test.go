package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkRebalance measures what a foreground reader gets while `sluice
// rebalance` runs at its default rate (32 MiB/s per migration) against the
// same reader alone, in the same run: 1 MiB reads of a 256 MiB file on
// targets the rebalance does not empty, throughput and p99 latency.
// Eight 64 MiB files on target 1 are spread by the rebalance.
//
//	go test -run '^$' -bench Rebalance -benchtime 1x ./test/e2e
//
// SLUICE_REBALANCE_RATE sets another --rate.
func BenchmarkRebalance(b *testing.B) {
	s := startServer(b, "")
	c := s.client()
	ctx := context.Background()
	s.mustCLI("pool", "create", "one", "1")
	s.mustCLI("pool", "create", "rest", "2", "3", "4") // the reader's file stays off target 1
	s.mustCLI("mkdir", "/hot", "/fg")
	s.mustCLI("layout", "set", "/hot", "--pool", "one", "--stripe-count", "1")
	s.mustCLI("layout", "set", "/fg", "--pool", "rest", "--stripe-count", "3")
	write := func(p string, size int) {
		f, err := c.Create(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		chunk := randBytes(9, 8<<20)
		for off := 0; off < size; off += len(chunk) {
			if _, err := f.Write(chunk); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 8 {
		write(fmt.Sprintf("/hot/f%d", i), 64<<20)
	}
	write("/fg/data", 256<<20)
	s.mustCLI("layout", "set", "/hot", "--pool", "")

	// read reads /fg/data in 1 MiB pieces until stop is closed (or for d
	// if stop is nil); it returns MiB/s and the p99 latency.
	read := func(stop <-chan struct{}, d time.Duration) (float64, time.Duration) {
		f, err := c.Open(ctx, "/fg/data")
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 1<<20)
		var lat []time.Duration
		start := time.Now()
		for off := int64(0); ; off = (off + int64(len(buf))) % (256 << 20) {
			if stop == nil && time.Since(start) > d {
				break
			}
			select {
			case <-stop:
				goto done
			default:
			}
			t0 := time.Now()
			if _, err := f.ReadAt(buf, off); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
	done:
		secs := time.Since(start).Seconds()
		slices.Sort(lat)
		return float64(len(lat)) / secs, lat[len(lat)*99/100]
	}
	var alone, during float64
	var p99Alone, p99During time.Duration
	for i := range b.N {
		if i == 0 {
			b.Logf("sluice rebalance --dry-run:\n%s", s.mustCLI("rebalance", "--dry-run", "--band", "0.000001"))
		}
		a, pa := read(nil, 5*time.Second)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var dr float64
		var pd time.Duration
		wg.Go(func() { dr, pd = read(stop, 0) })
		start := time.Now()
		args := []string{"rebalance", "-q", "--band", "0.000001"}
		if r := os.Getenv("SLUICE_REBALANCE_RATE"); r != "" {
			args = append(args, "--rate", r) // else the default rate
		}
		s.mustCLI(args...)
		took := time.Since(start)
		close(stop)
		wg.Wait()
		b.Logf("rebalance took %v", took.Round(time.Millisecond))
		alone, during = alone+a, during+dr
		p99Alone, p99During = p99Alone+pa, p99During+pd
		// Put the files back on target 1 for the next iteration.
		for i := range 8 {
			s.mustCLI("migrate", "-q", "--pool", "one", "--stripe-count", "1", fmt.Sprintf("/hot/f%d", i))
		}
	}
	n := float64(b.N)
	b.ReportMetric(alone/n, "read-alone-MiB/s")
	b.ReportMetric(during/n, "read-during-MiB/s")
	b.ReportMetric(during/alone, "read-kept")
	b.ReportMetric(float64(p99Alone.Microseconds())/n, "p99-alone-µs")
	b.ReportMetric(float64(p99During.Microseconds())/n, "p99-during-µs")
}
