package fuse

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
)

// TestTruncateRacingWriterMounts is test/e2e's TestTruncateRacingWriter
// through two `sluice mount` processes: truncate(2) to 100 bytes of a
// 1 MiB file through one mount races pwrite(2) of 1,000 bytes at 500,000
// and fsync(2) through the other, round after round; then the file, read
// through the library, must be what one of the two orders leaves: the cut
// size, and zeros past it once grown again, or the write's end with its
// bytes. Never an old byte past the cut, never a lost write (the race cut
// generations close, ADR 0031). SLUICE_TRUNCRACE_ROUNDS sets the rounds
// (default 60).
func TestTruncateRacingWriterMounts(t *testing.T) {
	requireFUSE(t)
	rounds, err := fsx.TruncRaceRounds(60)
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "", "")
	c := srv.client()
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/r", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/r", client.Layout{StripeCount: 4, StripeSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	m1, m2 := startMount(t, srv.addr), startMount(t, srv.addr)
	race := fsx.TruncRace{Size: 1 << 20, Cut: 100, At: 500000, Old: 'a', Mark: bytes.Repeat([]byte{'X'}, 1000)}
	old := bytes.Repeat([]byte{race.Old}, int(race.Size))
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0x7a7c))
	var orders [2]int
	for i := range rounds {
		name := fmt.Sprintf("f%d", i%4)
		if err := writeSynced(m1.path("r", name), old); err != nil {
			t.Fatal(err)
		}
		f2, err := os.OpenFile(m2.path("r", name), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(rng.IntN(3000)-1500) * time.Microsecond
		var wg sync.WaitGroup
		var terr, werr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			time.Sleep(-delay)
			terr = os.Truncate(m1.path("r", name), race.Cut)
		}()
		go func() {
			defer wg.Done()
			time.Sleep(delay)
			if _, err := f2.WriteAt(race.Mark, race.At); err != nil {
				werr = err
				return
			}
			werr = f2.Sync()
		}()
		wg.Wait()
		if err := f2.Close(); werr == nil {
			werr = err
		}
		if terr != nil || werr != nil {
			t.Fatalf("round %d: truncate: %v; write: %v", i, terr, werr)
		}
		got, ended := grownCopy(t, c, "/r/"+name, race.Size)
		o, err := race.Check(got, ended)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		orders[o]++
	}
	t.Logf("seed %d, %d rounds: written then cut %d, cut then written %d", seed, rounds, orders[fsx.WrittenThenCut], orders[fsx.CutThenWritten])
}

// writeSynced writes p to the file at path (created or cut to 0) and
// fsyncs it.
func writeSynced(path string, p []byte) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(p); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// grownCopy returns the size of the file at p, read through library
// client c, and its bytes once grown to size (a truncate up: bytes past
// its size must read as zeros).
func grownCopy(t *testing.T, c *client.Client, p string, size int64) ([]byte, int64) {
	t.Helper()
	ctx := context.Background()
	f, err := c.OpenFile(ctx, p, client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(ctx, size); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.NewSectionReader(f, 0, size))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != size {
		t.Fatalf("%s: %d bytes after growing to %d", p, len(got), size)
	}
	return got, st.Size()
}
