package meta

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Benchmarks of create, stat (lookup) and unlink in one directory, on the
// durable pebble engine (every op is a synced commit, grouped across
// goroutines), next to the same operations on a local directory
// (os.Create/os.Stat/os.Remove, which do not sync).

var benchGoroutines = []int{1, 16}

// parallel runs fn(i) for i in [0, n) on g goroutines.
func parallel(n, g int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	for range g {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

func newPebbleService(b *testing.B) *Service {
	b.Helper()
	db, err := kv.OpenPebble(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return newTestService(b, db, newFakeTargets(4))
}

func benchCreate(b *testing.B, s *Service, dir uint64, prefix string, n, g int) {
	ctx := context.Background()
	err := parallel(n, g, func(i int) error {
		_, err := s.Create(ctx, &wire.CreateReq{Parent: dir, Name: fmt.Sprintf("%s%d", prefix, i), Mode: 0o644, Exclusive: true})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkCreate(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run(fmt.Sprintf("meta/g=%d", g), func(b *testing.B) {
			s := newPebbleService(b)
			d := mustMkdir(b, s, RootIno, "d")
			b.ReportAllocs()
			b.ResetTimer()
			benchCreate(b, s, d.Ino, fmt.Sprintf("f%d-", b.N), b.N, g)
		})
		b.Run(fmt.Sprintf("localdir/g=%d", g), func(b *testing.B) {
			dir := b.TempDir()
			b.ReportAllocs()
			b.ResetTimer()
			err := parallel(b.N, g, func(i int) error {
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%d", i)))
				if err != nil {
					return err
				}
				return f.Close()
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

const statFiles = 10000

func BenchmarkStat(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run(fmt.Sprintf("meta/g=%d", g), func(b *testing.B) {
			s := newPebbleService(b)
			d := mustMkdir(b, s, RootIno, "d")
			benchCreate(b, s, d.Ino, "f", statFiles, 16)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			err := parallel(b.N, g, func(i int) error {
				_, err := s.Lookup(ctx, d.Ino, fmt.Sprintf("f%d", i%statFiles))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		})
		b.Run(fmt.Sprintf("localdir/g=%d", g), func(b *testing.B) {
			dir := b.TempDir()
			for i := range statFiles {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			err := parallel(b.N, g, func(i int) error {
				_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("f%d", i%statFiles)))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

func BenchmarkUnlink(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run(fmt.Sprintf("meta/g=%d", g), func(b *testing.B) {
			s := newPebbleService(b)
			d := mustMkdir(b, s, RootIno, "d")
			benchCreate(b, s, d.Ino, "f", b.N, 16)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			err := parallel(b.N, g, func(i int) error {
				return s.Unlink(ctx, d.Ino, fmt.Sprintf("f%d", i))
			})
			if err != nil {
				b.Fatal(err)
			}
		})
		b.Run(fmt.Sprintf("localdir/g=%d", g), func(b *testing.B) {
			dir := b.TempDir()
			for i := range b.N {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			err := parallel(b.N, g, func(i int) error {
				return os.Remove(filepath.Join(dir, fmt.Sprintf("f%d", i)))
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkReadDirCost measures what a page of a directory listing costs
// beside a lookup, each a request over a loopback connection to the
// metadata service: the per-entry cost that its QoS gate charges a listing
// in lookups (wire.ReadDirResp.QosCost, wire/qosmeta.go). It reports entries per lookup: how
// many listed entries cost what one lookup request does.
func BenchmarkReadDirCost(b *testing.B) {
	const files, page = 4096, 512
	s := newPebbleService(b)
	d := mustMkdir(b, s, RootIno, "d")
	benchCreate(b, s, d.Ino, "f", files, 16)
	srv := &wire.Server{}
	s.Register(srv)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(l)
	b.Cleanup(func() { srv.Close() })
	ctx := context.Background()
	c, err := wire.Dial(ctx, l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	var lookup float64
	b.Run("lookup", func(b *testing.B) {
		var a wire.Attr
		for i := range b.N {
			if _, err := c.Call(ctx, wire.OpLookup, &wire.NameReq{Parent: d.Ino, Name: fmt.Sprintf("f%d", i%files)}, nil, &a, nil); err != nil {
				b.Fatal(err)
			}
		}
		lookup = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	for _, plus := range []bool{false, true} {
		b.Run(fmt.Sprintf("readdir%d/plus=%v", page, plus), func(b *testing.B) {
			cursor := ""
			entries := 0
			for range b.N {
				var r wire.ReadDirResp
				if _, err := c.Call(ctx, wire.OpReadDir, &wire.ReadDirReq{Ino: d.Ino, Cursor: cursor, Limit: page, Plus: plus}, nil, &r, nil); err != nil {
					b.Fatal(err)
				}
				entries += len(r.Entries)
				cursor = r.Cursor
				if r.EOF {
					cursor = ""
				}
			}
			perPage := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(entries), "ns/entry")
			if lookup > 0 {
				// A page costs a request (as a lookup) plus its entries.
				b.ReportMetric(float64(entries)/float64(b.N)/max(perPage/lookup-1, 1e-9), "entries/lookup")
			}
		})
	}
}
