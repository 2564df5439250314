package fuse

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// writerAt is one of the three writers of TestConcurrentWriters: a file
// open on one of two mounts, or through the client library.
type writerAt interface {
	io.WriterAt
	Sync() error
	Close() error
}

// TestConcurrentWriters writes one file from three clients at once: a
// `sluice serve --mount`, a separate `sluice mount` process and the client
// library. First each writes its own interleaved blocks (odd sizes, so
// that neighbours share 64 KiB checksum blocks and stripes) in several
// passes at the same time, each block as a draft and then its data; then, in rounds, all three write one range in a
// random order, each after the previous one's fsync returned, so the last
// must win. After every round a fresh open on each client reads the range,
// and at the end the whole file reads back the same through all three.
func TestConcurrentWriters(t *testing.T) {
	requireFUSE(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	_, mpA, _, addr := startServeMount(t)
	mB := startMount(t, addr)
	c := proctest.Client(t, addr)
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/conc", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/conc", client.Layout{StripeCount: 4, StripeSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	const name = "/conc/shared"
	paths := []string{filepath.Join(mpA, name), filepath.Join(mB.dir, name)}
	if err := os.WriteFile(paths[0], nil, 0o666); err != nil {
		t.Fatal(err)
	}
	open := func() []writerAt {
		var ws []writerAt
		for _, p := range paths {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, f)
		}
		f, err := c.OpenFile(ctx, name, client.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		return append(ws, f)
	}
	// readAll reads the file through client k with a fresh open.
	readAll := func(k int) []byte {
		if k < 2 {
			b, err := os.ReadFile(paths[k])
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		f, err := c.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<40))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	clients := []string{"serve --mount", "sluice mount", "client library"}
	pattern := func(parts ...int) []byte {
		g := rand.NewPCG(seed, uint64(parts[0]*1_000_003+parts[1]*1009+parts[2]))
		b := make([]byte, parts[3])
		for i := range b {
			b[i] = byte(g.Uint64())
		}
		return b
	}

	// Disjoint blocks, written concurrently.
	const block, blocks, passes = 50_001, 60, 3
	want := make([]byte, block*blocks)
	ws := open()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	for w := range 3 {
		order := rng.Perm(blocks)
		syncs := rng.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range passes {
				for i, b := range order {
					if b%3 != w {
						continue
					}
					// A draft first, then the block's data over it: a
					// write-back buffer must not let the draft land last.
					if _, err := ws[w].WriteAt(pattern(w, b, p+100, block), int64(b*block)); err != nil {
						errc <- fmt.Errorf("%s: write block %d: %v", clients[w], b, err)
						return
					}
					if _, err := ws[w].WriteAt(pattern(w, b, p, block), int64(b*block)); err != nil {
						errc <- fmt.Errorf("%s: write block %d: %v", clients[w], b, err)
						return
					}
					if syncs>>(i%64)&1 == 1 && i%5 == 0 {
						if err := ws[w].Sync(); err != nil {
							errc <- fmt.Errorf("%s: fsync: %v", clients[w], err)
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for b := range blocks {
		copy(want[b*block:], pattern(b%3, b, passes-1, block))
	}
	for w, f := range ws {
		if err := f.Close(); err != nil {
			t.Fatalf("%s: close: %v", clients[w], err)
		}
	}
	for k := range 3 {
		if got := readAll(k); !bytes.Equal(got, want) {
			t.Fatalf("disjoint writers: read through %s: %d bytes, want %d, first difference at %d", clients[k], len(got), len(want), firstDiffAt(got, want))
		}
	}

	// Overlapping ranges, ordered by fsync.
	ws = open()
	for r := range 30 {
		off := rng.IntN(len(want) + 100_000)
		n := 1 + rng.IntN(400_000)
		order := rng.Perm(3)
		for _, w := range order {
			data := pattern(w, 1000+r, 7, n)
			if _, err := ws[w].WriteAt(data, int64(off)); err != nil {
				t.Fatalf("round %d: %s: write: %v", r, clients[w], err)
			}
			if err := ws[w].Sync(); err != nil {
				t.Fatalf("round %d: %s: fsync: %v", r, clients[w], err)
			}
			if end := off + n; end > len(want) {
				want = append(want, make([]byte, end-len(want))...)
			}
			copy(want[off:], data)
		}
		for k := range 3 {
			got := readAll(k)
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d (range %d+%d, writers %v, last %s): read through %s: %d bytes, want %d, first difference at %d",
					r, off, n, order, clients[order[2]], clients[k], len(got), len(want), firstDiffAt(got, want))
			}
		}
	}
	for w, f := range ws {
		if err := f.Close(); err != nil {
			t.Fatalf("%s: close: %v", clients[w], err)
		}
	}
}

func firstDiffAt(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
