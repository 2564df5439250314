package e2e

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/sluice-fs/sluice/client"
)

// TestOverwriteThenTruncate is issue 12's sequence through the client
// library: write A over [0, 200000), B over [20000, 60000), optionally
// sync, truncate to 50000, re-open and read. Before the fix the write-back
// buffer sent the two ranges as concurrent flushes, and the older A could
// land after B: the read then showed A at offset 20000.
func TestOverwriteThenTruncate(t *testing.T) {
	s := startServer(t, "")
	c := s.client()
	ctx := context.Background()
	for _, lay := range []client.Layout{{StripeCount: 1}, {StripeCount: 4, StripeSize: 64 << 10}, {}} {
		dir := fmt.Sprintf("/l%d-%d", lay.StripeCount, lay.StripeSize)
		if err := c.Mkdir(ctx, dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := c.SetLayout(ctx, dir, lay); err != nil {
			t.Fatal(err)
		}
		want := append(bytes.Repeat([]byte{'A'}, 20000), bytes.Repeat([]byte{'B'}, 30000)...)
		bad := 0
		const rounds = 60
		for i := range rounds {
			p := fmt.Sprintf("%s/f%d", dir, i%4)
			f, err := c.OpenFile(ctx, p, client.O_RDWR|client.O_CREATE|client.O_TRUNC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(bytes.Repeat([]byte{'A'}, 200000), 0); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(bytes.Repeat([]byte{'B'}, 40000), 20000); err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Truncate(ctx, 50000); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := readFile(c, p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				bad++
				if bad == 1 {
					t.Errorf("layout %+v round %d: read %d bytes, first difference at %d", lay, i, len(got), firstDiff(got, want))
				}
			}
		}
		if bad > 0 {
			t.Errorf("layout %+v: %d of %d rounds read stale data", lay, bad, rounds)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestReadRacingTruncate reads near the end of a file through
// ReadAtParallel (the mount's read path, which does not hold the File's
// lock while it asks the metadata for the size) while the file is
// truncated: the File must not learn the size from before the truncate
// and then report it (the mount gives it to the kernel as the file size
// while writes are pending). Found by a 1,000,000-operation exerciser run
// through the mount: a read past the end returned zeros.
func TestReadRacingTruncate(t *testing.T) {
	s := startServer(t, "")
	c := s.client()
	ctx := context.Background()
	bad := 0
	for i := range 150 {
		f, err := c.Create(ctx, fmt.Sprintf("/race%d", i%5))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(bytes.Repeat([]byte{'x'}, 2<<20), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		for range 3 {
			go func() {
				defer func() { done <- struct{}{} }()
				buf := make([]byte, 4096)
				for k := range 40 {
					f.ReadAtParallel(ctx, buf, int64(2<<20-100-k)) // past the end: asks for the size
				}
			}()
		}
		if err := f.Truncate(ctx, 1000); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			<-done
		}
		if n := f.KnownSize(); n != 1000 {
			bad++
			if bad == 1 {
				t.Errorf("round %d: the File knows size %d after a truncate to 1000", i, n)
			}
		}
		f.Close()
	}
	if bad > 0 {
		t.Errorf("%d of 150 rounds kept a size from before the truncate", bad)
	}
}
