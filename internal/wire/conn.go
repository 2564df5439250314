package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Conn is the client end of a connection. Call is safe for concurrent use;
// calls are multiplexed over the one TCP connection.
type Conn struct {
	nc    net.Conn      // nil for an in-process connection
	local *Server       // the server of an in-process connection (see ServeLocal)
	sums  bool          // frames carry checksums (the server agreed in its hello)
	rsum  [sumSize]byte // a frame's checksum, read by readLoop (a field: no allocation per frame)
	addr  string
	id    uint64 // an in-process connection's Request.Conn
	// epoch is when the hello was sent (for an in-process connection:
	// made); clock places the server's epoch on this process's clock
	// (applyby.go).
	epoch time.Time
	clock clockSync
	// session is the server's state of an in-process connection
	// (Request.Session).
	session Session
	sendq   chan *call
	nextID  atomic.Uint64
	wmu     sync.Mutex // held while a frame is written to nc

	mu      sync.Mutex
	pending map[uint64]*call
	err     error // set once when the connection fails; guarded by mu

	closed chan struct{} // closed when the connection fails or is closed
	wg     sync.WaitGroup
}

type call struct {
	hdr      [HeaderSize]byte
	sum      [sumSize]byte
	body     []byte
	data     [][]byte
	respData []byte

	sent chan struct{} // closed once the frame is written (or never will be)
	done chan struct{} // closed once the response is in, or the conn failed

	status   errs.Code
	respBody []byte
	n        int
	err      error
}

// Dial connects to a Sluice server and exchanges hellos.
func Dial(ctx context.Context, addr string) (*Conn, error) {
	if s := localServer(addr); s != nil {
		return dialLocal(s, addr), nil
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &errs.Error{Code: errs.Unavailable, Msg: fmt.Sprintf("wire: dial %s: %v", addr, err)}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	} else {
		nc.SetDeadline(time.Now().Add(10 * time.Second))
	}
	var hello [helloSize]byte
	putHello(hello[:], helloSums)
	epoch := time.Now()
	if _, err := nc.Write(hello[:]); err != nil {
		nc.Close()
		return nil, &errs.Error{Code: errs.Unavailable, Msg: fmt.Sprintf("wire: hello to %s: %v", addr, err)}
	}
	if _, err := io.ReadFull(nc, hello[:]); err != nil {
		nc.Close()
		return nil, &errs.Error{Code: errs.Unavailable, Msg: fmt.Sprintf("wire: hello from %s: %v", addr, err)}
	}
	ver, status, err := parseHello(hello[:])
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("wire: %s: %w", addr, err)
	}
	slack := time.Since(epoch)
	if status&^helloSums != 0 {
		nc.Close()
		return nil, errs.New(errs.Protocol, "wire: %s refused protocol version %d (it speaks %d)", addr, Version, ver)
	}
	nc.SetDeadline(time.Time{})
	c := &Conn{
		sums:    status&helloSums != 0,
		nc:      nc,
		addr:    addr,
		epoch:   epoch,
		clock:   clockSync{zero: epoch.Add(slack), synced: epoch.Add(slack)},
		sendq:   make(chan *call, 256),
		pending: make(map[uint64]*call),
		closed:  make(chan struct{}),
	}
	c.wg.Add(2)
	go c.writeLoop()
	go c.readLoop()
	return c, nil
}

// Addr returns the address the connection was dialed to.
func (c *Conn) Addr() string { return c.addr }

// Err returns why the connection failed, or nil while it is usable.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection; calls in flight fail with errs.Unavailable.
func (c *Conn) Close() error {
	c.fail(&errs.Error{Code: errs.Unavailable, Msg: "wire: connection to " + c.addr + " closed"})
	c.wg.Wait()
	return nil
}

func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	close(c.closed)
	c.mu.Unlock()
	if c.nc != nil {
		c.nc.Close()
	}
	for _, cl := range pending {
		cl.err = err
		close(cl.done)
	}
}

