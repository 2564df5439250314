package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Request is one incoming request. Body and Data belong to the server and
// are valid only until the handler returns.
type Request struct {
	Op     Op
	Body   []byte
	Data   []byte
	Remote string
	// Conn identifies the connection the request came on, unique among
	// the connections of this process (TCP and in-process alike), so a
	// service can tell one client's requests from another's (OpWatch
	// leaves out the caller's own changes).
	Conn uint64
	// Received is when the whole frame had been read: the time until the
	// handler starts is the request's queue wait.
	Received time.Time
	// Epoch is when the connection's hello had been read, before it was
	// answered: the moment requests' ApplyBy counts from (applyby.go).
	Epoch time.Time
	// Deadline is an in-process caller's context deadline (zero if none,
	// and over TCP).
	Deadline time.Time
	// Session is what the connection's client declared (OpSession).
	Session *Session
	// Local: the request came in process (ServeLocal), not over a socket.
	Local bool
	// SendFile: the reply may name its data as a range of a file
	// (Response.DataFile), which the connection sends with sendfile(2).
	SendFile bool
}

// slot is a request's place given by Server.Admit, nil if none.
type slot struct{ release func() }

// free gives the place back; it may be called again.
func (sl *slot) free() {
	if sl != nil && sl.release != nil {
		sl.release()
		sl.release = nil
	}
}

// slotReadTimeout bounds how long a request holding a slot may take to
// arrive whole: a client stopped in the middle of a frame (suspended, or
// cut off) must not keep the slot. Past it the slot is given back and the
// frame read on without one.
const slotReadTimeout = 100 * time.Millisecond

// Response is a handler's reply: an optional body message and data. If
// Release is set it is called once the data has been written (or dropped),
// so the handler can pool its buffer.
type Response struct {
	Msg  Message
	Data []byte
	// DataFile, only where the request allowed it (Request.SendFile) and
	// instead of Data, is the data as a range of a file: the connection
	// passes it from the page cache to the socket with sendfile(2), never
	// copying it into the process. If the file yields fewer bytes than the
	// range (cut meanwhile, or a read error), zeros make up the rest so the
	// frame keeps its length: the data's receiver must check it against
	// checksums sent with it. Release, set by the handler, closes the file.
	DataFile *FileRange
	Release  func()
}

// FileRange is N bytes of F from Off.
type FileRange struct {
	F   *os.File
	Off int64
	N   int
}

// HandlerFunc serves one operation. An error is sent to the client with its
// errs.Code and text.
type HandlerFunc func(ctx context.Context, req *Request) (Response, error)

// Server accepts connections and dispatches frames to handlers by op.
// Requests run concurrently on a connection's workers (at most MaxInFlight
// per connection), so a slow request does not hold up others on the same
// connection.
type Server struct {
	// Logger receives connection errors; nil means slog.Default().
	Logger *slog.Logger
	// MaxInFlight bounds concurrent requests per connection (default 256).
	MaxInFlight int
	// Admit, if set, is asked before each request's body is read off a
	// connection (not for OpSession), with its op and what the connection
	// declared (the zero tag if nothing). It may block; ok false (done was
	// closed) drops the connection. A release it returns is called once
	// the request's reply is queued. QoS uses it to keep CPUs free for
	// interactive requests (qos.Reserve).
	Admit func(op Op, tag QosTag, done <-chan struct{}) (release func(), ok bool)

	mu         sync.Mutex
	handlers   map[Op]HandlerFunc
	listeners  map[net.Listener]struct{}
	conns      map[net.Conn]struct{}
	closing    bool
	localAddrs []string     // registered by ServeLocal
	localQ     chan func()  // idle in-process workers receive calls here (made by init)
	localIdle  atomic.Int32 // in-process workers waiting on localQ
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

// Handler returns the handler registered for op, or nil. With Handle it
// lets a decorator (metrics) wrap what components registered.
func (s *Server) Handler(op Op) HandlerFunc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handlers[op]
}

// Handle registers h for op, replacing any earlier handler. Requests
// already dispatched keep the handler they were given.
func (s *Server) Handle(op Op, h HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handlers == nil {
		s.handlers = make(map[Op]HandlerFunc)
	}
	s.handlers[op] = h
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func (s *Server) init() {
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(context.Background())
		s.localQ = make(chan func())
		s.listeners = make(map[net.Listener]struct{})
		s.conns = make(map[net.Conn]struct{})
	}
}

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("wire: server closed")

// connIDs numbers the connections of the process (Request.Conn).
var connIDs atomic.Uint64

// Serve accepts connections on l until Shutdown or Close.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	s.init()
	if s.closing {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(nc)
	}
}

// Shutdown stops accepting, closes every connection and waits for the
// handlers in flight, or until ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.init()
	s.closing = true
	s.dropLocal(s.localAddrs)
	for l := range s.listeners {
		l.Close()
	}
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
		s.cancel()
		return ctx.Err()
	}
}

// Close is Shutdown without waiting for handlers. It is idempotent.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Shutdown(ctx)
	return nil
}

