package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sluice-fs/sluice/client"
)

// seekCase is one lseek(2) SEEK_DATA or SEEK_HOLE and what it must
// answer (-1: ENXIO, io.EOF in the library).
type seekCase struct {
	off  int64
	hole bool
	want int64
}

const kib = 1 << 10

// sparseCases is the map of the file writeSparse makes, striped over 4
// chunks of 64 KiB units: data [0, 10), [192 KiB, 300 KiB) (the write
// began at 200 KiB, the 64 KiB block it began in holds data from its
// start), [1 MiB, 1 MiB+64 KiB); size 2 MiB.
var sparseCases = []seekCase{
	{0, false, 0}, {0, true, 10},
	{10, false, 192 * kib}, {5, true, 10}, {10, true, 10},
	{192 * kib, true, 300 * kib}, {250 * kib, false, 250 * kib},
	{300 * kib, false, 1 << 20}, {1 << 20, true, 1<<20 + 64*kib},
	{1<<20 + 64*kib, false, -1}, {1<<20 + 64*kib, true, 1<<20 + 64*kib},
	{2<<20 - 1, true, 2<<20 - 1}, {2 << 20, true, -1}, {2 << 20, false, -1},
}

// writeSparse makes the file sparseCases describes through f, a new file
// open for writing (its first write goes past the inline limit: it starts
// at 1 MiB).
func writeSparse(ctx context.Context, t *testing.T, f *client.File) {
	t.Helper()
	for _, p := range []struct {
		off int64
		n   int
	}{{1 << 20, 64 * kib}, {200 * kib, 100 * kib}, {0, 10}} {
		if _, err := f.WriteAt(bytes.Repeat([]byte{'d'}, p.n), p.off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(ctx, 2<<20); err != nil {
		t.Fatal(err)
	}
}

// TestSeekDataHole: SEEK_DATA and SEEK_HOLE through the library
// (File.SeekData, SeekHole) find a striped file's data and holes at the
// 64 KiB blocks its chunks hold (wire.OpChunkMap), the file's end counts
// as a hole, and a punched range (ZeroRange) becomes one.
func TestSeekDataHole(t *testing.T) {
	s := startServer(t, "")
	c := s.client()
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/s", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/s", client.Layout{StripeCount: 4, StripeSize: 64 * kib}); err != nil {
		t.Fatal(err)
	}
	f, err := c.Create(ctx, "/s/f")
	if err != nil {
		t.Fatal(err)
	}
	writeSparse(ctx, t, f)
	check := func(what string, cases []seekCase) {
		t.Helper()
		for _, k := range cases {
			seek, name := f.SeekData, "SEEK_DATA"
			if k.hole {
				seek, name = f.SeekHole, "SEEK_HOLE"
			}
			got, err := seek(ctx, k.off)
			switch {
			case k.want < 0 && !errors.Is(err, io.EOF):
				t.Errorf("%s: %s from %d: %d, %v; want io.EOF", what, name, k.off, got, err)
			case k.want >= 0 && (err != nil || got != k.want):
				t.Errorf("%s: %s from %d: %d, %v; want %d", what, name, k.off, got, err, k.want)
			}
		}
	}
	// Before the writes' buffer went out: the File sends it first.
	check("written", sparseCases)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f, err = c.Open(ctx, "/s/f"); err != nil {
		t.Fatal(err)
	}
	check("reopened", sparseCases)
	// Stored: [0, 10), [192 KiB, 300 KiB), [1 MiB, 1 MiB+64 KiB).
	const stored = 10 + 108*kib + 64*kib
	if n, err := f.DataBytes(ctx); n != stored || err != nil {
		t.Errorf("DataBytes: %d, %v; want %d", n, err, stored)
	}
	if out := s.mustCLI("stat", "/s/f"); !strings.Contains(out, fmt.Sprintf("Stored: %d bytes (holes %d)", stored, 2<<20-stored)) {
		t.Errorf("sluice stat says\n%s\nwant Stored: %d bytes", out, stored)
	}
	if _, err := f.SeekData(ctx, -1); err == nil {
		t.Error("SEEK_DATA from -1 answered")
	}
	f.Close()

	// Punch the block at 192 KiB: the data there now starts at 256 KiB.
	if f, err = c.OpenFile(ctx, "/s/f", client.O_RDWR, 0); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.ZeroRange(ctx, 192*kib, 64*kib, true); err != nil {
		t.Fatal(err)
	}
	check("punched", []seekCase{{10, false, 256 * kib}, {192 * kib, true, 192 * kib}, {256 * kib, true, 300 * kib}})
	if n, err := f.DataBytes(ctx); n != stored-64*kib || err != nil {
		t.Errorf("DataBytes after the punch: %d, %v; want %d", n, err, stored-64*kib)
	}
	// A file of one inline piece is all data.
	g, err := c.Create(ctx, "/small")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if g, err = c.Open(ctx, "/small"); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if d, err := g.SeekData(ctx, 50); d != 50 || err != nil {
		t.Errorf("inline file: SEEK_DATA from 50: %d, %v; want 50", d, err)
	}
	if h, err := g.SeekHole(ctx, 0); h != 100 || err != nil {
		t.Errorf("inline file: SEEK_HOLE from 0: %d, %v; want 100 (its end)", h, err)
	}
}
