package meta

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sluice-fs/sluice/internal/kv/etcdtest"
)

// BenchmarkEtcd compares create and stat (lookup) on the etcd engine with
// the pebble engine, in one run. The etcd server is in-process, on
// loopback, a single member, and syncs its log as a production one does
// (etcd-nosync: with --unsafe-no-fsync, to separate disk from protocol
// costs); every op is a gRPC round trip or more, where pebble's are
// function calls.
func BenchmarkEtcd(b *testing.B) {
	synced := etcdtest.StartServerFor(b, etcdtest.Options{Fsync: true})
	nosync := etcdtest.StartServerFor(b, etcdtest.Options{})
	var prefixes atomic.Int64
	engines := []struct {
		name string
		open func(b *testing.B) *Service
	}{
		{"pebble", newPebbleService},
		{"etcd", func(b *testing.B) *Service {
			db := openEtcdPrefix(b, synced.Endpoints(), fmt.Sprintf("bench%d/", prefixes.Add(1)))
			return newTestService(b, db, newFakeTargets(4))
		}},
		{"etcd-nosync", func(b *testing.B) *Service {
			db := openEtcdPrefix(b, nosync.Endpoints(), fmt.Sprintf("bench%d/", prefixes.Add(1)))
			return newTestService(b, db, newFakeTargets(4))
		}},
	}
	for _, g := range benchGoroutines {
		for _, e := range engines {
			b.Run(fmt.Sprintf("create/%s/g=%d", e.name, g), func(b *testing.B) {
				s := e.open(b)
				d := mustMkdir(b, s, RootIno, "d")
				b.ReportAllocs()
				b.ResetTimer()
				benchCreate(b, s, d.Ino, fmt.Sprintf("f%d-", b.N), b.N, g)
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})
		}
	}
	const files = 2000
	for _, g := range benchGoroutines {
		for _, e := range engines {
			b.Run(fmt.Sprintf("stat/%s/g=%d", e.name, g), func(b *testing.B) {
				s := e.open(b)
				d := mustMkdir(b, s, RootIno, "d")
				benchCreate(b, s, d.Ino, "f", files, 16)
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				err := parallel(b.N, g, func(i int) error {
					_, err := s.Lookup(ctx, d.Ino, fmt.Sprintf("f%d", i%files))
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})
		}
	}
}
