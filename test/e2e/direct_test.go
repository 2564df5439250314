package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/fsx/fsxtest"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// directClient connects a client that reads chunks straight from their
// files (Options.DirectRead, ADR 0025).
func directClient(t testing.TB, addr string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Options{Server: addr, DirectRead: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestFsxDirectRead runs the data-integrity exerciser with direct reads:
// every read of an unreplicated chunk goes to its files (verified in the
// client), the writes through the server, and the bytes must be the
// model's after every operation. It fails if no byte was read directly.
func TestFsxDirectRead(t *testing.T) {
	s := startServer(t, "")
	c := directClient(t, s.addr)
	fsxtest.Run(t, c, fsxLayouts, 1500, []uint64{3, 14}, func(dir string) fsx.Target {
		return &fsx.Client{C: c, Dir: dir, Ctx: context.Background()}
	})
	if c.DirectReadBytes() == 0 {
		t.Fatal("no byte was read directly")
	}
	t.Logf("%d bytes read directly", c.DirectReadBytes())
}

// TestFsxDirectReadEvicting is TestFsxDirectRead with a client that may
// hold the files of only two chunks open (DirectReadMaxChunks): chunks are
// closed under the exerciser's reads all the time and opened again.
func TestFsxDirectReadEvicting(t *testing.T) {
	s := startServer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Options{Server: s.addr, DirectRead: true, DirectReadMaxChunks: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fsxtest.Run(t, c, fsxLayouts, 1500, []uint64{5, 17}, func(dir string) fsx.Target {
		return &fsx.Client{C: c, Dir: dir, Ctx: context.Background()}
	})
	if c.DirectReadBytes() == 0 {
		t.Fatal("no byte was read directly")
	}
	if held := c.DirectReadChunksHeld(); held > 2 {
		t.Fatalf("%d chunks held open for direct reads, bound 2", held)
	}
}

// TestDirectRead: a direct reader sees another client's overwrite of a
// file it holds open, reads a file that shrank and grew again as the
// server does, never returns a block that fails its checksum (a byte
// flipped in the chunk file on disk gives the same error as without direct
// reads), and reads nothing directly when the server offers no socket.
func TestDirectRead(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, "")
	w := s.client()
	d := directClient(t, s.addr)
	r := rand.New(rand.NewPCG(25, 1))
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if err := w.MkdirAll(ctx, "/one", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.SetLayout(ctx, "/one", client.Layout{StripeCount: 1}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/striped", "/one/f"} {
		if err := proctest.WriteFile(ctx, w, p, data); err != nil {
			t.Fatal(err)
		}
		f, err := d.Open(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		if _, err := f.ReadAt(got, 0); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: direct read differs from what was written", p)
		}
		// Another client overwrites a range in place; the open File
		// reads the new bytes.
		patch := bytes.Repeat([]byte{0xAB}, 100000)
		wf, err := w.OpenFile(ctx, p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wf.WriteAt(patch, 1<<20+7); err != nil {
			t.Fatal(err)
		}
		if err := wf.Close(); err != nil {
			t.Fatal(err)
		}
		copy(data[1<<20+7:], patch)
		if _, err := f.ReadAt(got, 0); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: after another client's overwrite, the open File read other bytes", p)
		}
		f.Close()
		// Shrink and grow again through the other client.
		if err := w.Truncate(ctx, p, 5000); err != nil {
			t.Fatal(err)
		}
		if err := w.Truncate(ctx, p, int64(len(data))); err != nil {
			t.Fatal(err)
		}
		f, err = d.Open(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadAt(got, 0); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		f.Close()
		if !bytes.Equal(got[:5000], data[:5000]) || !bytes.Equal(got[5000:], make([]byte, len(data)-5000)) {
			t.Fatalf("%s: after a cut to 5000 and a growth, read other bytes than the first 5000 and zeros", p)
		}
		copy(data, got) // the file's content now
	}
	// Two whole reads of each file directly; the 5000 bytes left by the
	// cut may be read through the target (a chunk's first read goes there
	// when the chunk is small, directMinChunk).
	if want := uint64(4*len(data) - 2*5000); d.DirectReadBytes() < want {
		t.Fatalf("read %d bytes directly, want at least %d", d.DirectReadBytes(), want)
	}

	// A byte flipped on disk in /one/f's chunk: both clients fail the
	// same way, and the direct one returns none of the bad bytes.
	a, err := w.Stat(ctx, "/one/f")
	if err != nil {
		t.Fatal(err)
	}
	dat := chunkFile(t, s.dataDir, a.Attr().Ino)
	fh, err := os.OpenFile(dat, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0}
	if _, err := fh.ReadAt(b, 1000); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := fh.WriteAt(b, 1000); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	for _, c := range []*client.Client{w, d} {
		f, err := c.Open(ctx, "/one/f")
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		_, err = f.ReadAt(buf, 0)
		f.Close()
		if errs.CodeOf(err) != errs.Corruption {
			t.Errorf("read of a corrupt block: %v, want a corruption error", err)
		}
	}

	// A server without the socket: the client reads through the network.
	s2 := startServer(t, "", "--no-direct-reads")
	w2, d2 := s2.client(), directClient(t, s2.addr)
	if err := proctest.WriteFile(ctx, w2, "/x", data); err != nil {
		t.Fatal(err)
	}
	f, err := d2.Open(ctx, "/x")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	f.Close()
	if !bytes.Equal(got, data) || d2.DirectReadBytes() != 0 {
		t.Fatalf("without a socket: bytes equal %v, %d read directly", bytes.Equal(got, data), d2.DirectReadBytes())
	}
	if _, err := os.Stat(filepath.Join(s2.dataDir, "direct.sock")); !os.IsNotExist(err) {
		t.Errorf("--no-direct-reads left a socket: %v", err)
	}
}

// chunkFile returns the data file of the first chunk of inode ino under a
// server's data directory.
func chunkFile(t *testing.T, dataDir string, ino uint64) string {
	t.Helper()
	var found string
	filepath.WalkDir(filepath.Join(dataDir, "targets"), func(p string, e os.DirEntry, err error) error {
		if err == nil && found == "" && strings.HasSuffix(p, ".00000000.dat") && strings.HasPrefix(filepath.Base(p), hex16(ino)) {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no chunk file of inode %d", ino)
	}
	return found
}

func hex16(v uint64) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 16)
	for i := 15; i >= 0; i-- {
		b[i] = digits[v&15]
		v >>= 4
	}
	return string(b)
}

// TestDirectReadRacesWriter: while another client overwrites whole 64 KiB
// blocks of a file (each block filled with one byte value per write) and
// now and then cuts the file and writes it again, a direct reader reads
// ranges of it, also across blocks: no block it returns may mix two writes
// (a torn block is what reading the files without the checks would show).
func TestDirectReadRacesWriter(t *testing.T) {
	s := startServer(t, "")
	d := directClient(t, s.addr)
	reads := readsRacingWriter(t, s.client(), d, "/r", 3*raceBlock, func(r *rand.Rand, n int) int64 {
		return int64(r.IntN(raceBlocks*raceBlock - n)) // also across blocks
	})
	if d.DirectReadBytes() == 0 {
		t.Fatal("no byte was read directly")
	}
	t.Logf("%d reads, %d bytes directly", reads, d.DirectReadBytes())
}

// The file the block races run on: raceBlocks blocks of raceBlock bytes.
const raceBlock, raceBlocks = 64 << 10, 48

// readsRacingWriter makes directory dir (stripe count 1) and its file f
// through w, runs blockWriter on it, and meanwhile reads it through rd,
// n bytes at a time at offsets from at, reopening it every 20 reads,
// checking every block read (checkBlocks) until the writer is done. It
// returns how many reads it made.
func readsRacingWriter(t *testing.T, w, rd *client.Client, dir string, n int, at func(r *rand.Rand, n int) int64) int {
	t.Helper()
	ctx := context.Background()
	p := dir + "/f"
	if err := w.MkdirAll(ctx, dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.SetLayout(ctx, dir, client.Layout{StripeCount: 1}); err != nil {
		t.Fatal(err)
	}
	if err := proctest.WriteFile(ctx, w, p, bytes.Repeat([]byte{1}, raceBlock*raceBlocks)); err != nil {
		t.Fatal(err)
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	done := blockWriter(ctx, w, p, seed, raceBlock, raceBlocks)
	r := rand.New(rand.NewPCG(seed, 2))
	buf := make([]byte, n)
	reads := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return reads
		default:
		}
		f, err := rd.Open(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			off := at(r, n)
			k, err := f.ReadAt(buf, off)
			if err != nil && err != io.EOF {
				t.Fatal(err)
			}
			reads++
			checkBlocks(t, buf[:k], off, raceBlock, seed)
		}
		f.Close()
	}
}

// blockWriter writes file p through w from another goroutine, 2000 times:
// a whole block of blk bytes (of the nblk blocks) filled with one value
// per write, and every 200th time a cut at a block boundary and the whole
// file written again; each write is synced. The channel gets nil, or
// the first error, at the end.
func blockWriter(ctx context.Context, w *client.Client, p string, seed uint64, blk, nblk int) <-chan error {
	done := make(chan error, 1)
	go func() {
		r := rand.New(rand.NewPCG(seed, 1))
		f, err := w.OpenFile(ctx, p, os.O_RDWR, 0)
		if err != nil {
			done <- err
			return
		}
		defer f.Close()
		buf := make([]byte, blk)
		for i := range 2000 {
			if i%200 == 199 {
				// Cut at a block boundary, then fill the file again.
				if err := f.Truncate(ctx, int64(r.IntN(nblk))*int64(blk)); err != nil {
					done <- err
					return
				}
				if _, err := f.WriteAt(bytes.Repeat([]byte{byte(i%250 + 2)}, blk*nblk), 0); err != nil {
					done <- err
					return
				}
			} else {
				for k := range buf {
					buf[k] = byte(i%250 + 2)
				}
				if _, err := f.WriteAt(buf, int64(r.IntN(nblk))*int64(blk)); err != nil {
					done <- err
					return
				}
			}
			if err := f.Sync(); err != nil { // the bytes reach the targets now
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// checkBlocks fails the test if a whole or partial block of blk bytes in
// buf, read at file offset off, holds two values (zeros past a cut count
// as one): a block torn between two of blockWriter's writes.
func checkBlocks(t *testing.T, buf []byte, off int64, blk int, seed uint64) {
	t.Helper()
	n := len(buf)
	for lo := 0; lo < n; {
		hi := min(n, int((off+int64(lo))/int64(blk)+1)*blk-int(off))
		for k := lo + 1; k < hi; k++ {
			if buf[k] != buf[lo] {
				t.Fatalf("block at file offset %d mixes values %d and %d (read at %d, seed %d)", (off+int64(lo))/int64(blk)*int64(blk), buf[lo], buf[k], off, seed)
			}
		}
		lo = hi
	}
}

// TestDirectReadServerRestart: a File keeps the files of a chunk it read
// directly; the storage service is killed (kill -9) and restarted, the
// file removed and its chunk's files recycled by the new process for
// another file's chunk. The old File must never read the other file's
// bytes through the descriptors it holds (the new process does not know
// of them; the client drops them when the old process's socket ends).
func TestDirectReadServerRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := startServer(t, dir)
	w := s.client()
	if err := w.SetLayout(ctx, "/", client.Layout{StripeCount: 1}); err != nil {
		t.Fatal(err)
	}
	old := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(7, 7))
	for i := range old {
		old[i] = byte(r.Uint32())
	}
	if err := proctest.WriteFile(ctx, w, "/f", old); err != nil {
		t.Fatal(err)
	}
	d := directClient(t, s.addr)
	f, err := d.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, len(old))
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, old) || d.DirectReadBytes() == 0 {
		t.Fatalf("first read: equal %v, %d bytes directly", bytes.Equal(buf, old), d.DirectReadBytes())
	}
	s.kill()
	s2 := startServer(t, dir, "--listen", s.addr)
	w2 := s2.client()
	// Remove /f and write files of 0xEE until the new process has reused
	// the removed chunk's files (the pool of removed files, ADR 0024).
	if err := w2.Remove(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	other := bytes.Repeat([]byte{0xEE}, len(old))
	for i := range 20 {
		time.Sleep(50 * time.Millisecond) // the removal of /f's chunks runs behind
		if err := proctest.WriteFile(ctx, w2, "/g"+strconv.Itoa(i), other); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		clear(buf)
		_, err := f.ReadAt(buf, 0)
		for off := 0; off < len(buf); off += 64 << 10 {
			if bytes.Equal(buf[off:off+64<<10], other[:64<<10]) {
				t.Fatalf("the File of a removed file read another file's bytes at %d (err %v)", off, err)
			}
		}
	}
}

// chunkFDs counts the descriptors this process holds on chunk files.
func chunkFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.Contains(l, "/chunks/") {
			n++
		}
	}
	return n
}

// TestDirectReadBoundsChunks: a client holding many Files open (a Python
// file set keeps one per sample) holds the files of at most
// DirectReadMaxChunks chunks for direct reads, closing the least recently
// read; evicted chunks are opened again at their next read, with the
// right bytes. (Without the bound it held two descriptors per file read
// until the process ran out.)
func TestDirectReadBoundsChunks(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, "")
	w := s.client()
	const files, bound = 40, 8
	c, err := client.New(ctx, client.Options{Server: s.addr, DirectRead: true, DirectReadMaxChunks: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	content := func(i int) []byte { return bytes.Repeat([]byte{byte(i), 0x5a, byte(i * 7)}, 64<<10/3+1) }
	for i := range files {
		if err := proctest.WriteFile(ctx, w, "/f"+strconv.Itoa(i), content(i)); err != nil {
			t.Fatal(err)
		}
	}
	open := make([]*client.File, files)
	for i := range open {
		f, err := c.Open(ctx, "/f"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		open[i] = f
	}
	readAll := func(round int) {
		before := c.DirectReadBytes()
		for i, f := range open {
			got := make([]byte, len(content(i)))
			if _, err := f.ReadAt(got, 0); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if !bytes.Equal(got, content(i)) {
				t.Fatalf("round %d: /f%d read other bytes", round, i)
			}
			if held := c.DirectReadChunksHeld(); held > bound {
				t.Fatalf("round %d: %d chunks held open for direct reads, bound %d", round, held, bound)
			}
		}
		if got, want := c.DirectReadBytes()-before, uint64(files*len(content(0))); got < want {
			t.Fatalf("round %d: %d bytes read directly, want all %d", round, got, want)
		}
		if n := chunkFDs(t); n > 2*bound {
			t.Fatalf("round %d: %d descriptors of chunk files open, bound %d chunks", round, n, bound)
		}
	}
	readAll(1)
	readAll(2) // every chunk read again: the evicted ones are opened anew
	// Readers at once: chunks are closed under reads of other Files (and
	// of their own), which then read them again or through the server.
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			got := make([]byte, len(content(0)))
			for range 200 {
				i := r.IntN(files)
				if _, err := open[i].ReadAt(got, 0); err != nil && err != io.EOF {
					errc <- err
					return
				}
				if !bytes.Equal(got, content(i)) {
					errc <- fmt.Errorf("/f%d read other bytes beside other readers", i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if held := c.DirectReadChunksHeld(); held > bound {
		t.Fatalf("%d chunks held open for direct reads after concurrent reads, bound %d", held, bound)
	}
	for _, f := range open {
		f.Close()
	}
	if held, n := c.DirectReadChunksHeld(), chunkFDs(t); held != 0 || n != 0 {
		t.Fatalf("after every File closed: %d chunks held, %d chunk descriptors open", held, n)
	}
}
