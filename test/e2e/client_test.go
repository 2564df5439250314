package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/wire"
)

func randBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	return b
}

func writeFile(t *testing.T, c *client.Client, p string, data []byte) {
	t.Helper()
	if err := proctest.WriteFile(context.Background(), c, p, data); err != nil {
		t.Fatal(err)
	}
}

func readFile(c *client.Client, p string) ([]byte, error) {
	f, err := c.Open(context.Background(), p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.NewSectionReader(f, 0, 1<<62))
}

func TestClientFileSemantics(t *testing.T) {
	s := startServer(t, "")
	c := s.client()
	ctx := context.Background()

	// Writes at odd offsets across stripes, with a hole, read back exactly.
	if err := c.Mkdir(ctx, "/f", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := c.OpenFile(ctx, "/f/sparse", client.O_RDWR|client.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	model := make([]byte, 0)
	put := func(off int, data []byte) {
		if _, err := f.WriteAt(data, int64(off)); err != nil {
			t.Fatal(err)
		}
		if end := off + len(data); end > len(model) {
			model = append(model, make([]byte, end-len(model))...)
		}
		copy(model[off:], data)
	}
	put(3, []byte("abc"))
	put(1<<20-5, randBytes(1, 3<<20))   // crosses stripes and targets
	put(9<<20+12345, randBytes(2, 777)) // leaves a hole
	got := make([]byte, len(model))
	if n, err := f.ReadAt(got, 0); n != len(model) || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if !bytes.Equal(got, model) {
		t.Fatal("read-back differs from what was written (including zeros in the hole)")
	}
	if err := f.Truncate(ctx, 2<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(ctx, 4<<20); err != nil {
		t.Fatal(err)
	}
	model = append(model[:2<<20], make([]byte, 2<<20)...)
	got = make([]byte, 4<<20)
	if _, err := f.ReadAt(got, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if !bytes.Equal(got, model) {
		t.Fatal("after truncate down then up, the tail is not zeros")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := c.Stat(ctx, "/f/sparse")
	if err != nil || fi.Size() != 4<<20 {
		t.Fatalf("stat: %v, size %d", err, fi.Size())
	}

	// Sequential reads (read-ahead path) of a large striped file.
	big := randBytes(3, 37<<20+11)
	writeFile(t, c, "/f/big", big)
	rf, _ := c.Open(ctx, "/f/big")
	var buf bytes.Buffer
	if _, err := io.CopyBuffer(&buf, struct{ io.Reader }{rf}, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	rf.Close()
	if !bytes.Equal(buf.Bytes(), big) {
		t.Fatal("sequential read of a 37 MiB file differs")
	}

	// Namespace: rename variants, links, xattrs, readdir of many entries.
	writeFile(t, c, "/f/a", []byte("A"))
	writeFile(t, c, "/f/b", []byte("B"))
	if err := c.RenameNoReplace(ctx, "/f/a", "/f/b"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("rename noreplace over existing: %v", err)
	}
	if err := c.Exchange(ctx, "/f/a", "/f/b"); err != nil {
		t.Fatal(err)
	}
	if d, _ := readFile(c, "/f/a"); string(d) != "B" {
		t.Fatalf("after exchange /f/a = %q", d)
	}
	if err := c.Rename(ctx, "/f/a", "/f/b"); err != nil { // replaces
		t.Fatal(err)
	}
	if d, _ := readFile(c, "/f/b"); string(d) != "B" {
		t.Fatalf("after rename-replace /f/b = %q", d)
	}
	if err := c.Mkdir(ctx, "/f/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "/f", "/f/sub/inside"); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("rename into own subtree: %v", err)
	}
	if err := c.SetXattr(ctx, "/f/b", "user.k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, err := c.GetXattr(ctx, "/f/b", "user.k"); err != nil || string(v) != "v" {
		t.Fatalf("getxattr = %q, %v", v, err)
	}
	if err := c.Symlink(ctx, "b", "/f/lnk"); err != nil {
		t.Fatal(err)
	}
	if d, err := readFile(c, "/f/lnk"); err != nil || string(d) != "B" {
		t.Fatalf("read through relative symlink: %q %v", d, err)
	}
	if err := c.Mkdir(ctx, "/many", 0o755); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < 3000; i += 8 {
				f, err := c.Create(ctx, fmt.Sprintf("/many/e%05d", i))
				if err != nil {
					t.Error(err)
					return
				}
				f.Close()
			}
		})
	}
	wg.Wait()
	ents, err := c.ReadDirAll(ctx, "/many")
	if err != nil || len(ents) != 3000 {
		t.Fatalf("readdir: %d entries, %v", len(ents), err)
	}
	for i, e := range ents {
		if e.Name != fmt.Sprintf("e%05d", i) {
			t.Fatalf("entry %d is %q", i, e.Name)
		}
	}
	st, err := c.Statfs(ctx)
	if err != nil || st.Targets != 4 || st.Capacity <= 0 || st.Inodes < 3000 {
		t.Fatalf("statfs: %+v %v", st, err)
	}
}

// TestCorruptionDetected flips one byte of a chunk file on disk: the read
// must fail as corruption, never return the wrong byte. The file's pages
// are in the page cache, so the target first sends them unread (sendfile,
// wire.ReadFlagUnverified): the client's check finds the damage, the
// target then verifies the bytes itself and reports it.
func TestCorruptionDetected(t *testing.T) {
	s := startServer(t, "", "--http", "127.0.0.1:0")
	c := s.client()
	data := randBytes(4, 300<<10)
	writeFile(t, c, "/victim", data)
	if got, err := readFile(c, "/victim"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("clean read failed: %v", err)
	}
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n := proctest.MetricSum(proctest.Metrics(t, admin), "sluice_target_read_sent_unread_total"); n == 0 {
		t.Error("the clean read of cached chunks was not sent unread (sluice_target_read_sent_unread_total is 0)")
	}
	// Find the chunk's data file: the largest regular file under targets/.
	var chunkPath string
	var chunkSize int64
	filepath.WalkDir(filepath.Join(s.dataDir, "targets"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil && fi.Size() > chunkSize {
				chunkPath, chunkSize = p, fi.Size()
			}
		}
		return nil
	})
	if chunkSize < int64(len(data)) {
		t.Fatalf("no chunk file of %d bytes found under %s (largest %q, %d)", len(data), s.dataDir, chunkPath, chunkSize)
	}
	s.stop() // so that no cache hides the change
	raw, err := os.ReadFile(chunkPath)
	if err != nil {
		t.Fatal(err)
	}
	off := 200<<10 + 17
	raw[off] ^= 0x40
	if err := os.WriteFile(chunkPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, s.dataDir, "--http", "127.0.0.1:0")
	c = s.client()
	_, err = readFile(c, "/victim")
	if errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("read of a corrupted chunk: want a corruption error, got %v", err)
	}
	if admin, err = s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	page := proctest.Metrics(t, admin)
	if proctest.MetricSum(page, "sluice_target_read_sent_unread_total") == 0 || proctest.MetricSum(page, "sluice_target_checksum_failures_total") == 0 {
		t.Errorf("the damaged block was not sent unread first and then found by the target: sent unread %v, checksum failures %v",
			proctest.MetricSum(page, "sluice_target_read_sent_unread_total"), proctest.MetricSum(page, "sluice_target_checksum_failures_total"))
	}
	// A read of the healthy part still works.
	f, _ := c.Open(context.Background(), "/victim")
	head := make([]byte, 64<<10)
	if _, err := f.ReadAt(head, 0); err != nil || !bytes.Equal(head, data[:64<<10]) {
		t.Fatalf("read of an intact block: %v", err)
	}
	f.Close()
	msg := s.failCLI("corruption", "cat", "/victim")
	if !strings.Contains(msg, fmt.Sprint(off/(64<<10)*(64<<10))) && !strings.Contains(msg, "offset") {
		t.Errorf("corruption message does not say where: %q", msg)
	}
	if !strings.Contains(s.proc.Logs(), "corrupt") {
		t.Errorf("server did not log the corruption: %s", s.proc.Logs())
	}
}

// TestKill9DuringWrites kills the server with SIGKILL while a stream of
// writes is in flight, restarts it, and checks every acknowledged write.
func TestKill9DuringWrites(t *testing.T) {
	s := startServer(t, "")
	c := s.client()
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/k", 0o755); err != nil {
		t.Fatal(err)
	}

	type acked struct {
		path string
		data []byte
	}
	var mu sync.Mutex
	var files []acked
	var appendAcked []byte // acknowledged prefix of /k/log
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := fmt.Sprintf("/k/w%d-%d", w, i)
				data := randBytes(uint64(w*100000+i), 1+(i*37919)%(3<<20))
				f, err := c.Create(ctx, p)
				if err != nil {
					return
				}
				if _, err := f.Write(data); err != nil {
					return
				}
				if err := f.Close(); err != nil {
					return
				}
				mu.Lock()
				files = append(files, acked{p, data})
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		f, err := c.Create(ctx, "/k/log")
		if err != nil {
			return
		}
		for i := 0; ; i++ {
			rec := randBytes(uint64(9000000+i), 100+i%20000)
			if _, err := f.Write(rec); err != nil {
				return
			}
			if err := f.Sync(); err != nil {
				return
			}
			mu.Lock()
			appendAcked = append(appendAcked, rec...)
			mu.Unlock()
		}
	})
	// Let the writers get going, then kill the server mid-stream.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n, m := len(files), len(appendAcked)
		mu.Unlock()
		if n >= 30 && m >= 1<<20 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.kill()
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(files) == 0 || len(appendAcked) == 0 {
		t.Fatalf("no acknowledged writes before the kill (%d files, %d log bytes)", len(files), len(appendAcked))
	}
	t.Logf("killed with %d files and %d log bytes acknowledged", len(files), len(appendAcked))

	s2 := startServer(t, s.dataDir)
	c2 := s2.client()
	for _, a := range files {
		got, err := readFile(c2, a.path)
		if err != nil {
			t.Fatalf("acknowledged file %s: %v", a.path, err)
		}
		if !bytes.Equal(got, a.data) {
			t.Fatalf("acknowledged file %s differs after kill -9 (%d bytes, want %d)", a.path, len(got), len(a.data))
		}
	}
	got, err := readFile(c2, "/k/log")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < len(appendAcked) || !bytes.Equal(got[:len(appendAcked)], appendAcked) {
		t.Fatalf("acknowledged prefix of /k/log lost or changed: have %d bytes, %d acknowledged", len(got), len(appendAcked))
	}
	// The file system is still usable after the crash.
	writeFile(t, c2, "/k/after", []byte("fine"))
	s2.stop()
}

