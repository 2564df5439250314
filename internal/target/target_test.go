package target

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/chunk"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// checkGoroutines fails the test if goroutines started during it are
// still running once its cleanups ran.
func checkGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines leaked:\n%s", n-before, buf[:runtime.Stack(buf, true)])
		}
	})
}

type env struct {
	svc  *Service
	addr string
	dir  string
}

// start runs a wire.Server with a Service on loopback; cleanups stop both.
func start(t *testing.T, ids ...placement.TargetID) *env {
	t.Helper()
	checkGoroutines(t)
	return startEnv(t, ids...)
}

// startEnv is start without the goroutine check, for tests that start
// several servers (and check once, before the first).
func startEnv(t *testing.T, ids ...placement.TargetID) *env {
	t.Helper()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	svc, err := OpenDir(dir, ids, Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := &wire.Server{Logger: log}
	svc.Register(srv)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, wire.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
		if err := svc.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &env{svc: svc, addr: l.Addr().String(), dir: dir}
}

func dial(t *testing.T, addr string) *wire.Conn {
	t.Helper()
	c, err := wire.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func data(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func write(ctx context.Context, c *wire.Conn, ref wire.ChunkRef, off uint64, p []byte, sync bool) error {
	_, err := c.Call(ctx, wire.OpChunkWrite, &wire.ChunkWriteReq{ChunkRef: ref, Off: off, Sync: sync}, [][]byte{p}, nil, nil)
	return err
}

func read(ctx context.Context, c *wire.Conn, ref wire.ChunkRef, off uint64, n int) ([]byte, uint64, error) {
	var resp wire.ChunkReadResp
	buf := make([]byte, n)
	got, err := c.Call(ctx, wire.OpChunkRead, &wire.ChunkReadReq{ChunkRef: ref, Off: off, Len: uint32(n)}, nil, &resp, buf)
	return buf[:got], resp.ChunkLen, err
}

func stat(ctx context.Context, c *wire.Conn, id placement.TargetID) (wire.TargetStat, error) {
	var st wire.TargetStat
	_, err := c.Call(ctx, wire.OpTargetStat, &wire.TargetReq{Target: id}, nil, &st, nil)
	return st, err
}

func TestOperationsOverLoopback(t *testing.T) {
	e := start(t, 1, 2)
	c := dial(t, e.addr)
	ctx := context.Background()
	ref := wire.ChunkRef{Target: 2, Ino: 1234, Slot: 1}

	p := data(1, 300_000)
	if err := write(ctx, c, ref, 1000, p, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, wire.OpChunkSync, &wire.ChunkSyncReq{ChunkSetReq: wire.ChunkSetReq{Target: 2, Ino: 1234, Slots: []uint32{1, 5}}}, nil, nil, nil); err != nil {
		t.Fatalf("sync: %v", err)
	}
	got, clen, err := read(ctx, c, ref, 0, 400_000)
	if err != nil {
		t.Fatal(err)
	}
	if clen != 301_000 || len(got) != 301_000 || !bytes.Equal(got[:1000], make([]byte, 1000)) || !bytes.Equal(got[1000:], p) {
		t.Fatalf("read back: length %d, %d bytes, content ok %v", clen, len(got), bytes.Equal(got[1000:], p))
	}
	// The same chunk on the other target does not exist.
	if got, clen, err := read(ctx, c, wire.ChunkRef{Target: 1, Ino: 1234, Slot: 1}, 0, 10); err != nil || len(got) != 0 || clen != 0 {
		t.Fatalf("read of a missing chunk: %d bytes, length %d, %v", len(got), clen, err)
	}

	if _, err := c.Call(ctx, wire.OpChunkTruncate, &wire.ChunkTruncateReq{ChunkRef: ref, Size: 5000}, nil, nil, nil); err != nil {
		t.Fatalf("truncate: %v", err)
	}
	if got, clen, err = read(ctx, c, ref, 4000, 10_000); err != nil || clen != 5000 || !bytes.Equal(got, p[3000:4000]) {
		t.Fatalf("read after truncate: %d bytes, length %d, %v", len(got), clen, err)
	}

	st, err := stat(ctx, c, 2)
	if err != nil {
		t.Fatal(err)
	}
	if st.Target != 2 || st.Chunks != 1 || st.Used != 5000 || st.Capacity <= 0 || st.Free <= 0 || st.Free > st.Capacity {
		t.Fatalf("stat: %+v", st)
	}

	if _, err := c.Call(ctx, wire.OpChunkRemove, &wire.ChunkRemoveReq{ChunkSetReq: wire.ChunkSetReq{Target: 2, Ino: 1234, Slots: []uint32{0, 1}}}, nil, nil, nil); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if st, _ = stat(ctx, c, 2); st.Chunks != 0 || st.Used != 0 {
		t.Fatalf("stat after remove: %+v", st)
	}
	if got, clen, err = read(ctx, c, ref, 0, 10); err != nil || clen != 0 || len(got) != 0 {
		t.Fatalf("read after remove: %d bytes, length %d, %v", len(got), clen, err)
	}

	stats, ok := e.svc.Stats(2)
	if !ok || stats.WriteOps != 1 || stats.WriteBytes != uint64(len(p)) || stats.ReadOps != 3 || stats.ReadBytes != 301_000+1000 ||
		stats.SyncOps != 1 || stats.TruncateOps != 1 || stats.RemoveOps != 1 {
		t.Fatalf("stats: %+v", stats)
	}
}

func TestErrorsOverLoopback(t *testing.T) {
	e := start(t, 3)
	c := dial(t, e.addr)
	ctx := context.Background()

	_, err := stat(ctx, c, 99)
	var we *errs.Error
	if !errors.As(err, &we) || we.Code != errs.NotFound || !strings.Contains(we.Msg, "target 99") {
		t.Fatalf("stat of an unknown target: %v", err)
	}
	if err := write(ctx, c, wire.ChunkRef{Target: 3}, 1<<62, []byte("x"), false); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("write at an absurd offset: %v", err)
	}
	if _, _, err := read(ctx, c, wire.ChunkRef{Target: 3}, 1<<63+5, 10); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("read at an offset past int64: %v", err)
	}
	// A body that does not decode.
	if _, err := c.Call(ctx, wire.OpChunkWrite, &wire.TargetReq{Target: 3}, nil, nil, nil); errs.CodeOf(err) != errs.Protocol {
		t.Fatalf("truncated write request: %v", err)
	}

	// Corruption surfaces as errs.Corruption on the client.
	ref := wire.ChunkRef{Target: 3, Ino: 77, Slot: 0}
	p := data(2, 200_000)
	if err := write(ctx, c, ref, 0, p, true); err != nil {
		t.Fatal(err)
	}
	st, _ := e.svc.Store(3)
	dataPath, _ := st.Paths(chunk.ID{Ino: 77})
	f, err := os.OpenFile(dataPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{p[150_000] ^ 1}, 150_000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, _, err = read(ctx, c, ref, 0, len(p))
	if !errors.As(err, &we) || we.Code != errs.Corruption || !strings.Contains(we.Msg, "offset 131072") || !strings.Contains(we.Msg, "ino 77 slot 0") {
		t.Fatalf("read of a corrupt chunk: %v", err)
	}
	if got, _, err := read(ctx, c, ref, 0, 131072); err != nil || !bytes.Equal(got, p[:131072]) {
		t.Fatalf("read of the intact part: %v", err)
	}
	if s, err := stat(ctx, c, 3); err != nil || s.Corruptions != 1 {
		t.Fatalf("stat after corruption: %+v, %v", s, err)
	}
}

func hello() []byte {
	b := []byte("SLCE\x00\x00\x00\x00")
	binary.LittleEndian.PutUint16(b[4:], wire.Version)
	return b
}

// rawConn is a TCP connection that has done the hello by hand.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if _, err := nc.Write(hello()); err != nil {
		t.Fatal(err)
	}
	var h [8]byte
	if _, err := io.ReadFull(nc, h[:]); err != nil || string(h[:4]) != "SLCE" {
		t.Fatalf("hello: %q, %v", h, err)
	}
	return nc
}

