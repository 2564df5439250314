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
	var maps int
	for i := range 2 {
		if h, err := f.SeekHole(ctx, 0); h != 2<<20 || err != nil {
			t.Errorf("SEEK_HOLE from 0: %d, %v; want the end (all data)", h, err)
		}
		if d, err := f.SeekData(ctx, 100); d != 100 || err != nil {
			t.Errorf("SEEK_DATA from 100: %d, %v; want 100", d, err)
		}
		if i == 0 {
			maps = old.Refused(wire.OpChunkMap) // one request per chunk, in parallel
		}
	}
	if n, err := f.DataBytes(ctx); n != 2<<20 || err != nil {
		t.Errorf("DataBytes: %d, %v; want the size", n, err)
	}
	var punches int
	for i, off := range []int64{1<<20 + 100, 1<<20 + 300<<10} {
		if err := f.ZeroRange(ctx, off, 128<<10, true); err != nil {
			t.Fatal(err)
		}
		clear(want[off : off+128<<10])
		if i == 0 {
			punches = old.Refused(wire.OpChunkPunch)
		}
	}
	got := make([]byte, len(want))
	if n, err := f.ReadAt(got, 0); n != len(want) || err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the punch through older targets: %d bytes, %v, equal %v", n, err, bytes.Equal(got, want))
	}
	m, p := old.Refused(wire.OpChunkMap), old.Refused(wire.OpChunkPunch)
	if maps == 0 || punches == 0 || m != maps || p != punches {
		t.Fatalf("the older targets refused %d chunk maps and %d punches in the first seek and punch, %d and %d in all; want some, then no more (the client stops asking)", maps, punches, m, p)
	}
	t.Logf("refused: %d chunk maps, %d punches", m, p)
}