func TestRestartFindsEverything(t *testing.T) {
	s := startServer(t, "")
	c := s.client()
	ctx := context.Background()
	c.MkdirAll(ctx, "/r/s/t", 0o750)
	data := randBytes(5, 5<<20)
	writeFile(t, c, "/r/s/t/file", data)
	c.SetXattr(ctx, "/r/s", "user.tag", []byte("x"))
	c.Close()
	s.stop()

	s2 := startServer(t, s.dataDir)
	c2 := s2.client()
	if got, err := readFile(c2, "/r/s/t/file"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file after restart: %v", err)
	}
	if v, err := c2.GetXattr(ctx, "/r/s", "user.tag"); err != nil || string(v) != "x" {
		t.Fatalf("xattr after restart: %q %v", v, err)
	}
	fi, err := c2.Stat(ctx, "/r/s/t")
	if err != nil || fi.Mode().Perm() != 0o750 || !fi.IsDir() {
		t.Fatalf("dir after restart: %v %v", fi, err)
	}
}

// TestBadPeers sends garbage and half a write frame: those connections are
// dropped, the server keeps serving, and stored data is intact.
func TestBadPeers(t *testing.T) {
	s := startServer(t, "")
	c := s.client()
	data := randBytes(6, 2<<20)
	writeFile(t, c, "/keep", data)

	junk, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	junk.Write([]byte("\x00\x01garbage that is not a sluice hello at all\r\n\r\n"))
	junk.Close()

	// A client that claims an 8 MiB write, sends half and disconnects.
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	hello := []byte{'S', 'L', 'C', 'E', 1, 0, 0, 0}
	conn.Write(hello)
	io.ReadFull(conn, make([]byte, 8))
	fi, _ := c.Stat(context.Background(), "/keep")
	attr := fi.Attr()
	body := wire.Marshal(&wire.ChunkWriteReq{ChunkRef: wire.ChunkRef{Target: 1, Ino: attr.Ino, Slot: 0}, Off: 0})
	hdr := make([]byte, wire.HeaderSize)
	h := wire.Header{BodyLen: uint32(len(body)), DataLen: 8 << 20, ID: 1, Op: wire.OpChunkWrite}
	h.Put(hdr)
	conn.Write(hdr)
	conn.Write(body)
	conn.Write(bytes.Repeat([]byte{0xEE}, 4<<20))
	conn.Close()

	got, err := readFile(c, "/keep")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("data damaged by a half-sent write: %v", err)
	}
	writeFile(t, c, "/after", []byte("ok"))
}