type reply struct {
	hdr     [HeaderSize]byte
	sum     [sumSize]byte
	body    []byte
	data    []byte
	file    *FileRange // the data, sent with sendFile (data is nil)
	release func()
}

type serverConn struct {
	s        *Server
	nc       net.Conn
	sendFile bool          // nc is a socket that sendFile can write to
	sums     bool          // frames carry checksums (the client asked in its hello)
	rsum     [sumSize]byte // a frame's checksum, read by readLoop
	remote   string
	id       uint64 // Request.Conn
	replies  chan *reply
	done     chan struct{}
	handlers sync.WaitGroup
	session  Session   // OpSession's declarations
	epoch    time.Time // Request.Epoch
}

func (s *Server) serveConn(nc net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
		nc.Close()
	}()
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	// Hello: a peer that is not a Sluice client is dropped without a word.
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	var hello [helloSize]byte
	if _, err := io.ReadFull(nc, hello[:]); err != nil {
		return
	}
	ver, asked, err := parseHello(hello[:])
	if err != nil {
		s.logger().Warn("dropping connection", "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
	epoch := time.Now() // the client's hello was sent before, our answer is read after
	var status uint16
	switch {
	case ver != Version:
		status = 1
	case asked&helloSums != 0:
		status = helloSums // frame checksums, as the client asked
	}
	putHello(hello[:], status)
	if _, err := nc.Write(hello[:]); err != nil || status&^helloSums != 0 {
		return
	}
	nc.SetDeadline(time.Time{})

	sc := &serverConn{s: s, nc: nc, sums: status == helloSums, remote: nc.RemoteAddr().String(), id: connIDs.Add(1), epoch: epoch, replies: make(chan *reply, 256), done: make(chan struct{})}
	_, sc.sendFile = nc.(syscall.Conn)
	writerDone := make(chan struct{})
	go func() { defer close(writerDone); sc.writeLoop() }()
	sc.readLoop()
	sc.handlers.Wait()
	close(sc.done)
	<-writerDone
}

func (sc *serverConn) readLoop() {
	s := sc.s
	maxIn := s.MaxInFlight
	if maxIn <= 0 {
		maxIn = 256
	}
	jobs := make(chan job)
	defer close(jobs)
	workers := 0
	br := bufio.NewReaderSize(sc.nc, 256<<10)
	var hb [HeaderSize]byte
	for {
		if _, err := io.ReadFull(br, hb[:]); err != nil {
			return
		}
		h, err := ParseHeader(hb[:])
		if err == nil && h.Flags&flagResponse != 0 {
			err = errs.New(errs.Protocol, "wire: client sent a response frame")
		}
		if err != nil {
			s.logger().Warn("closing connection on a malformed frame", "remote", sc.remote, "err", err)
			return
		}
		var hold *slot
		if s.Admit != nil && h.Op != OpSession && h.Op != OpClock {
			release, ok := s.Admit(h.Op, sc.session.Qos(), s.ctx.Done())
			if !ok {
				return
			}
			if release != nil {
				hold = &slot{release}
				sc.nc.SetReadDeadline(time.Now().Add(slotReadTimeout))
			}
		}
		body := make([]byte, h.BodyLen)
		if err := sc.readHolding(br, body, hold); err != nil {
			hold.free()
			return
		}
		if sc.sums {
			if err := sc.readHolding(br, sc.rsum[:], hold); err != nil {
				hold.free()
				return
			}
			if got, want := frameSum(hb[:], body), binary.LittleEndian.Uint32(sc.rsum[:]); got != want {
				hold.free()
				s.logger().Warn("closing connection on a frame garbled in transit", "remote", sc.remote, "crc32c", fmt.Sprintf("%08x", got), "frame_says", fmt.Sprintf("%08x", want))
				return
			}
		}
		var data []byte
		if h.DataLen > 0 {
			data = GetBuf(int(h.DataLen))
			if err := sc.readHolding(br, data, hold); err != nil {
				PutBuf(data)
				hold.free()
				return
			}
		}
		if hold != nil {
			sc.nc.SetReadDeadline(time.Time{})
		}
		if h.Op == OpClock {
			// Answered here, as it is read: the time it tells is the
			// moment the client's estimate places between its sending
			// and the answer's arrival.
			if data != nil {
				PutBuf(data)
			}
			sc.send(h, Response{Msg: &ClockResp{Us: uint64(time.Since(sc.epoch) / time.Microsecond)}}, nil)
			continue
		}
		if h.Op == OpSession {
			// Answered here, in order: the requests read after it see it.
			if data != nil {
				PutBuf(data)
			}
			err := sc.session.declare(body)
			var resp Response
			if err == nil {
				resp.Msg = &Empty{}
			}
			sc.send(h, resp, err)
			continue
		}
		s.mu.Lock()
		hf := s.handlers[h.Op]
		s.mu.Unlock()
		j := job{h: h, hf: hf, body: body, data: data, received: time.Now(), hold: hold}
		// Hand the request to an idle worker, or start one while fewer
		// than maxIn run, or wait for one. Workers live as long as the
		// connection, so their stacks grow once, not per request.
		select {
		case jobs <- j:
			continue
		default:
		}
		if workers < maxIn {
			workers++
			sc.handlers.Add(1)
			go sc.worker(j, jobs)
			continue
		}
		select {
		case jobs <- j:
		case <-s.ctx.Done():
			if data != nil {
				PutBuf(data)
			}
			hold.free()
			return
		}
	}
}

// readHolding reads len(buf) bytes of a frame. While the request holds a
// slot (hold not nil and not yielded) the connection has a read deadline;
// when it passes, the slot is given back and the read goes on without it
// (and without a deadline).
func (sc *serverConn) readHolding(br *bufio.Reader, buf []byte, hold *slot) error {
	n := 0
	for {
		k, err := io.ReadFull(br, buf[n:])
		n += k
		if err == nil {
			return nil
		}
		if hold == nil || hold.release == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		hold.free()
		sc.nc.SetReadDeadline(time.Time{})
	}
}

// job is one request read off a connection.
type job struct {
	h          Header
	hf         HandlerFunc
	body, data []byte
	received   time.Time
	hold       *slot // Server.Admit's, or nil
}

// worker serves first, then further jobs until the connection's reader
// closes jobs.
func (sc *serverConn) worker(first job, jobs <-chan job) {
	defer sc.handlers.Done()
	sc.serve(first)
	for j := range jobs {
		sc.serve(j)
	}
}

func (sc *serverConn) serve(j job) {
	req := &Request{Op: j.h.Op, Body: j.body, Data: j.data, Remote: sc.remote, Conn: sc.id, Received: j.received, Epoch: sc.epoch, Session: &sc.session, SendFile: sc.sendFile}
	var resp Response
	var err error
	if j.hf == nil {
		err = errs.New(errs.NotSupported, "wire: unknown op %d", j.h.Op)
	} else {
		resp, err = sc.s.call(j.hf, req)
	}
	if j.data != nil {
		PutBuf(j.data)
	}
	sc.send(j.h, resp, err)
	j.hold.free()
}

// call runs a handler, turning a panic into an Internal error so that one
// bad request cannot take the server down.
func (s *Server) call(hf HandlerFunc, req *Request) (resp Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.logger().Error("handler panic", "op", req.Op, "remote", req.Remote, "panic", r)
			err = errs.New(errs.Internal, "wire: op %d failed on the server: %v", req.Op, r)
		}
	}()
	return hf(s.ctx, req)
}