func TestGarbageClosesOnlyThatConnection(t *testing.T) {
	e := start(t, 1)
	good := dial(t, e.addr)
	ctx := context.Background()
	ref := wire.ChunkRef{Target: 1, Ino: 5}
	if err := write(ctx, good, ref, 0, []byte("before"), true); err != nil {
		t.Fatal(err)
	}

	bad := rawConn(t, e.addr)
	garbage := bytes.Repeat([]byte{0xff}, 64) // flags 0xffff and huge lengths
	if _, err := bad.Write(garbage); err != nil {
		t.Fatal(err)
	}
	bad.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := bad.Read(make([]byte, 16)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server kept a connection that sent garbage: read %d, %v", n, err)
	}

	// Not even a Sluice peer.
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write([]byte("GET / HTTP/1.0\r\n\r\n"))

	if err := write(ctx, good, ref, 6, []byte(" after"), true); err != nil {
		t.Fatalf("the good client failed after the bad one: %v", err)
	}
	if got, _, err := read(ctx, good, ref, 0, 100); err != nil || string(got) != "before after" {
		t.Fatalf("read: %q, %v", got, err)
	}
}

func TestClientDiesMidWrite(t *testing.T) {
	e := start(t, 1)
	c := dial(t, e.addr)
	ctx := context.Background()
	ref := wire.ChunkRef{Target: 1, Ino: 9, Slot: 2}
	p := data(3, 100_000)
	if err := write(ctx, c, ref, 0, p, true); err != nil {
		t.Fatal(err)
	}

	// A write request that claims 8 MiB of data over the same chunk, then
	// sends half and hangs up.
	raw := rawConn(t, e.addr)
	body := wire.Marshal(&wire.ChunkWriteReq{ChunkRef: ref, Off: 0, Sync: true})
	h := wire.Header{BodyLen: uint32(len(body)), DataLen: 8 << 20, ID: 1, Op: wire.OpChunkWrite}
	var hb [wire.HeaderSize]byte
	h.Put(hb[:])
	if _, err := raw.Write(append(hb[:], body...)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Write(bytes.Repeat([]byte{0xee}, 4<<20)); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	// The target is healthy and the chunk untouched.
	if got, clen, err := read(ctx, c, ref, 0, 200_000); err != nil || clen != uint64(len(p)) || !bytes.Equal(got, p) {
		t.Fatalf("after the aborted write: length %d, intact %v, %v", clen, bytes.Equal(got, p), err)
	}
	q := data(4, 8<<20)
	if err := write(ctx, c, ref, 0, q, true); err != nil {
		t.Fatalf("a full 8 MiB write after the aborted one: %v", err)
	}
	if got, _, err := read(ctx, c, ref, 0, len(q)); err != nil || !bytes.Equal(got, q) {
		t.Fatalf("8 MiB read back: %v", err)
	}
	if st, err := stat(ctx, c, 1); err != nil || st.Chunks != 1 {
		t.Fatalf("stat: %+v, %v", st, err)
	}
}

func TestOpenDirRestart(t *testing.T) {
	checkGoroutines(t)
	dir := t.TempDir()
	svc, err := OpenDir(dir, []placement.TargetID{1, 2, 3, 4}, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := svc.Store(3)
	if err := st.WriteAt(chunk.ID{Ino: 1}, 0, []byte("kept"), false); err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if svc, err = OpenDir(dir, []placement.TargetID{1, 2, 3, 4}, Options{}); err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	st, _ = svc.Store(3)
	buf := make([]byte, 10)
	if n, _, err := st.ReadAt(chunk.ID{Ino: 1}, 0, buf); err != nil || string(buf[:n]) != "kept" {
		t.Fatalf("after restart: %q, %v", buf[:n], err)
	}
	if got := svc.Targets(); len(got) != 4 || got[0] != 1 || got[3] != 4 {
		t.Fatalf("Targets() = %v", got)
	}
	// A target directory used under another ID is refused.
	if err := os.Rename(Dir(dir, 4), Dir(dir, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDir(dir, []placement.TargetID{5}, Options{}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("OpenDir of a renamed target directory: %v", err)
	}
}