// TestSizeAfterTruncateThenWrite: a write that ends below the file's
// earlier size, after a truncate down, must still record its size.
func TestSizeAfterTruncateThenWrite(t *testing.T) {
	s := startServer(t, "")
	c := s.client()
	ctx := context.Background()
	f, err := c.Create(ctx, "/t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(randBytes(12, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	tail := randBytes(13, 100)
	if _, err := f.WriteAt(tail, 5000); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := c.Stat(ctx, "/t")
	if err != nil || fi.Size() != 5100 {
		t.Fatalf("size after truncate to 1000 and a write ending at 5100: %d, %v", fi.Size(), err)
	}
	got, err := readFile(c, "/t")
	if err != nil || len(got) != 5100 || !bytes.Equal(got[5000:], tail) || !bytes.Equal(got[1000:5000], make([]byte, 4000)) {
		t.Fatalf("content after truncate and write is wrong (%d bytes, %v)", len(got), err)
	}
}

// TestUnalignedReadSentUnread reads a one-chunk file in reads larger than
// the read-ahead block that start and end inside checksum blocks: the
// client splits each at the blocks (splitAtBlocks), so the whole blocks
// between are sent unread (ADR 0030) and only the partial blocks at the
// edges are read by the target. Every byte must read right.
func TestUnalignedReadSentUnread(t *testing.T) {
	s := startServer(t, "", "--http", "127.0.0.1:0")
	c := s.client()
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/one", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/one", client.Layout{StripeCount: 1, StripeSize: 16 << 20}); err != nil {
		t.Fatal(err)
	}
	data := randBytes(9, 40<<20)
	writeFile(t, c, "/one/f", data)
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Open(ctx, "/one/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := proctest.MetricSum(proctest.Metrics(t, admin), "sluice_target_read_sent_unread_total")
	p := make([]byte, 16<<20+12345) // the read-ahead block is the stripe, 16 MiB
	reads := 0
	for off := int64(4099); off+int64(len(p)) <= int64(len(data)); off += int64(len(p)) {
		if n, err := f.ReadAt(p, off); err != nil || n != len(p) || !bytes.Equal(p, data[off:off+int64(n)]) {
			t.Fatalf("read at %d: %d bytes, %v, or other bytes", off, n, err)
		}
		reads++
	}
	if n := proctest.MetricSum(proctest.Metrics(t, admin), "sluice_target_read_sent_unread_total") - before; n < float64(reads) {
		t.Fatalf("%v of %d unaligned reads had their whole blocks sent unread", n, reads)
	}
}
