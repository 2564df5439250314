package cluster

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Benchmarks of the cluster, each beside the single-node system
// (`sluice serve`, embedded engine, 4 targets) in the same run:
//
//	go test -run '^$' -bench . -benchtime 1x ./test/cluster

var servingLine = regexp.MustCompile(`sluice: serving on (\S+)`)

// singleNode starts `sluice serve` and returns its address.
func singleNode(b *testing.B) string {
	_, addr := proctest.Start(b, binary, nil, servingLine, "serve", "--data-dir", b.TempDir(), "--listen", "127.0.0.1:0", "--http", "")
	return addr
}

// seqWrite writes size bytes to a new file in 1 MiB writes and closes it
// (durable on every replica when Close returns).
func seqWrite(b *testing.B, c *client.Client, p string, size int64) {
	ctx := context.Background()
	f, err := c.Create(ctx, p)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSeqWrite: sequential write of 512 MiB per op, replicas=1 and
// replicas=2 on a 3-node cluster, and the single-node system.
func BenchmarkSeqWrite(b *testing.B) {
	const size = 512 << 20
	cl := proctest.StartCluster(b, binary, proctest.ClusterOptions{})
	cc := proctest.Client(b, cl.MetaAddrs())
	ctx := context.Background()
	for _, r := range []int{1, 2} {
		dir := fmt.Sprintf("/r%d", r)
		if err := cc.MkdirAll(ctx, dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := cc.SetLayout(ctx, dir, client.Layout{StripeSize: 1 << 20, StripeCount: 4, Replicas: r}); err != nil {
			b.Fatal(err)
		}
	}
	sc := proctest.Client(b, singleNode(b))
	b.Run("single-node", func(b *testing.B) {
		b.SetBytes(size)
		for i := range b.N {
			seqWrite(b, sc, fmt.Sprintf("/f%d", i), size)
		}
	})
	for _, r := range []int{1, 2} {
		b.Run(fmt.Sprintf("cluster-replicas=%d", r), func(b *testing.B) {
			b.SetBytes(size)
			for i := range b.N {
				seqWrite(b, cc, fmt.Sprintf("/r%d/f%d", r, i), size)
			}
		})
	}
}

// metaOps creates then stats n empty files with 16 workers and reports
// both rates.
func metaOps(b *testing.B, c *client.Client, dir string, n int) {
	ctx := context.Background()
	if err := c.MkdirAll(ctx, dir, 0o755); err != nil {
		b.Fatal(err)
	}
	run := func(op func(p string) error) float64 {
		var next atomic.Int64
		var wg sync.WaitGroup
		var failed atomic.Value
		start := time.Now()
		for range 16 {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= int64(n) {
						return
					}
					if err := op(fmt.Sprintf("%s/f%06d", dir, i)); err != nil {
						failed.Store(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		return float64(n) / time.Since(start).Seconds()
	}
	create := run(func(p string) error {
		f, err := c.Create(ctx, p)
		if err != nil {
			return err
		}
		return f.Close()
	})
	stat := run(func(p string) error { _, err := c.Stat(ctx, p); return err })
	b.ReportMetric(create, "creates/s")
	b.ReportMetric(stat, "stats/s")
}

// BenchmarkMetadata: create and stat of 5,000 empty files with 16 workers
// through two metadata services on etcd, and on the single-node system's
// embedded engine.
func BenchmarkMetadata(b *testing.B) {
	const n = 5000
	cl := proctest.StartCluster(b, binary, proctest.ClusterOptions{})
	cc := proctest.Client(b, cl.MetaAddrs())
	sc := proctest.Client(b, singleNode(b))
	b.Run("single-node-pebble", func(b *testing.B) {
		for i := range b.N {
			metaOps(b, sc, fmt.Sprintf("/m%d", i), n)
		}
	})
	b.Run("cluster-etcd", func(b *testing.B) {
		for i := range b.N {
			metaOps(b, cc, fmt.Sprintf("/m%d", i), n)
		}
	})
}

// BenchmarkRecovery measures the time from a storage node's kill -9 to
// the first write acknowledged after it by a writer that writes small
// files to 2-replica chains all along (with a 2 s heartbeat timeout).
func BenchmarkRecovery(b *testing.B) {
	for range b.N {
		cl := proctest.StartCluster(b, binary, proctest.ClusterOptions{})
		c := proctest.Client(b, cl.MetaAddrs())
		ctx := context.Background()
		if err := c.MkdirAll(ctx, "/r2", 0o755); err != nil {
			b.Fatal(err)
		}
		// Every chain of every node: stripe over all of them.
		if err := c.SetLayout(ctx, "/r2", client.Layout{StripeSize: 64 << 10, StripeCount: 6, Replicas: 2}); err != nil {
			b.Fatal(err)
		}
		data := make([]byte, 6*64<<10)
		write := func(i int) {
			if err := proctest.WriteFile(ctx, c, fmt.Sprintf("/r2/f%d", i), data); err != nil {
				b.Fatal(err)
			}
		}
		for i := range 20 {
			write(i)
		}
		cl.Nodes[1].Proc.Kill()
		killed := time.Now()
		write(20)
		first := time.Since(killed)
		var out time.Duration
		cl.WaitFor(b, 30*time.Second, "node2 out", func(info *wire.ClusterInfo) bool {
			out = time.Since(killed)
			return offlineOn(info, "node2")
		})
		b.ReportMetric(first.Seconds(), "s-to-first-write")
		b.ReportMetric(out.Seconds(), "s-to-chains-changed")
	}
}

// BenchmarkRereplicate: the time to restore the replica count after a
// storage node is lost, per GiB of file data (replicas=2, 3 nodes, 256 MiB
// in 8 files), beside the time it took to write that data in the same run.
// The restore is timed from the first replacement seen in the chain table
// (after --replace-after) to every chain serving 2 replicas off the dead
// node; about the dead node's share of the chains is copied.
func BenchmarkRereplicate(b *testing.B) {
	const files, size = 8, 32 << 20
	for range b.N {
		cl := proctest.StartCluster(b, binary, proctest.ClusterOptions{ReplaceAfter: time.Second})
		c := proctest.Client(b, cl.MetaAddrs())
		ctx := context.Background()
		if err := c.Mkdir(ctx, "/r2", 0o755); err != nil {
			b.Fatal(err)
		}
		if err := c.SetLayout(ctx, "/r2", client.Layout{StripeSize: 1 << 20, StripeCount: 6, Replicas: 2}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for i := range files {
			seqWrite(b, c, fmt.Sprintf("/r2/f%d", i), size)
		}
		wrote := time.Since(start)
		cl.Nodes[1].Proc.Kill()
		var first time.Time
		cl.WaitFor(b, 5*time.Minute, "chains rebuilt without node2", func(info *wire.ClusterInfo) bool {
			if first.IsZero() && !offlineOn(info, "node2") && !restoredOrDown(info) {
				first = time.Now()
			}
			return restored(info, "node2")
		})
		if first.IsZero() {
			first = time.Now()
		}
		took := time.Since(first)
		gib := float64(files*size) / (1 << 30)
		b.ReportMetric(took.Seconds()/gib, "s-restore/GiB")
		b.ReportMetric(wrote.Seconds()/gib, "s-write/GiB")
		b.ReportMetric(took.Seconds()/wrote.Seconds(), "restore/write")
	}
}
