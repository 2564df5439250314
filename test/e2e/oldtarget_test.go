package e2e

import (
	"bytes"
	"context"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestOlderTargets: against targets from before the chunk map and the
// punch (a proxy on loopback answers OpChunkMap and OpChunkPunch "not
// supported", as such targets do), SEEK_DATA and SEEK_HOLE take the file
// for all data, DataBytes counts its size, and fallocate's punch writes
// zeros instead; the client asks each once, then stops asking, and the
// file's bytes are right.
func TestOlderTargets(t *testing.T) {
	s := startServer(t, "")
	old := proctest.StartOlderNode(t, s.addr, wire.OpChunkMap, wire.OpChunkPunch)
	c := proctest.Client(t, old.Addr)
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/s", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/s", client.Layout{StripeCount: 4, StripeSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	f, err := c.Create(ctx, "/s/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := make([]byte, 2<<20)
	copy(want[1<<20:], bytes.Repeat([]byte{'d'}, 64<<10)) // a hole before it, and after
	if _, err := f.WriteAt(want[1<<20:1<<20+64<<10], 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(ctx, 2<<20); err != nil {
		t.Fatal(err)
	}
	// The first seek asks each of the file's 4 chunks at most once, in
	// parallel; a refusal may come back before the others are sent or
	// counted, so the refusals are counted once all the seeks are done:
	// a client that kept asking would pass 4 within 6 seeks.
	const chunks = 4
	for range 6 {
		if h, err := f.SeekHole(ctx, 0); h != 2<<20 || err != nil {
			t.Errorf("SEEK_HOLE from 0: %d, %v; want the end (all data)", h, err)
		}
		if d, err := f.SeekData(ctx, 100); d != 100 || err != nil {
			t.Errorf("SEEK_DATA from 100: %d, %v; want 100", d, err)
		}
	}
	if n, err := f.DataBytes(ctx); n != 2<<20 || err != nil {
		t.Errorf("DataBytes: %d, %v; want the size", n, err)
	}
	for i := range 6 {
		off := int64(1<<20 + 100 + i*150<<10)
		if off+128<<10 > 2<<20 {
			off = int64(i) * 150 << 10
		}
		if err := f.ZeroRange(ctx, off, 128<<10, true); err != nil {
			t.Fatal(err)
		}
		clear(want[off : off+128<<10])
	}
	got := make([]byte, len(want))
	if n, err := f.ReadAt(got, 0); n != len(want) || err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the punch through older targets: %d bytes, %v, equal %v", n, err, bytes.Equal(got, want))
	}
	m, p := old.Refused(wire.OpChunkMap), old.Refused(wire.OpChunkPunch)
	if m < 1 || m > chunks || p < 1 || p > chunks {
		t.Fatalf("the older targets refused %d chunk maps over 6 seeks and %d punches over 6 zeroed ranges; want 1-%d each (the client asks once, then stops)", m, p, chunks)
	}
	t.Logf("refused: %d chunk maps, %d punches", m, p)
}