func (sc *serverConn) send(h Header, resp Response, err error) {
	r := &reply{}
	rh := Header{ID: h.ID, Op: h.Op, Flags: flagResponse}
	if err != nil {
		if resp.Release != nil {
			resp.Release()
		}
		rh.Status = errs.CodeOf(err)
		if rh.Status == errs.OK {
			rh.Status = errs.Internal
		}
		r.body = []byte(err.Error())
	} else {
		if resp.Msg != nil {
			r.body = Marshal(resp.Msg)
		}
		r.data, r.file, r.release = resp.Data, resp.DataFile, resp.Release
	}
	if len(r.body) > MaxBody {
		rh.Status, r.body, r.data, r.file = errs.TooBig, []byte(fmt.Sprintf("wire: reply to op %d is too big", h.Op)), nil, nil
	}
	rh.BodyLen, rh.DataLen = uint32(len(r.body)), uint32(len(r.data))
	if r.file != nil {
		rh.DataLen = uint32(r.file.N)
	}
	rh.Put(r.hdr[:])
	select {
	case sc.replies <- r:
	case <-sc.done:
		if r.release != nil {
			r.release()
		}
	}
}

func (sc *serverConn) writeLoop() {
	var batch []*reply
	var bufs net.Buffers
	broken := false
	for {
		batch = batch[:0]
		select {
		case r := <-sc.replies:
			batch = append(batch, r)
		case <-sc.done:
			return
		}
	more:
		for len(batch) < 128 {
			select {
			case r := <-sc.replies:
				batch = append(batch, r)
			default:
				break more
			}
		}
		bufs = bufs[:0]
		for _, r := range batch {
			bufs = append(bufs, r.hdr[:])
			if len(r.body) > 0 {
				bufs = append(bufs, r.body)
			}
			if sc.sums {
				binary.LittleEndian.PutUint32(r.sum[:], frameSum(r.hdr[:], r.body))
				bufs = append(bufs, r.sum[:])
			}
			if len(r.data) > 0 {
				bufs = append(bufs, r.data)
			}
			if r.file != nil {
				// What comes before the file's bytes goes first.
				if !broken {
					if err := sendFile(sc.nc, bufs, r.file); err != nil {
						broken = true
						sc.nc.Close()
					}
				}
				bufs = bufs[:0]
			}
		}
		if !broken && len(bufs) > 0 {
			w := bufs
			if _, err := w.WriteTo(sc.nc); err != nil {
				broken = true // keep draining so handlers are not blocked
				sc.nc.Close()
			}
		}
		for _, r := range batch {
			if r.release != nil {
				r.release()
			}
		}
	}
}
