package e2e

import (
	"context"
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// BenchmarkLayoutLease measures what the layout lease (ADR 0023,
// addendum) costs a File that stays open: 64 KiB reads at random offsets
// of a 64 MiB file of 4 stripes (cached by the target), through a client
// with the default lease (one minute: no renewal within the benchmark)
// and through one whose lease is a nanosecond (every read asks the
// metadata service for the layout first), in the same run:
//
//	go test -run '^$' -bench LayoutLease -benchtime 5s ./test/e2e
//
// The difference per operation is one renewal (OpGetLayout); with the
// default lease a File pays it once a minute.
func BenchmarkLayoutLease(b *testing.B) {
	s := startServer(b, "", "--http", "127.0.0.1:0")
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const size, piece = 64 << 20, 64 << 10
	w := s.client()
	if err := w.Mkdir(ctx, "/lease", 0o755); err != nil {
		b.Fatal(err)
	}
	if err := w.SetLayout(ctx, "/lease", client.Layout{StripeCount: 4, StripeSize: 1 << 20}); err != nil {
		b.Fatal(err)
	}
	f, err := w.Create(ctx, "/lease/f")
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + 3)
	}
	writeN(b, f, size, buf)
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	for _, lease := range []struct {
		name string
		d    time.Duration
	}{{"default", 0}, {"renew-every-read", time.Nanosecond}} {
		b.Run(lease.name, func(b *testing.B) {
			c, err := client.New(ctx, client.Options{Server: s.addr, LayoutLease: lease.d})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			f, err := c.Open(ctx, "/lease/f")
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			p := make([]byte, piece)
			rng := rand.New(rand.NewPCG(1, 2))
			b.SetBytes(piece)
			defer serverCPU(b, s.proc.Cmd.Process.Pid)()
			layoutRequests := func() float64 {
				return proctest.MetricSum(proctest.Metrics(b, admin), "sluice_op_duration_seconds_count", `op="getlayout"`)
			}
			before := layoutRequests()
			defer func() { b.ReportMetric((layoutRequests()-before)/float64(b.N), "layout-req/op") }()
			b.ResetTimer()
			for range b.N {
				off := rng.Int64N(size/piece) * piece
				if n, err := f.ReadAt(p, off); err != nil || n != piece {
					b.Fatalf("read at %d: %d bytes, %v", off, n, err)
				}
				if p[0] != buf[off%int64(len(buf))] {
					b.Fatalf("read at %d: wrong bytes", off)
				}
			}
		})
	}
}
