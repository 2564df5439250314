package kvcache

import (
	"bytes"
	"hash/crc32"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pagecache"
)

// readRange reads what a get handed out as a file range.
func readRange(t *testing.T, g got) []byte {
	t.Helper()
	b := make([]byte, g.file.N)
	if _, err := g.file.F.ReadAt(b, g.file.Off); err != nil {
		t.Fatal(err)
	}
	return b
}

// checkBlocks is the client's check of an unread get: each block of b
// (1 MiB, the last one short) against its stored CRC32C.
func checkBlocks(b []byte, sums []uint32) bool {
	if len(sums) != blocks(uint64(len(b))) {
		return false
	}
	for i, sum := range sums {
		if crc32.Checksum(b[i*blockSize:min((i+1)*blockSize, len(b))], castagnoli) != sum {
			return false
		}
	}
	return true
}

// TestShareGetUnread checks when a get hands out the value's file instead
// of reading it (ADR 0030): only for a range that starts on a block and
// ends on one or at the value's end, cached or not; that the range
// holds the value's bytes with the sums they were stored with; that it
// stays readable after the value is deleted; and that damage on disk
// sent unread fails the receiver's check, while the verified get reports
// it as corruption.
func TestShareGetUnread(t *testing.T) {
	t.Parallel()
	if !pagecache.Supported() {
		if os.Getenv("CI") == "true" {
			t.Fatal("the kernel has no cachestat(2) (CI=true: the tests need Linux 6.5 or later)")
		}
		t.Skip("the kernel has no cachestat(2) (Linux 6.5 or later)")
	}
	c := &clock{t: time.Unix(1e6, 0)}
	s, _ := newShare(t, 64<<20, 0, c)
	v := val(7, 3*blockSize+123)
	putAll(t, s, "a", v, 1)
	for _, r := range []struct {
		off, n uint64
		unread bool
	}{
		{0, MaxValue, true},
		{0, uint64(len(v)), true},
		{blockSize, blockSize, true},
		{blockSize, 2 * blockSize, true},
		{3 * blockSize, 123, true},
		{2 * blockSize, MaxValue, true},
		{5, blockSize, false},             // does not start on a block
		{0, blockSize + 1, false},         // ends inside a block
		{blockSize, blockSize / 2, false}, // the same
	} {
		g, err := s.get("a", r.off, r.n, true)
		if err != nil {
			t.Fatal(err)
		}
		end := min(r.off+r.n, uint64(len(v)))
		want := v[r.off:end]
		if (g.file != nil) != r.unread {
			t.Fatalf("get [%d, +%d): unread %v, want %v", r.off, r.n, g.file != nil, r.unread)
		}
		var b []byte
		if g.file != nil {
			b = readRange(t, g)
			if !checkBlocks(b, g.sums) {
				t.Fatalf("get [%d, +%d): the range fails the sums handed out with it", r.off, r.n)
			}
		} else {
			b = bytes.Clone(g.data)
		}
		if !bytes.Equal(b, want) || g.total != uint64(len(v)) {
			t.Fatalf("get [%d, +%d): %d bytes of %d, want %d", r.off, r.n, len(b), g.total, len(want))
		}
		g.release()
	}
	if n := s.stat().SentUnread; n != 6 {
		t.Fatalf("SentUnread %d, want 6", n)
	}

	// A range handed out stays readable after its value is deleted (the
	// open file keeps the bytes).
	g, err := s.get("a", 0, MaxValue, true)
	if err != nil || g.file == nil {
		t.Fatalf("get: unread %v, %v", g.file != nil, err)
	}
	s.del([]string{"a"})
	if b := readRange(t, g); !bytes.Equal(b, v) {
		t.Fatal("a range handed out changed when its value was deleted")
	}
	g.release()

	// A cold range is handed out unread too, its pages asked of the disk
	// at once, so that they are sent as they come: one block, and the
	// whole value of 4.
	putAll(t, s, "c", v, 2)
	dropPages := func() {
		t.Helper()
		f, err := os.Open(s.valuePath("c"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
	}
	dropPages()
	if g, err = s.get("c", blockSize, blockSize, true); err != nil || g.file == nil {
		t.Fatalf("get of a cold block: unread %v, %v", g.file != nil, err)
	}
	if b := readRange(t, g); !bytes.Equal(b, v[blockSize:2*blockSize]) || !checkBlocks(b, g.sums) {
		t.Fatal("a cold block handed out unread does not read back as stored")
	}
	g.release()
	dropPages()
	if g, err = s.get("c", 0, MaxValue, true); err != nil || g.file == nil {
		t.Fatalf("get of a cold value of 4 blocks: unread %v, %v", g.file != nil, err)
	}
	if b := readRange(t, g); !bytes.Equal(b, v) || !checkBlocks(b, g.sums) {
		t.Fatal("a cold value handed out unread does not read back as stored")
	}
	g.release()

	// Damage at rest: sent unread, it fails the receiver's check; read
	// and verified, it is corruption.
	p := s.valuePath("c")
	b, _ := os.ReadFile(p)
	b[len(b)-blockSize-7] ^= 0x10
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if g, err = s.get("c", 0, MaxValue, true); err != nil || g.file == nil {
		t.Fatalf("get of a damaged, cached value: unread %v, %v", g.file != nil, err)
	}
	if checkBlocks(readRange(t, g), g.sums) {
		t.Fatal("damaged bytes sent unread pass the sums sent with them")
	}
	g.release()
	if _, err := s.get("c", 0, MaxValue, false); errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("verified get of a damaged value: %v", err)
	}
}