// Call sends a request with op, body req and optional data, and waits for
// the response, decoding its body into resp and reading its data into
// respData. It returns the number of data bytes received. A failed request
// returns an *errs.Error with the server's code and message.
//
// The data buffers must not be modified until Call returns; respData is
// written only while Call runs.
func (c *Conn) Call(ctx context.Context, op Op, req Message, data [][]byte, resp Message, respData []byte) (int, error) {
	if ctx.Err() != nil {
		// A call already past its deadline fails, over either transport:
		// the waits below could otherwise pick a fast reply as often as
		// the deadline.
		return 0, ctxErr(ctx, c.addr)
	}
	var body []byte
	if req != nil {
		c.stamp(ctx, req)
		body = Marshal(req)
	}
	var dataLen int
	for _, b := range data {
		dataLen += len(b)
	}
	if len(body) > MaxBody || dataLen > MaxData {
		return 0, errs.New(errs.TooBig, "wire: request of %d+%d bytes is over the frame limit", len(body), dataLen)
	}
	if c.local != nil {
		return c.callLocal(ctx, op, body, data, dataLen, resp, respData)
	}
	cl := &call{
		body:     body,
		data:     data,
		respData: respData,
		sent:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	id := c.nextID.Add(1)
	h := Header{BodyLen: uint32(len(cl.body)), DataLen: uint32(dataLen), ID: id, Op: op}
	h.Put(cl.hdr[:])

	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	c.pending[id] = cl
	alone := len(c.pending) == 1
	c.mu.Unlock()

	if dl, ok := ctx.Deadline(); !ok || ctx.Err() != nil || !alone || len(c.sendq) > 0 || !c.wmu.TryLock() {
		select {
		case c.sendq <- cl:
		case <-c.closed:
			<-cl.done
			return 0, cl.err
		case <-ctx.Done():
			c.forget(id, cl)
			return 0, ctxErr(ctx, c.addr)
		}
	} else {
		// The only call in flight on the connection, nothing waits to be
		// written and the writer is idle: write the frame here, without
		// waking the writer's goroutine (a hand-off that costs a caller on
		// a thread of its own, as libsluice's callers are, an OS thread's
		// wake-up). With other calls in flight the writer's batches (one
		// write for many frames) serve better: 16 clients' stats and
		// unlinks ran 10-20% slower with every caller writing its own.
		// The deadline, with the grace a queued frame gets (stuckSend),
		// bounds a write to a peer that stopped reading.
		c.nc.SetWriteDeadline(dl.Add(stuckSend))
		bufs := c.frame(nil, cl)
		_, err := bufs.WriteTo(c.nc)
		c.nc.SetWriteDeadline(time.Time{})
		c.wmu.Unlock()
		close(cl.sent)
		if err != nil {
			c.fail(&errs.Error{Code: errs.Unavailable, Msg: fmt.Sprintf("wire: write to %s: %v", c.addr, err)})
		}
	}
	select {
	case <-cl.done:
	case <-ctx.Done():
		// The writer may still be sending our data: wait until it is out of
		// our buffers before returning, and until the reader is out of
		// respData.
		select {
		case <-cl.sent:
		case <-c.closed:
		case <-time.After(stuckSend):
			// The send is stuck (a peer that stopped reading, a cut
			// link): drop the connection, which frees our buffers.
			c.fail(&errs.Error{Code: errs.Unavailable, Msg: "wire: connection to " + c.addr + " dropped: a request could not be sent before its deadline"})
		}
		c.forget(id, cl)
		return 0, ctxErr(ctx, c.addr)
	}
	if cl.err != nil {
		return 0, cl.err
	}
	if cl.status != errs.OK {
		return 0, &errs.Error{Code: cl.status, Msg: string(cl.respBody)}
	}
	if resp != nil {
		if err := unmarshalOwned(cl.respBody, resp); err != nil {
			return 0, fmt.Errorf("wire: response to op %d from %s: %w", op, c.addr, err)
		}
	}
	return cl.n, nil
}

// forget removes a call that its caller gave up on. If the reader already
// took it, forget waits until the reader is done with it.
func (c *Conn) forget(id uint64, cl *call) {
	c.mu.Lock()
	_, mine := c.pending[id]
	if mine {
		delete(c.pending, id)
	}
	c.mu.Unlock()
	if !mine {
		<-cl.done
	}
}

// stuckSend is how long past its caller's deadline a request's frame may
// still be being written before the connection is dropped (a peer that
// stopped reading, a cut link): the caller's buffers are in the write.
const stuckSend = 100 * time.Millisecond

func ctxErr(ctx context.Context, addr string) error {
	return &errs.Error{Code: errs.Unavailable, Msg: fmt.Sprintf("wire: request to %s: %v", addr, ctx.Err())}
}

func (c *Conn) writeLoop() {
	defer c.wg.Done()
	var batch []*call
	var bufs net.Buffers
	for {
		batch = batch[:0]
		select {
		case cl := <-c.sendq:
			batch = append(batch, cl)
		case <-c.closed:
			return
		}
	more:
		for len(batch) < 128 {
			select {
			case cl := <-c.sendq:
				batch = append(batch, cl)
			default:
				break more
			}
		}
		bufs = bufs[:0]
		for _, cl := range batch {
			bufs = c.frame(bufs, cl)
		}
		w := bufs // WriteTo consumes its receiver
		c.wmu.Lock()
		_, err := w.WriteTo(c.nc)
		c.wmu.Unlock()
		for _, cl := range batch {
			close(cl.sent)
		}
		if err != nil {
			c.fail(&errs.Error{Code: errs.Unavailable, Msg: fmt.Sprintf("wire: write to %s: %v", c.addr, err)})
			return
		}
	}
}

// frame appends cl's frame (header, body, checksum, data) to bufs.
func (c *Conn) frame(bufs net.Buffers, cl *call) net.Buffers {
	bufs = append(bufs, cl.hdr[:])
	if len(cl.body) > 0 {
		bufs = append(bufs, cl.body)
	}
	if c.sums {
		binary.LittleEndian.PutUint32(cl.sum[:], frameSum(cl.hdr[:], cl.body))
		bufs = append(bufs, cl.sum[:])
	}
	for _, d := range cl.data {
		if len(d) > 0 {
			bufs = append(bufs, d)
		}
	}
	return bufs
}

func (c *Conn) readLoop() {
	defer c.wg.Done()
	br := bufio.NewReaderSize(c.nc, 256<<10)
	var hb [HeaderSize]byte
	for {
		if _, err := io.ReadFull(br, hb[:]); err != nil {
			c.fail(&errs.Error{Code: errs.Unavailable, Msg: fmt.Sprintf("wire: read from %s: %v", c.addr, err)})
			return
		}
		h, err := ParseHeader(hb[:])
		if err == nil && h.Flags&flagResponse == 0 {
			err = errs.New(errs.Protocol, "wire: %s sent a request frame to a client", c.addr)
		}
		if err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		cl := c.pending[h.ID]
		delete(c.pending, h.ID)
		c.mu.Unlock()
		body := make([]byte, h.BodyLen)
		if _, err := io.ReadFull(br, body); err != nil {
			c.failWith(cl, err)
			return
		}
		if c.sums {
			if _, err := io.ReadFull(br, c.rsum[:]); err != nil {
				c.failWith(cl, err)
				return
			}
			if got, want := frameSum(hb[:], body), binary.LittleEndian.Uint32(c.rsum[:]); got != want {
				// The ID may be garbled too: every call in flight fails,
				// the one this frame named included.
				e := &errs.Error{Code: errs.Unavailable, Msg: fmt.Sprintf("wire: a frame from %s was garbled in transit (header and body CRC32C %08x, the frame says %08x)", c.addr, got, want)}
				if cl != nil {
					cl.err = e
					close(cl.done)
				}
				c.fail(e)
				return
			}
		}
		n := int(h.DataLen)
		var dst []byte
		if cl != nil {
			dst = cl.respData[:min(n, len(cl.respData))]
		}
		if _, err := io.ReadFull(br, dst); err != nil {
			c.failWith(cl, err)
			return
		}
		if extra := n - len(dst); extra > 0 {
			if _, err := br.Discard(extra); err != nil {
				c.failWith(cl, err)
				return
			}
			if cl != nil {
				cl.err = errs.New(errs.Protocol, "wire: %s sent %d data bytes for a %d-byte buffer", c.addr, n, len(dst))
			}
		}
		if cl == nil {
			continue // the caller gave up on this request
		}
		cl.status, cl.respBody, cl.n = h.Status, body, len(dst)
		close(cl.done)
	}
}

func (c *Conn) failWith(cl *call, err error) {
	e := &errs.Error{Code: errs.Unavailable, Msg: fmt.Sprintf("wire: read from %s: %v", c.addr, err)}
	if cl != nil {
		cl.err = e
		close(cl.done)
	}
	c.fail(e)
}

// InProcess reports whether c calls a server in this process (ServeLocal)
// rather than over a socket.
func (c *Conn) InProcess() bool { return c.local != nil }
