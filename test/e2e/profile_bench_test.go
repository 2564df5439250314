package e2e

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// BenchmarkProfileOverhead measures what recording costs a job: the same
// client runs the same work with its job recorded and not, alternating
// rounds (so that the machine's noise hits both), and reports each rate
// and their ratio. Two workloads: reading 150 KiB files whole (a training
// loader, 8 readers) and creating, closing and removing empty files (8
// workers), the two that make the most records per byte.
//
//	go test -run '^$' -bench ProfileOverhead -benchtime 1x ./test/e2e
func BenchmarkProfileOverhead(b *testing.B) {
	s := startServer(b, "")
	ctx := context.Background()
	setup := s.client()
	const files, size, workers = 400, 150 << 10, 8
	if err := setup.MkdirAll(ctx, "/samples", 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range files {
		if err := proctest.WriteFile(ctx, setup, fmt.Sprintf("/samples/s%04d", i), randBytes(uint64(i), size)); err != nil {
			b.Fatal(err)
		}
	}
	c := jobClient(b, s.addr, "ov")

	reads := func(d time.Duration) float64 {
		var n atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 256<<10)
				for i := w; time.Since(start) < d; i = (i + workers) % files {
					f, err := c.Open(ctx, fmt.Sprintf("/samples/s%04d", i))
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
						b.Error(err)
					}
					f.Close()
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(start).Seconds()
	}
	round := 0
	creates := func(d time.Duration) float64 {
		round++
		dir := fmt.Sprintf("/meta%d", round)
		if err := c.Mkdir(ctx, dir, 0o755); err != nil {
			b.Fatal(err)
		}
		var n atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Since(start) < d; i++ {
					p := fmt.Sprintf("%s/w%d-%d", dir, w, i)
					f, err := c.Create(ctx, p)
					if err != nil {
						b.Error(err)
						return
					}
					f.Close()
					if err := c.Remove(ctx, p); err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(start).Seconds()
	}

	recording := 0
	record := func(on bool) {
		if on {
			recording++
			name := fmt.Sprintf("ov%d", recording)
			s.mustCLI("profile", "record", "--job", "ov", "--name", name, "--duration", "1h", "--detach")
			waitClients(b, setup, name, 1)
			return
		}
		s.mustCLI("profile", "stop", fmt.Sprintf("ov%d", recording))
		time.Sleep(300 * time.Millisecond) // the client's next checks see it stopped
	}
	for _, w := range []struct {
		name string
		run  func(time.Duration) float64
		unit string
	}{{"read-150KiB", reads, "files/s"}, {"create-unlink", creates, "files/s"}} {
		// Rounds in the order off, on, on, off, off, on, ...: a drift of
		// the machine over the run (the KV's compactions, other jobs)
		// weighs on both alike.
		var off, on float64
		const rounds = 4
		for i := range 2 * rounds {
			rec := i%4 == 1 || i%4 == 2
			if rec && i%4 == 1 {
				record(true)
			}
			if r := w.run(3 * time.Second); rec {
				on += r
			} else {
				off += r
			}
			if rec && i%4 == 2 {
				record(false)
			}
		}
		off, on = off/rounds, on/rounds
		b.Logf("%s: %.0f %s unrecorded, %.0f recorded: %.3f", w.name, off, w.unit, on, on/off)
		b.ReportMetric(on/off, w.name+"-recorded/unrecorded")
	}
	l, err := setup.Profiles(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range l {
		if p.Dropped > 0 {
			b.Errorf("recording %s dropped %d records", p.Name, p.Dropped)
		}
	}
}
