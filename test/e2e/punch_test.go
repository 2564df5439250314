package e2e

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestZeroRangeFreesSpace: fallocate's PUNCH_HOLE and ZERO_RANGE through
// the library (File.ZeroRange) make the range read as zeros, keep the
// file's size, and give the space of the whole 64 KiB blocks back on the
// targets (wire.OpChunkPunch): the file's chunk data files hold at least
// 5 MiB less after 6 MiB of an 8 MiB file striped over 4 chunks is
// zeroed. Before, the range was written as zeros and nothing was freed.
func TestZeroRangeFreesSpace(t *testing.T) {
	s := startServer(t, "")
	c := s.client()
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/p", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/p", client.Layout{StripeCount: 4, StripeSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 8<<20)
	r := rand.New(rand.NewPCG(5, 5))
	for i := range want {
		want[i] = byte(r.Uint32() | 1)
	}
	f, err := c.Create(ctx, "/p/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	before := chunkSpace(t, s.dataDir, f.Ino())
	const off, n = 1<<20 + 100, 6 << 20
	if err := f.ZeroRange(ctx, off, n, true); err != nil {
		t.Fatal(err)
	}
	clear(want[off : off+n])
	// Zeros across the end without keepSize: the file grows.
	if err := f.ZeroRange(ctx, 8<<20-1000, 3000, false); err != nil {
		t.Fatal(err)
	}
	clear(want[8<<20-1000:])
	want = append(want, make([]byte, 2000)...)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	after := chunkSpace(t, s.dataDir, f.Ino())
	if before-after < 5<<20 {
		t.Fatalf("the file's chunk data files hold %d bytes, %d before zeroing 6 MiB: want at least 5 MiB freed", after, before)
	}
	g, err := c.Open(ctx, "/p/f")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	got, err := io.ReadAll(g)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d bytes, want %d", len(got), len(want))
	}
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Fatalf("byte %d is %#x, want %#x", i, got[i], want[i])
	}
	t.Logf("chunk data files of the 8 MiB file: %d bytes before, %d after zeroing 6 MiB", before, after)
}

// chunkSpace is the space held by inode ino's chunk data files under
// the server's data directory (proctest.ChunkSpace), which must be some.
func chunkSpace(t *testing.T, dataDir string, ino uint64) int64 {
	t.Helper()
	n := proctest.ChunkSpace(t, []string{dataDir}, ino)
	if n == 0 {
		t.Fatalf("no chunk data of inode %d under %s", ino, dataDir)
	}
	return n
}
