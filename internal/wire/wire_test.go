package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// startEcho starts a server whose OpChunkWrite handler echoes the request's
// data back and whose OpLookup handler fails for the name "missing".
func startEcho(t *testing.T) (*Server, string) {
	return startEchoOn(t, false)
}

// startEchoOn is startEcho; with local, Dial of its address calls it in
// process (ServeLocal).
func startEchoOn(t *testing.T, local bool, configure ...func(*Server)) (*Server, string) {
	t.Helper()
	srv := &Server{}
	for _, f := range configure {
		f(srv)
	}
	srv.Handle(OpChunkWrite, func(ctx context.Context, req *Request) (Response, error) {
		var m ChunkWriteReq
		if err := Unmarshal(req.Body, &m); err != nil {
			return Response{}, err
		}
		buf := GetBuf(len(req.Data))
		copy(buf, req.Data)
		return Response{Msg: &ChunkReadResp{ChunkLen: m.Off}, Data: buf, Release: func() { PutBuf(buf) }}, nil
	})
	srv.Handle(OpLookup, func(ctx context.Context, req *Request) (Response, error) {
		var m NameReq
		if err := Unmarshal(req.Body, &m); err != nil {
			return Response{}, err
		}
		if m.Name == "missing" {
			return Response{}, errs.New(errs.NotFound, "lookup %d/%q: not found", m.Parent, m.Name)
		}
		return Response{Msg: &Attr{Ino: m.Parent + 1, Size: uint64(len(m.Name))}}, nil
	})
	srv.Handle(OpGetAttr, func(ctx context.Context, req *Request) (Response, error) {
		panic("boom")
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()
	if local {
		srv.ServeLocal(l.Addr().String())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-done
	})
	return srv, l.Addr().String()
}

func dial(t *testing.T, addr string) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// transports runs a test over TCP and over an in-process connection.
func transports(t *testing.T, test func(t *testing.T, local bool)) {
	for _, local := range []bool{false, true} {
		name := "tcp"
		if local {
			name = "local"
		}
		t.Run(name, func(t *testing.T) { test(t, local) })
	}
}

func TestCallRoundTrip(t *testing.T) { transports(t, testCallRoundTrip) }

func testCallRoundTrip(t *testing.T, local bool) {
	_, addr := startEchoOn(t, local)
	c := dial(t, addr)
	if (c.local != nil) != local {
		t.Fatalf("in-process connection: %v, want %v", c.local != nil, local)
	}
	ctx := context.Background()

	var a Attr
	if _, err := c.Call(ctx, OpLookup, &NameReq{Parent: 41, Name: "abc"}, nil, &a, nil); err != nil {
		t.Fatal(err)
	}
	if a.Ino != 42 || a.Size != 3 {
		t.Fatalf("got attr %+v", a)
	}

	_, err := c.Call(ctx, OpLookup, &NameReq{Parent: 1, Name: "missing"}, nil, &a, nil)
	if !errors.Is(err, errs.ErrNotFound) || errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("want not found, got %v", err)
	}

	// Data split over several buffers arrives whole, and lands in respData.
	data := [][]byte{bytes.Repeat([]byte("a"), 1000), bytes.Repeat([]byte("b"), 3<<20)}
	out := make([]byte, 4<<20)
	var r ChunkReadResp
	n, err := c.Call(ctx, OpChunkWrite, &ChunkWriteReq{Off: 7}, data, &r, out)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1000+3<<20 || r.ChunkLen != 7 || !bytes.Equal(out[:n], append(append([]byte(nil), data[0]...), data[1]...)) {
		t.Fatalf("echo mismatch: n=%d len=%d", n, r.ChunkLen)
	}

	// A too-small response buffer is an error, and the connection survives.
	_, err = c.Call(ctx, OpChunkWrite, &ChunkWriteReq{}, [][]byte{make([]byte, 100)}, &r, make([]byte, 10))
	if errs.CodeOf(err) != errs.Protocol {
		t.Fatalf("want protocol error for short buffer, got %v", err)
	}
	// Unknown op and handler panic are errors; the connection keeps working.
	if _, err := c.Call(ctx, Op(999), nil, nil, nil, nil); errs.CodeOf(err) != errs.NotSupported {
		t.Fatalf("unknown op: %v", err)
	}
	if _, err := c.Call(ctx, OpGetAttr, &InoReq{Ino: 1}, nil, &a, nil); errs.CodeOf(err) != errs.Internal {
		t.Fatalf("panic: %v", err)
	}
	if _, err := c.Call(ctx, OpLookup, &NameReq{Parent: 1, Name: "x"}, nil, &a, nil); err != nil {
		t.Fatalf("connection broken after errors: %v", err)
	}
}

