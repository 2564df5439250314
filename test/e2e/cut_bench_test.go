package e2e

import (
	"context"
	"testing"

	"github.com/sluice-fs/sluice/client"
)

// BenchmarkCutCost measures what cut generations (ADR 0031) cost a
// client: "shrink" writes 256 KiB, syncs and truncates to 100 bytes (the
// truncate now holds a cut: one more metadata request); "rewrite" writes
// the same 64 KiB 16 times without syncing, then syncs (an overlapping
// flush now waits for the previous one's size commit, not only its
// data); "append" writes 1 MiB past the end and syncs (the common path).
// One server, a file of 4 stripes of 64 KiB.
func BenchmarkCutCost(b *testing.B) {
	s := startServer(b, "")
	c := s.client()
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/b", 0o755); err != nil {
		b.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/b", client.Layout{StripeCount: 4, StripeSize: 64 << 10}); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	open := func(b *testing.B, name string) *client.File {
		f, err := c.OpenFile(ctx, "/b/"+name, client.O_RDWR|client.O_CREATE|client.O_TRUNC, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		return f
	}
	b.Run("shrink", func(b *testing.B) {
		f := open(b, "shrink")
		for b.Loop() {
			if _, err := f.WriteAt(buf[:256<<10], 0); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			if err := f.Truncate(ctx, 100); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rewrite", func(b *testing.B) {
		f := open(b, "rewrite")
		for b.Loop() {
			for range 16 {
				if _, err := f.WriteAt(buf[:64<<10], 0); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		f := open(b, "append")
		var off int64
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			if _, err := f.WriteAt(buf, off); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			off += int64(len(buf))
		}
	})
}
