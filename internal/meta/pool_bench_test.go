package meta

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/sluice-fs/sluice/internal/cluster"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// BenchmarkCreatePool compares creating files in a directory whose layout
// names a pool (one more point read per create, and the pool filter) with
// a directory without one, on pebble with the real cluster manager and
// four healthy targets. Report the ratio pool/nopool of one run.
func BenchmarkCreatePool(b *testing.B) {
	ctx := context.Background()
	for _, pooled := range []bool{false, true} {
		name := "nopool"
		if pooled {
			name = "pool"
		}
		b.Run(fmt.Sprintf("%s/g=16", name), func(b *testing.B) {
			db, err := kv.OpenPebble(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			cm, err := cluster.New(ctx, cluster.Options{DB: db, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cm.Close() })
			req := &wire.HeartbeatReq{Node: cluster.LocalNode, Addr: "127.0.0.1:1", Incarnation: 1}
			for id := range placement.TargetID(4) {
				if err := cm.RegisterTarget(ctx, id+1, "127.0.0.1:1"); err != nil {
					b.Fatal(err)
				}
				req.Targets = append(req.Targets, wire.TargetStat{Target: id + 1, Capacity: 1 << 40, Free: 1 << 39})
			}
			if _, err := cm.Heartbeat(ctx, req); err != nil {
				b.Fatal(err)
			}
			s := newTestService(b, db, cm)
			d := mustMkdir(b, s, RootIno, "d")
			if pooled {
				if err := cm.ChangePool(ctx, &wire.PoolChangeReq{Kind: wire.PoolCreate, Name: "p", Targets: []placement.TargetID{1, 2}}); err != nil {
					b.Fatal(err)
				}
				if err := s.SetPool(ctx, d.Ino, "p"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			benchCreate(b, s, d.Ino, fmt.Sprintf("f%d-", b.N), b.N, 16)
			b.StopTimer()
			a, err := s.Lookup(ctx, d.Ino, fmt.Sprintf("f%d-0", b.N))
			if err != nil {
				b.Fatal(err)
			}
			l, err := s.GetLayout(ctx, a.Ino)
			if err != nil {
				b.Fatal(err)
			}
			if pooled && (len(l.Chains) != 2 || l.Chains[0] > 2 || l.Chains[1] > 2) {
				b.Fatalf("file in the pool's directory on chains %v", l.Chains)
			}
		})
	}
}