func TestConcurrentCalls(t *testing.T) { transports(t, testConcurrentCalls) }

// Half the callers have a deadline: their frames are written by the
// calling goroutine when the connection's writer is idle, the others'
// by the writer; some carry 256 KiB, so that writes take turns.
func testConcurrentCalls(t *testing.T, local bool) {
	_, addr := startEchoOn(t, local)
	c := dial(t, addr)
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for g := range 32 {
		wg.Go(func() {
			for i := range 200 {
				payload := []byte(fmt.Sprintf("g%d-i%d", g, i))
				if i%7 == 0 {
					payload = append(payload, bytes.Repeat([]byte{byte(g)}, 256<<10)...)
				}
				out := make([]byte, len(payload))
				var r ChunkReadResp
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if g%2 == 0 {
					ctx, cancel = context.WithTimeout(ctx, time.Minute)
				}
				n, err := c.Call(ctx, OpChunkWrite, &ChunkWriteReq{Off: uint64(i)}, [][]byte{payload}, &r, out)
				cancel()
				if err != nil {
					errc <- err
					return
				}
				if !bytes.Equal(out[:n], payload) || r.ChunkLen != uint64(i) {
					errc <- fmt.Errorf("mixed up replies: sent %q got %q", payload, out[:n])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

// TestCallToPeerThatStopsReading: a call with a deadline whose frame
// cannot be written (the peer answered the hello and then read nothing
// more, so the socket's buffers fill) fails by its deadline with
// Unavailable instead of hanging, and so does the next call on the
// connection, which it dropped.
func TestCallToPeerThatStopsReading(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		nc, err := l.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		hello := make([]byte, helloSize)
		if _, err := io.ReadFull(nc, hello); err != nil {
			return
		}
		putHello(hello, 0)
		nc.Write(hello)
		<-stop
	}()
	c := dial(t, l.Addr().String())
	big := make([]byte, MaxData)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := c.Call(ctx, OpChunkWrite, &ChunkWriteReq{}, [][]byte{big}, &ChunkReadResp{}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if errs.CodeOf(err) != errs.Unavailable {
			t.Fatalf("a call to a peer that reads nothing: %v, want unavailable", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a call to a peer that reads nothing did not return")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Call(ctx, OpStatfs, nil, nil, &StatfsResp{}, nil); errs.CodeOf(err) != errs.Unavailable || ctx.Err() != nil {
		t.Fatalf("the next call: %v, want a prompt unavailable", err)
	}
}

// TestExpiredCallKeepsConnection: a call whose deadline has already
// passed fails, and the connection stays usable for the next call (the
// call is not written with a deadline in the past, which would fail the
// write and drop the connection).
func TestExpiredCallKeepsConnection(t *testing.T) { transports(t, testExpiredCallKeepsConnection) }

func testExpiredCallKeepsConnection(t *testing.T, local bool) {
	_, addr := startEchoOn(t, local)
	c := dial(t, addr)
	for range 20 {
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		_, err := c.Call(ctx, OpLookup, &NameReq{Parent: 41, Name: "abc"}, nil, &Attr{}, nil)
		cancel()
		if errs.CodeOf(err) != errs.Unavailable {
			t.Fatalf("a call past its deadline: %v, want unavailable", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var a Attr
	if _, err := c.Call(ctx, OpLookup, &NameReq{Parent: 41, Name: "abc"}, nil, &a, nil); err != nil || a.Ino != 42 {
		t.Fatalf("the call after calls past their deadline: %+v, %v", a, err)
	}
}

func TestGarbageClosesOnlyThatConnection(t *testing.T) {
	_, addr := startEcho(t)
	good := dial(t, addr)

	cases := map[string][]byte{
		"not a hello":   []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"huge body":     append(helloBytes(), frameHeader(MaxBody+1, 0, 0)...),
		"huge data":     append(helloBytes(), frameHeader(0, MaxData+1, 0)...),
		"bad flags":     append(helloBytes(), frameHeader(0, 0, 0x80)...),
		"response sent": append(helloBytes(), frameHeader(0, 0, flagResponse)...),
	}
	for name, junk := range cases {
		t.Run(name, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.Write(junk)
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			// The server answers at most a hello and then closes: reading
			// must reach EOF, not time out.
			_, err = io.Copy(io.Discard, nc)
			if err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("server did not close the connection: %v", err)
			}
		})
	}
	var a Attr
	if _, err := good.Call(context.Background(), OpLookup, &NameReq{Parent: 1, Name: "ok"}, nil, &a, nil); err != nil {
		t.Fatalf("good connection broken by another's garbage: %v", err)
	}
}

func TestContextCancelAndServerGone(t *testing.T) { transports(t, testContextCancelAndServerGone) }

func testContextCancelAndServerGone(t *testing.T, local bool) {
	srv := &Server{}
	block := make(chan struct{})
	seen := make(chan []byte, 1)
	srv.Handle(OpStatfs, func(ctx context.Context, req *Request) (Response, error) {
		<-block
		seen <- bytes.Clone(req.Data)
		return Response{Msg: &StatfsResp{}}, nil
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(l) }()
	if local {
		srv.ServeLocal(l.Addr().String())
	}
	c := dial(t, l.Addr().String())

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	data := []byte("original")
	if _, err := c.Call(ctx, OpStatfs, nil, [][]byte{data}, &StatfsResp{}, nil); errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("want unavailable on deadline, got %v", err)
	}
	// The caller may reuse its buffer once Call returned, even if the
	// handler has not run yet: the handler sees what was sent.
	copy(data, "CHANGED!")
	close(block)
	if got := <-seen; string(got) != "original" {
		t.Fatalf("handler saw %q, want the data as sent", got)
	}
	srv.Close()
	<-served
	// Calls on a connection whose server went away fail, they do not hang.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	_, err = c.Call(ctx2, OpStatfs, nil, nil, &StatfsResp{}, nil)
	if errs.CodeOf(err) != errs.Unavailable || ctx2.Err() != nil {
		t.Fatalf("want prompt unavailable after server close, got %v", err)
	}
}

func helloBytes() []byte {
	b := make([]byte, helloSize)
	putHello(b, 0)
	return b
}

func frameHeader(body, data uint32, flags uint16) []byte {
	b := make([]byte, HeaderSize)
	h := Header{BodyLen: body, DataLen: data, ID: 1, Op: OpLookup, Flags: flags}
	h.Put(b)
	return b
}

// TestLocalWorkers: in-process calls run on workers that outlive them: more
// calls at once than maxIdleLocal all complete, at most maxIdleLocal workers
// stay idle afterwards, sequential calls reuse them instead of starting
// goroutines, and Shutdown ends them.
func TestLocalWorkers(t *testing.T) {
	srv := &Server{}
	release := make(chan struct{})
	var started sync.WaitGroup
	srv.Handle(OpStatfs, func(ctx context.Context, req *Request) (Response, error) {
		if len(req.Data) > 0 {
			started.Done()
			<-release
		}
		return Response{Msg: &StatfsResp{Inodes: uint64(len(req.Data))}}, nil
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(l) }()
	srv.ServeLocal(l.Addr().String())
	c := dial(t, l.Addr().String())
	ctx := context.Background()

	const n = maxIdleLocal + 44
	started.Add(n)
	errc := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			var r StatfsResp
			_, err := c.Call(ctx, OpStatfs, nil, [][]byte{[]byte("block")}, &r, nil)
			if err == nil && r.Inodes != 5 {
				err = fmt.Errorf("reply %+v", r)
			}
			errc <- err
		}()
	}
	started.Wait() // every call runs at once: none waited for a worker
	close(release)
	for i := 0; i < n; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if idle := srv.localIdle.Load(); idle > maxIdleLocal {
		t.Fatalf("%d idle workers, want at most %d", idle, maxIdleLocal)
	}
	// Wait until the workers that exceed the bound have gone, then check
	// that sequential calls start no goroutines.
	waitFor(t, func() bool { return srv.localIdle.Load() == maxIdleLocal })
	before := runtime.NumGoroutine()
	for i := 0; i < 200; i++ {
		if _, err := c.Call(ctx, OpStatfs, nil, nil, &StatfsResp{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("goroutines grew from %d to %d over sequential calls", before, after)
	}
	srv.Close()
	<-served
	waitFor(t, func() bool { return srv.localIdle.Load() == 0 })
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
	}
}
