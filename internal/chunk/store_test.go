package chunk

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
)

const testTarget placement.TargetID = 7

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{Target: testTarget, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func mustWrite(t testing.TB, s *Store, id ID, off int64, p []byte, sync bool) {
	t.Helper()
	if err := s.WriteAt(id, off, p, sync); err != nil {
		t.Fatalf("WriteAt(%v, %d, %d bytes): %v", id, off, len(p), err)
	}
}

func mustRead(t testing.TB, s *Store, id ID, off int64, n int) ([]byte, int64) {
	t.Helper()
	p := make([]byte, n)
	got, clen, err := s.ReadAt(id, off, p)
	if err != nil {
		t.Fatalf("ReadAt(%v, %d, %d): %v", id, off, n, err)
	}
	return p[:got], clen
}

// model is the expected content of one chunk.
type model []byte

func (m *model) write(off int64, p []byte) {
	if end := int(off) + len(p); end > len(*m) {
		*m = append(*m, make([]byte, end-len(*m))...)
	}
	copy((*m)[off:], p)
}

func (m *model) truncate(size int64) {
	if int(size) <= len(*m) {
		*m = (*m)[:size]
		return
	}
	*m = append(*m, make([]byte, int(size)-len(*m))...)
}

func checkModel(t *testing.T, s *Store, id ID, m model, what string) {
	t.Helper()
	got, clen := mustRead(t, s, id, 0, len(m)+3*BlockSize)
	if clen != int64(len(m)) {
		t.Fatalf("%s: chunk length %d, want %d", what, clen, len(m))
	}
	if !bytes.Equal(got, m) {
		i := 0
		for i < min(len(got), len(m)) && got[i] == m[i] {
			i++
		}
		t.Fatalf("%s: content differs at byte %d (got %d bytes, want %d)", what, i, len(got), len(m))
	}
}

func TestRoundTripOddRanges(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	cases := []struct {
		name string
		off  int64
		n    int
	}{
		{"empty at 0", 0, 0},
		{"one byte", 0, 1},
		{"odd inside block", 12345, 777},
		{"ends at block boundary", BlockSize - 100, 100},
		{"spans two blocks", BlockSize - 3, 7},
		{"spans many blocks", 3*BlockSize + 11, 5*BlockSize + 13},
		{"exactly one block", 2 * BlockSize, BlockSize},
		{"larger than one step", 17, maxBatch*BlockSize + 3*BlockSize + 5},
		{"far offset", 1 << 33, 4099},
	}
	for i, c := range cases {
		id := ID{Ino: uint64(100 + i), Slot: uint32(i)}
		p := pattern(uint64(i), c.n)
		mustWrite(t, s, id, c.off, p, false)
		got, clen := mustRead(t, s, id, c.off, c.n+100)
		if c.n > 0 && clen != c.off+int64(c.n) {
			t.Errorf("%s: chunk length %d, want %d", c.name, clen, c.off+int64(c.n))
		}
		if !bytes.Equal(got, p) {
			t.Errorf("%s: read back %d bytes, differ from the %d written", c.name, len(got), len(p))
		}
		// Odd sub-ranges.
		if c.n > 10 {
			sub, _ := mustRead(t, s, id, c.off+3, c.n-7)
			if !bytes.Equal(sub, p[3:c.n-4]) {
				t.Errorf("%s: sub-range read differs", c.name)
			}
		}
		// Everything before off is a hole.
		if c.off > 0 {
			hole, _ := mustRead(t, s, id, max(0, c.off-5000), int(min(c.off, 5000)))
			if !isZero(hole) {
				t.Errorf("%s: hole before the write is not zero", c.name)
			}
		}
	}
}

func TestMissingChunkReadsEmpty(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	p := []byte("untouched")
	n, clen, err := s.ReadAt(ID{Ino: 1}, 0, p)
	if n != 0 || clen != 0 || err != nil {
		t.Fatalf("ReadAt of a missing chunk = %d, %d, %v; want 0, 0, nil", n, clen, err)
	}
	if _, _, _, chunks, _ := s.Stat(); chunks != 0 {
		t.Fatalf("reading a missing chunk created one: %d chunks", chunks)
	}
}

func TestHolesAndOverwrites(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	id := ID{Ino: 5, Slot: 1}
	var m model
	steps := []struct {
		off int64
		n   int
	}{
		{5 * BlockSize, 10},              // far block, hole before
		{100, 50},                        // first block, gap inside
		{120, 10},                        // overwrite inside the valid prefix
		{1000, 10},                       // append past a gap within a block
		{BlockSize - 10, 30},             // straddle into block 1
		{0, 2 * BlockSize},               // overwrite whole blocks
		{3*BlockSize + 7, BlockSize},     // into holes
		{5*BlockSize + 5, 3},             // patch the far block
		{2*BlockSize - 1, BlockSize + 2}, // straddle three blocks
	}
	for i, st := range steps {
		p := pattern(uint64(i+1), st.n)
		mustWrite(t, s, id, st.off, p, i%2 == 0)
		m.write(st.off, p)
		checkModel(t, s, id, m, fmt.Sprintf("after write %d", i))
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	id := ID{Ino: 9}
	var m model
	p := pattern(1, 3*BlockSize+500)
	mustWrite(t, s, id, 0, p, false)
	m.write(0, p)
	for i, size := range []int64{2*BlockSize + 100, 2*BlockSize + 4000, BlockSize, 7 * BlockSize, 7*BlockSize + 1, 3, 0, 100, 2 * BlockSize} {
		if err := s.Truncate(id, size); err != nil {
			t.Fatalf("Truncate(%d): %v", size, err)
		}
		m.truncate(size)
		checkModel(t, s, id, m, fmt.Sprintf("after truncate %d to %d", i, size))
		// Write past the new end: the bytes between must be zeros, not
		// the old data.
		q := pattern(uint64(100+i), 77)
		mustWrite(t, s, id, size+1000, q, false)
		m.write(size+1000, q)
		checkModel(t, s, id, m, fmt.Sprintf("after write past truncate %d", i))
	}
	// Truncating a missing chunk to 0 does not create it; to >0 does.
	if err := s.Truncate(ID{Ino: 10}, 0); err != nil {
		t.Fatal(err)
	}
	if _, clen := mustRead(t, s, ID{Ino: 10}, 0, 10); clen != 0 {
		t.Fatalf("chunk length %d after truncating a missing chunk to 0", clen)
	}
	if err := s.Truncate(ID{Ino: 11}, 5000); err != nil {
		t.Fatal(err)
	}
	got, clen := mustRead(t, s, ID{Ino: 11}, 0, 6000)
	if clen != 5000 || len(got) != 5000 || !isZero(got) {
		t.Fatalf("truncated-up new chunk: length %d, %d bytes, zero %v", clen, len(got), isZero(got))
	}
}

func TestRandomOpsAgainstModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	s, err := Open(dir, Options{Target: testTarget, Logger: quietLogger(), MaxOpenChunks: 2})
	if err != nil {
		t.Fatal(err)
	}
	models := make([]model, 4)
	for i := range 300 {
		c := r.IntN(len(models))
		id := ID{Ino: uint64(c), Slot: 3}
		switch op := r.IntN(10); {
		case op < 6:
			off := r.Int64N(6 * BlockSize)
			n := r.IntN(3*BlockSize) + 1
			if r.IntN(4) == 0 {
				off = int64(len(models[c])) // append
			}
			p := pattern(r.Uint64(), n)
			mustWrite(t, s, id, off, p, r.IntN(3) == 0)
			models[c].write(off, p)
		case op < 8:
			size := r.Int64N(7 * BlockSize)
			if err := s.Truncate(id, size); err != nil {
				t.Fatalf("step %d: Truncate: %v", i, err)
			}
			if size > 0 || models[c] != nil {
				models[c].truncate(size)
			}
		case op < 9:
			if err := s.Close(); err != nil {
				t.Fatalf("step %d: Close: %v", i, err)
			}
			if s, err = Open(dir, Options{Target: testTarget, Logger: quietLogger(), MaxOpenChunks: 2}); err != nil {
				t.Fatalf("step %d: reopen: %v", i, err)
			}
		default:
			if err := s.Remove(id.Ino, []uint32{id.Slot}); err != nil {
				t.Fatalf("step %d: Remove: %v", i, err)
			}
			models[c] = nil
		}
		checkModel(t, s, id, models[c], fmt.Sprintf("step %d (seed %d)", i, seed))
	}
	var used int64
	var chunks uint64
	for _, m := range models {
		if m != nil {
			used += int64(len(m))
			chunks++
		}
	}
	_, gotUsed, _, gotChunks, err := s.Stat()
	if err != nil || gotUsed != used || gotChunks != chunks {
		t.Fatalf("Stat = used %d, chunks %d, %v; want %d, %d", gotUsed, gotChunks, err, used, chunks)
	}
	s.Close()
	s = openStore(t, dir)
	_, gotUsed, _, gotChunks, _ = s.Stat()
	if gotUsed != used || gotChunks != chunks {
		t.Fatalf("Stat after reopen = used %d, chunks %d; want %d, %d", gotUsed, gotChunks, used, chunks)
	}
}

func TestRestartFindsData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	want := map[ID][]byte{}
	for i := range 20 {
		id := ID{Ino: uint64(i * 1000), Slot: uint32(i % 3)}
		want[id] = pattern(uint64(i), 1000+i*9000)
		mustWrite(t, s, id, 0, want[id], false)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	for id, p := range want {
		got, clen := mustRead(t, s, id, 0, len(p)+10)
		if clen != int64(len(p)) || !bytes.Equal(got, p) {
			t.Errorf("%v after restart: length %d, want %d; equal %v", id, clen, len(p), bytes.Equal(got, p))
		}
	}
	if _, _, _, chunks, _ := s.Stat(); chunks != 20 {
		t.Errorf("Stat after restart: %d chunks, want 20", chunks)
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	for slot := range uint32(3) {
		mustWrite(t, s, ID{Ino: 42, Slot: slot}, 0, pattern(1, 5000), false)
	}
	if err := s.Remove(42, []uint32{0, 2, 7}); err != nil {
		t.Fatal(err)
	}
	for slot, exists := range []bool{false, true, false} {
		_, clen := mustRead(t, s, ID{Ino: 42, Slot: uint32(slot)}, 0, 10)
		if (clen > 0) != exists {
			t.Errorf("slot %d: length %d, exists want %v", slot, clen, exists)
		}
		dataPath, sumPath := s.Paths(ID{Ino: 42, Slot: uint32(slot)})
		for _, p := range []string{dataPath, sumPath} {
			if _, err := os.Stat(p); (err == nil) != exists {
				t.Errorf("slot %d: stat %s: %v", slot, p, err)
			}
		}
	}
	// A removed chunk starts from scratch when written again.
	mustWrite(t, s, ID{Ino: 42}, 10, []byte("x"), false)
	got, clen := mustRead(t, s, ID{Ino: 42}, 0, 100)
	if clen != 11 || !isZero(got[:10]) || got[10] != 'x' {
		t.Fatalf("rewritten chunk: length %d, content %q", clen, got)
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptDataIsDetected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	id := ID{Ino: 77, Slot: 2}
	p := pattern(3, 3*BlockSize+100)
	mustWrite(t, s, id, 0, p, true)
	dataPath, _ := s.Paths(id)
	flipByte(t, dataPath, BlockSize+1234)

	for _, r := range []struct{ off, n int64 }{{0, int64(len(p))}, {BlockSize + 1000, 10}, {BlockSize - 5, 10}} {
		before := s.Corruptions()
		buf := make([]byte, r.n)
		n, _, err := s.ReadAt(id, r.off, buf)
		if !errors.Is(err, errs.ErrCorruption) || errs.CodeOf(err) != errs.Corruption {
			t.Fatalf("read %d+%d of a corrupt block: n=%d err=%v, want a corruption error", r.off, r.n, n, err)
		}
		if n != 0 {
			t.Errorf("read of a corrupt block returned n=%d", n)
		}
		for _, want := range []string{fmt.Sprintf("offset %d", BlockSize), "ino 77 slot 2", "target 7"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
		if s.Corruptions() != before+1 {
			t.Errorf("Corruptions() = %d, want %d", s.Corruptions(), before+1)
		}
	}
	// Other blocks still read.
	got, _ := mustRead(t, s, id, 0, BlockSize)
	if !bytes.Equal(got, p[:BlockSize]) {
		t.Fatal("intact block 0 reads wrong")
	}
	got, _ = mustRead(t, s, id, 2*BlockSize, BlockSize+100)
	if !bytes.Equal(got, p[2*BlockSize:]) {
		t.Fatal("intact block 2 reads wrong")
	}
	// A partial overwrite of the corrupt block must not bless it.
	if err := s.WriteAt(id, BlockSize+10, []byte("abc"), false); errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("patching a corrupt block: %v, want a corruption error", err)
	}
	// Replacing the whole block heals it.
	mustWrite(t, s, id, BlockSize, p[BlockSize:2*BlockSize], false)
	got, _ = mustRead(t, s, id, 0, len(p))
	if !bytes.Equal(got, p) {
		t.Fatal("rewritten block reads wrong")
	}
}

func TestCorruptChecksumIsDetected(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	id := ID{Ino: 78}
	p := pattern(4, 2*BlockSize)
	mustWrite(t, s, id, 0, p, true)
	_, sumPath := s.Paths(id)
	for _, off := range []int64{entrySize + 1, entrySize + 5, entrySize + 30} { // crc, length, entry crc of block 1
		flipByte(t, sumPath, off)
		buf := make([]byte, len(p))
		n, _, err := s.ReadAt(id, 0, buf)
		if errs.CodeOf(err) != errs.Corruption || n != 0 {
			t.Fatalf("flipped sidecar byte %d: n=%d err=%v, want a corruption error", off, n, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("offset %d", BlockSize)) {
			t.Errorf("error %q does not name offset %d", err, BlockSize)
		}
		flipByte(t, sumPath, off) // heal
	}
	got, _ := mustRead(t, s, id, 0, len(p))
	if !bytes.Equal(got, p) {
		t.Fatal("healed chunk reads wrong")
	}
}

// TestAppendCrash: the process dies after an append wrote data but before
// it wrote the new checksum entry. The acknowledged prefix of the block
// must read back, and the unacknowledged bytes must not appear.
func TestAppendCrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{Target: testTarget, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	id := ID{Ino: 1, Slot: 1}
	acked := pattern(1, 1000)
	mustWrite(t, s, id, 0, acked, true)
	s.hook = func(p hookPoint) bool { return p == hookAppendData }
	if err := s.WriteAt(id, 1000, pattern(2, 3*BlockSize), false); !errors.Is(err, errStopped) {
		t.Fatalf("hooked write: %v", err)
	}
	s.abandon()

	s = openStore(t, dir)
	got, clen := mustRead(t, s, id, 0, 4*BlockSize)
	if clen != 1000 || !bytes.Equal(got, acked) {
		t.Fatalf("after the crash: length %d, acked prefix intact %v", clen, bytes.Equal(got, acked))
	}
	// And appending again works.
	more := pattern(3, 5000)
	mustWrite(t, s, id, 1000, more, true)
	got, _ = mustRead(t, s, id, 0, 10000)
	if !bytes.Equal(got, append(acked, more...)) {
		t.Fatal("append after recovery reads wrong")
	}
}

// TestOverwriteCrash: the process dies in the middle of an in-place
// overwrite, after the new entries are written and with the data torn.
// Recovery must roll the blocks back to the acknowledged content.
func TestOverwriteCrash(t *testing.T) {
	t.Parallel()
	for _, point := range []hookPoint{hookOverwriteEntry, hookOverwriteTorn} {
		dir := t.TempDir()
		s, err := Open(dir, Options{Target: testTarget, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		id := ID{Ino: 2}
		acked := pattern(1, 3*BlockSize-500)
		mustWrite(t, s, id, 0, acked, true)
		s.hook = func(p hookPoint) bool { return p == point }
		// Overwrites part of block 0, all of block 1, part of 2 and extends.
		if err := s.WriteAt(id, 700, pattern(2, 3*BlockSize), true); !errors.Is(err, errStopped) {
			t.Fatalf("hooked write: %v", err)
		}
		s.abandon()
		if _, err := os.Stat(s.undoPath(id)); err != nil {
			t.Fatalf("undo file after the crash: %v", err)
		}

		s = openStore(t, dir)
		got, clen := mustRead(t, s, id, 0, 5*BlockSize)
		newer := model(bytes.Clone(acked))
		newer.write(700, pattern(2, 3*BlockSize))
		// Every block is either as acknowledged or as the interrupted
		// write left it complete; nothing in between.
		oldBlocks, newBlocks := 0, 0
		for bs := 0; bs < len(newer); bs += BlockSize {
			g := got[min(bs, len(got)):min(bs+BlockSize, len(got))]
			o := acked[min(bs, len(acked)):min(bs+BlockSize, len(acked))]
			n := newer[bs:min(bs+BlockSize, len(newer))]
			switch {
			case bytes.Equal(g, o):
				oldBlocks++
			case bytes.Equal(g, n):
				newBlocks++
			default:
				t.Fatalf("point %d: block %d is neither old nor new after recovery", point, bs/BlockSize)
			}
		}
		if point == hookOverwriteEntry && (newBlocks != 0 || clen != int64(len(acked))) {
			t.Fatalf("point %d: %d blocks new, length %d; want all old, length %d", point, newBlocks, clen, len(acked))
		}
		if point == hookOverwriteTorn && (oldBlocks == 0 || newBlocks == 0) {
			t.Fatalf("point %d: %d old and %d new blocks; the torn write should leave both", point, oldBlocks, newBlocks)
		}
		if _, err := os.Stat(s.undoPath(id)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("undo file still there after recovery: %v", err)
		}
		if s.Corruptions() != 0 {
			t.Fatalf("recovery counted %d corruptions", s.Corruptions())
		}
	}
}

// TestPowerLossFallback simulates a power loss that kept a block's new
// entry but not its data: the block's last durable prefix reads back,
// the lost bytes are reported, never returned.
func TestPowerLossFallback(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	id := ID{Ino: 3}
	acked := pattern(1, 1000)
	mustWrite(t, s, id, 0, acked, true)
	for i := range 3 { // several unsynced appends to the same block
		mustWrite(t, s, id, int64(1000+i*500), pattern(uint64(2+i), 500), false)
	}
	dataPath, _ := s.Paths(id)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Lose the appended data.
	if err := os.Truncate(dataPath, 1000); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	got, clen := mustRead(t, s, id, 0, 1000)
	if clen != 2500 || !bytes.Equal(got, acked) {
		t.Fatalf("durable prefix: length %d, intact %v", clen, bytes.Equal(got, acked))
	}
	_, _, err := s.ReadAt(id, 0, make([]byte, 2500))
	if errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("read of the lost bytes: %v, want a corruption error", err)
	}
}

func TestFormatChecks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	s.Close()
	if _, err := Open(dir, Options{Target: testTarget + 1, Logger: quietLogger()}); errs.CodeOf(err) != errs.Invalid || !strings.Contains(err.Error(), "target 7") {
		t.Fatalf("Open with another target ID: %v", err)
	}
	b := encodeFormat(formatInfo{Version: FormatVersion + 1, Target: testTarget})
	if err := os.WriteFile(filepath.Join(dir, formatName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{Target: testTarget, Logger: quietLogger()}); errs.CodeOf(err) != errs.NotSupported {
		t.Fatalf("Open of a newer format version: %v", err)
	}
	b[3] ^= 1
	os.WriteFile(filepath.Join(dir, formatName), b, 0o644)
	if _, err := Open(dir, Options{Target: testTarget, Logger: quietLogger()}); errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("Open with a damaged FORMAT: %v", err)
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "precious"), []byte("x"), 0o644)
	if _, err := Open(other, Options{Target: testTarget, Logger: quietLogger()}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("Open of a non-empty foreign directory: %v", err)
	}
}

func TestConcurrentChunks(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{Target: testTarget, Logger: quietLogger(), MaxOpenChunks: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for w := range 8 {
		wg.Go(func() {
			id := ID{Ino: uint64(w % 5), Slot: uint32(w)}
			var m model
			for i := range 40 {
				p := pattern(uint64(w*1000+i), 1+(i*7919)%(2*BlockSize))
				off := int64((i * 104729) % (3 * BlockSize))
				if err := s.WriteAt(id, off, p, i%10 == 0); err != nil {
					errc <- err
					return
				}
				m.write(off, p)
				got := make([]byte, len(m))
				n, _, err := s.ReadAt(id, 0, got)
				if err != nil || n != len(m) || !bytes.Equal(got, m) {
					errc <- fmt.Errorf("worker %d step %d: n=%d err=%v equal=%v", w, i, n, err, bytes.Equal(got[:n], m))
					return
				}
				if i%13 == 0 {
					if err := s.Sync(id); err != nil {
						errc <- err
						return
					}
				}
			}
		})
	}
	// Concurrent readers of one shared chunk.
	shared := ID{Ino: 999}
	sp := pattern(9, 4*BlockSize)
	mustWrite(t, s, shared, 0, sp, false)
	for range 4 {
		wg.Go(func() {
			for range 50 {
				got := make([]byte, len(sp))
				if n, _, err := s.ReadAt(shared, 0, got); err != nil || n != len(sp) || !bytes.Equal(got, sp) {
					errc <- fmt.Errorf("shared read: n=%d err=%v", n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

func TestInvalidRanges(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	if err := s.WriteAt(ID{}, -1, []byte("x"), false); errs.CodeOf(err) != errs.Invalid {
		t.Errorf("negative offset: %v", err)
	}
	if err := s.WriteAt(ID{}, MaxChunkSize, []byte("x"), false); errs.CodeOf(err) != errs.Invalid {
		t.Errorf("offset at the size limit: %v", err)
	}
	if err := s.Truncate(ID{}, MaxChunkSize+1); errs.CodeOf(err) != errs.Invalid {
		t.Errorf("truncate past the limit: %v", err)
	}
	if _, _, err := s.ReadAt(ID{}, -5, make([]byte, 1)); errs.CodeOf(err) != errs.Invalid {
		t.Errorf("read at a negative offset: %v", err)
	}
}

func TestClosedStore(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir())
	mustWrite(t, s, ID{Ino: 1}, 0, []byte("x"), false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.WriteAt(ID{Ino: 1}, 0, []byte("y"), false); errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("write after Close: %v", err)
	}
}

// TestPowerLossTornOverwrite: a synced in-place overwrite is cut by a power
// loss that kept part of its data but none of its new entries. The undo
// record must restore the acknowledged content.
func TestPowerLossTornOverwrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{Target: testTarget, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	id := ID{Ino: 4}
	acked := pattern(1, 2*BlockSize+300)
	mustWrite(t, s, id, 0, acked, true)
	_, sumPath := s.Paths(id)
	oldSums, err := os.ReadFile(sumPath)
	if err != nil {
		t.Fatal(err)
	}
	s.hook = func(p hookPoint) bool { return p == hookOverwriteTorn }
	if err := s.WriteAt(id, 5, pattern(2, 2*BlockSize), true); !errors.Is(err, errStopped) {
		t.Fatalf("hooked write: %v", err)
	}
	s.abandon()
	if err := os.WriteFile(sumPath, oldSums, 0o644); err != nil { // the entries never made it
		t.Fatal(err)
	}
	s = openStore(t, dir)
	got, clen := mustRead(t, s, id, 0, 3*BlockSize)
	if clen != int64(len(acked)) || !bytes.Equal(got, acked) {
		t.Fatalf("after recovery: length %d, want %d; intact %v", clen, len(acked), bytes.Equal(got, acked))
	}
}

func TestListAndChunkInfo(t *testing.T) {
	a := openStore(t, t.TempDir())
	b := openStore(t, t.TempDir())
	data := bytes.Repeat([]byte("x"), 3*BlockSize+100)
	// The same content laid out differently: written whole on a, with an
	// explicit zero block and a hole on b.
	full := slices.Clone(data)
	clear(full[BlockSize : 2*BlockSize])
	if err := a.WriteAt(ID{Ino: 7, Slot: 1}, 0, full, false); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteAt(ID{Ino: 7, Slot: 1}, 0, full[:BlockSize], false); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteAt(ID{Ino: 7, Slot: 1}, 2*BlockSize, full[2*BlockSize:], false); err != nil {
		t.Fatal(err)
	}
	ia, _, err := a.ChunkInfo(ID{Ino: 7, Slot: 1})
	if err != nil {
		t.Fatal(err)
	}
	ib, _, err := b.ChunkInfo(ID{Ino: 7, Slot: 1})
	if err != nil {
		t.Fatal(err)
	}
	if ia != ib || ia.Len != int64(len(full)) {
		t.Fatalf("same content, different info: %+v vs %+v", ia, ib)
	}
	// A checksum.Digester fed the logical bytes (as read) gives the same
	// digest: what a client checks a copy by.
	d := checksum.NewDigester()
	for off := 0; off < len(full); off += BlockSize {
		blk := full[off:min(off+BlockSize, len(full))]
		d.Block(checksum.BlockCRC(blk), int64(len(blk)))
	}
	if d.Sum64() != ia.Digest {
		t.Fatalf("Digester over the bytes: %x, ChunkInfo: %x", d.Sum64(), ia.Digest)
	}
	// One changed byte changes the digest.
	if err := b.WriteAt(ID{Ino: 7, Slot: 1}, 5, []byte("y"), false); err != nil {
		t.Fatal(err)
	}
	if ib2, _, _ := b.ChunkInfo(ID{Ino: 7, Slot: 1}); ib2.Digest == ia.Digest {
		t.Fatal("digest did not change with the content")
	}
	if _, found, err := a.ChunkInfo(ID{Ino: 99}); found || err != nil {
		t.Fatalf("missing chunk: found %v, %v", found, err)
	}
	for _, id := range []ID{{Ino: 1, Slot: 0}, {Ino: 300, Slot: 2}, {Ino: 1, Slot: 5}} {
		if err := a.WriteAt(id, 0, []byte("z"), false); err != nil {
			t.Fatal(err)
		}
	}
	want := []ID{{1, 0}, {1, 5}, {7, 1}, {300, 2}}
	var got []ID
	for after, more := (ID{}), true; more; {
		var page []Info
		page, more, err = a.List(after, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range page {
			got = append(got, in.ID)
			after = in.ID
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
}

// TestReadKeepsAtime checks that reading a chunk leaves its files' access
// times alone (openNoAtime): with relatime, the first read after a write
// would otherwise update them and dirty both inodes.
func TestReadKeepsAtime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	id := ID{Ino: 7, Slot: 0}
	p := pattern(7, 70000)
	mustWrite(t, s, id, 0, p, false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// An access time older than the modification time: relatime updates
	// it at the next read.
	old := time.Now().Add(-48 * time.Hour)
	dataPath, sumPath := s.Paths(id)
	for _, f := range []string{dataPath, sumPath} {
		if err := os.Chtimes(f, old, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	s = openStore(t, dir)
	if got, clen := mustRead(t, s, id, 0, len(p)); clen != int64(len(p)) || !bytes.Equal(got, p) {
		t.Fatalf("read back: length %d, want %d; equal %v", clen, len(p), bytes.Equal(got, p))
	}
	// A new chunk read through the descriptors that created it.
	id2 := ID{Ino: 8, Slot: 0}
	mustWrite(t, s, id2, 0, p, false)
	dataPath2, sumPath2 := s.Paths(id2)
	for _, f := range []string{dataPath2, sumPath2} {
		if err := os.Chtimes(f, old, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := mustRead(t, s, id2, 0, len(p)); !bytes.Equal(got, p) {
		t.Fatal("new chunk read back wrong")
	}
	for _, f := range []string{dataPath, sumPath, dataPath2, sumPath2} {
		var st unix.Stat_t
		if err := unix.Stat(f, &st); err != nil {
			t.Fatal(err)
		}
		if st.Atim.Sec != old.Unix() {
			t.Errorf("%s: access time %v after a read, want %v (unchanged)", f, time.Unix(st.Atim.Unix()), old)
		}
	}
}
