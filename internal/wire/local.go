package wire

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// In-process connections. A server that calls ServeLocal(addr) is reached
// by Dial(addr) from the same process through function calls instead of a
// loopback socket: `sluice serve --mount` and `--s3` run the mount and the
// gateway beside the servers they use, and each of their requests would
// otherwise cost four socket system calls and two thread wake-ups. The
// request and response bodies still go through Marshal and Unmarshal (a
// response's byte fields are slices of its encoded body, as over TCP), and
// data is copied once each way, so handlers and callers see exactly what
// they see over TCP: buffers they may keep or reuse, a handler context
// that outlives the caller's, and errors with the same codes and texts.

var locals struct {
	sync.Mutex
	m map[string]*Server
}

// ServeLocal makes Dial(addr) in this process reach s directly, until s
// shuts down. addr is the address s serves on (or is advertised at).
func (s *Server) ServeLocal(addr string) {
	s.mu.Lock()
	s.init()
	s.localAddrs = append(s.localAddrs, addr)
	s.mu.Unlock()
	locals.Lock()
	defer locals.Unlock()
	if locals.m == nil {
		locals.m = make(map[string]*Server)
	}
	locals.m[addr] = s
}

// dropLocal undoes ServeLocal for every address of s.
func (s *Server) dropLocal(addrs []string) {
	locals.Lock()
	defer locals.Unlock()
	for _, a := range addrs {
		if locals.m[a] == s {
			delete(locals.m, a)
		}
	}
}

// IsLocal reports whether addr is served in this process (ServeLocal):
// Dial then returns an in-process connection.
func IsLocal(addr string) bool { return localServer(addr) != nil }

func localServer(addr string) *Server {
	locals.Lock()
	defer locals.Unlock()
	return locals.m[addr]
}

func dialLocal(s *Server, addr string) *Conn {
	now := time.Now()
	return &Conn{addr: addr, local: s, id: connIDs.Add(1), epoch: now, clock: clockSync{zero: now, synced: now, none: true}, closed: make(chan struct{})}
}

// begin admits one in-process request: it returns the handler for op (nil
// if none) and counts the request as in flight for Shutdown.
func (s *Server) begin(op Op) (HandlerFunc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if s.closing {
		return nil, &errs.Error{Code: errs.Unavailable, Msg: "wire: server is shutting down"}
	}
	s.wg.Add(1)
	return s.handlers[op], nil
}

// localResult is what an in-process handler returned.
type localResult struct {
	resp Response
	err  error
}

// callLocal is Call on an in-process connection.
func (c *Conn) callLocal(ctx context.Context, op Op, body []byte, data [][]byte, dataLen int, resp Message, respData []byte) (int, error) {
	if err := c.Err(); err != nil {
		return 0, err
	}
	if op == OpSession {
		// The server's side of an in-process connection is this Conn.
		if err := c.session.declare(body); err != nil {
			return 0, &errs.Error{Code: errs.CodeOf(err), Msg: err.Error()}
		}
		return 0, nil
	}
	s := c.local
	hf, err := s.begin(op)
	if err != nil {
		return 0, err
	}
	// The caller may reuse its buffers once Call returns, also when it
	// returns early on its deadline: the handler gets a copy.
	var d []byte
	if dataLen > 0 {
		d = GetBuf(dataLen)
		n := 0
		for _, b := range data {
			n += copy(d[n:], b)
		}
	}
	var hold *slot
	if s.Admit != nil {
		release, ok := s.Admit(op, c.session.Qos(), ctx.Done())
		if !ok {
			s.wg.Done()
			if d != nil {
				PutBuf(d)
			}
			return 0, ctxErr(ctx, c.addr)
		}
		if release != nil {
			hold = &slot{release}
		}
	}
	deadline, _ := ctx.Deadline()
	done := make(chan localResult, 1)
	s.runLocal(func() {
		defer s.wg.Done()
		defer hold.free()
		req := &Request{Op: op, Body: body, Data: d, Remote: "local", Conn: c.id, Received: time.Now(), Epoch: c.epoch, Deadline: deadline, Session: &c.session, Local: true}
		var r localResult
		if hf == nil {
			r.err = errs.New(errs.NotSupported, "wire: unknown op %d", op)
		} else {
			r.resp, r.err = s.call(hf, req)
		}
		if d != nil {
			PutBuf(d)
		}
		done <- r
	})
	var r localResult
	select {
	case r = <-done:
	case <-ctx.Done():
		go releaseLocal(done)
		return 0, ctxErr(ctx, c.addr)
	case <-c.closed:
		go releaseLocal(done)
		return 0, c.Err()
	}
	if r.resp.Release != nil {
		defer r.resp.Release()
	}
	if r.err != nil {
		code := errs.CodeOf(r.err)
		if code == errs.OK {
			code = errs.Internal
		}
		return 0, &errs.Error{Code: code, Msg: r.err.Error()}
	}
	var rb []byte
	if r.resp.Msg != nil {
		rb = Marshal(r.resp.Msg)
	}
	if len(rb) > MaxBody {
		return 0, &errs.Error{Code: errs.TooBig, Msg: fmt.Sprintf("wire: reply to op %d is too big", op)}
	}
	n := copy(respData, r.resp.Data)
	if len(r.resp.Data) > n {
		return 0, errs.New(errs.Protocol, "wire: %s sent %d data bytes for a %d-byte buffer", c.addr, len(r.resp.Data), n)
	}
	if resp != nil {
		if err := unmarshalOwned(rb, resp); err != nil {
			return 0, fmt.Errorf("wire: response to op %d from %s: %w", op, c.addr, err)
		}
	}
	return n, nil
}

// maxIdleLocal bounds the in-process workers that wait for the next call.
const maxIdleLocal = 256

// runLocal runs f on an idle in-process worker, or on a new one. Workers
// outlive their calls (up to maxIdleLocal of them, until the server's
// context ends), so their stacks grow once: a fresh goroutine per call
// spent a tenth of `serve --mount`'s CPU growing its stack during a
// create and unlink storm.
func (s *Server) runLocal(f func()) {
	select {
	case s.localQ <- f:
	default:
		go s.localWorker(f)
	}
}

func (s *Server) localWorker(f func()) {
	q := s.localQ
	s.mu.Lock()
	done := s.ctx.Done()
	s.mu.Unlock()
	for {
		f()
		if s.localIdle.Add(1) > maxIdleLocal {
			s.localIdle.Add(-1)
			return
		}
		select {
		case f = <-q:
			s.localIdle.Add(-1)
		case <-done:
			s.localIdle.Add(-1)
			return
		}
	}
}

// releaseLocal waits for the result of a request its caller gave up on and
// releases its buffers.
func releaseLocal(done <-chan localResult) {
	if r := <-done; r.resp.Release != nil {
		r.resp.Release()
	}
}
