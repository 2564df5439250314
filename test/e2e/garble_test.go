package e2e

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pagecache"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// freePort returns a loopback address nothing listens on just now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// garbledWrites reads sluice_target_garbled_writes_total, summed over the
// targets, from the server's admin port.
func garbledWrites(t *testing.T, admin string) int {
	t.Helper()
	body := adminMetrics(t, admin)
	n := 0
	for _, m := range regexp.MustCompile(`(?m)^sluice_target_garbled_writes_total\{[^}]*\} (\d+)`).FindAllSubmatch(body, -1) {
		v, _ := strconv.Atoi(string(m[1]))
		n += v
	}
	return n
}

// TestGarbledInTransit puts a network that flips bits in chunk data and
// KV-cache values between the client library and the server (the server
// advertises the garbler as its address): writes and reads garbled in
// transit are caught by their CRC32C and sent again, so the file (and the
// value) holds and returns exactly the bytes written; data garbled more
// times in a row than the client retries fails the write with EIO and is
// never stored.
func TestGarbledInTransit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := proctest.StartGarbler(t)
	listen := freePort(t)
	s := startServer(t, "", "--listen", listen, "--advertise", g.Addr, "--inline-max", "0", "--http", "127.0.0.1:0")
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	g.SetUpstream(listen)
	connect := func() *client.Client {
		c, err := client.New(ctx, client.Options{Server: g.Addr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// Bytes 0xF0-0xFF: one flipped bit never makes such a byte zero or
	// leaves it as it was.
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = 0xF0 | byte(rng.IntN(16))
	}

	c := connect()
	g.Garble(3, 0)
	f, err := c.Create(ctx, "/ok")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close after writes garbled (and sent again): %v", err)
	}
	if w, _ := g.Garbled(); w != 3 {
		t.Fatalf("%d writes garbled, want 3", w)
	}
	if n := garbledWrites(t, admin); n != 3 {
		t.Errorf("the targets counted %d garbled writes, want 3", n)
	}

	g.Garble(0, 3) // one read garbled 3 times in a row: the client tries 4 times
	got, err := readFile(connect(), "/ok")
	if err != nil {
		t.Fatalf("read with replies garbled (and asked again): %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, not the %d written", len(got), len(data))
	}
	if _, r := g.Garbled(); r != 3 {
		t.Fatalf("%d read replies garbled, want 3", r)
	}

	// KV-cache values: a put garbled twice and a get garbled twice.
	if err := c.KVCreate(ctx, "kv", client.KVConfig{Capacity: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	kv, err := c.KVOpen(ctx, "kv")
	if err != nil {
		t.Fatal(err)
	}
	w0, r0 := g.Garbled()
	g.Garble(2, 2)
	if _, err := kv.Put(ctx, []string{"v"}, [][]byte{data[:1<<20]}); err != nil {
		t.Fatalf("kv put garbled twice (and sent again): %v", err)
	}
	vbuf := make([]byte, 1<<20)
	if n, err := kv.Get(ctx, []string{"v"}, [][]byte{vbuf}); err != nil || n[0] != 1<<20 || !bytes.Equal(vbuf, data[:1<<20]) {
		t.Fatalf("kv get garbled twice: %v, %v, or other bytes", n, err)
	}
	if w, r := g.Garbled(); w-w0 != 2 || r-r0 != 2 {
		t.Fatalf("%d kv puts and %d gets garbled, want 2 and 2", w-w0, r-r0)
	}
	// The value's pages were cached: its first reply went unread (ADR
	// 0030), checked block by block, and the garbled one was asked again
	// verified (kernels without cachestat(2) send nothing unread).
	want := int64(0)
	if pagecache.Supported() {
		want = 1
	}
	if st, err := kv.Stats(ctx); err != nil || st.SentUnread != want {
		t.Fatalf("kv gets sent unread: %d, %v; want %d", st.SentUnread, err, want)
	}

	// Garbled every time: the write fails, with EIO, and stores nothing
	// garbled.
	g.Garble(1000, 0)
	f, err = c.Create(ctx, "/bad")
	if err != nil {
		t.Fatal(err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	g.Garble(0, 0)
	err = werr
	if err == nil {
		err = cerr
	}
	if errs.CodeOf(err) != errs.Garbled || client.Errno(err) != 5 { // EIO
		t.Fatalf("write garbled every time: %v (code %v), want a garbled error (EIO)", err, errs.CodeOf(err))
	}
	got, err = readFile(connect(), "/bad")
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range got {
		if b != 0 && b != data[i] {
			t.Fatalf("byte %d of a file whose writes all failed reads %#x: garbled data was stored", i, b)
		}
	}
	s.stop()
}
