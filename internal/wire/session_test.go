package wire

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// TestSession: after OpSession, every request of the connection (and only
// of that connection) carries the declared identity; a malformed
// declaration fails with errs.Protocol and leaves the connection usable.
func TestSession(t *testing.T) { transports(t, testSession) }

func testSession(t *testing.T, local bool) {
	srv, addr := startEchoOn(t, local)
	srv.Handle(OpReadlink, func(ctx context.Context, req *Request) (Response, error) {
		tag := req.Session.Qos()
		return Response{Msg: &StringResp{S: tag.Job + "/" + string(rune('0'+tag.Class))}}, nil
	})
	ctx := context.Background()
	ask := func(c *Conn) string {
		t.Helper()
		var r StringResp
		if _, err := c.Call(ctx, OpReadlink, &InoReq{Ino: 1}, nil, &r, nil); err != nil {
			t.Fatal(err)
		}
		return r.S
	}
	a, b := dial(t, addr), dial(t, addr)
	if got := ask(a); got != "/0" {
		t.Errorf("before any declaration: %q, want /0", got)
	}
	if _, err := a.Call(ctx, OpSession, &SessionReq{Qos: QosTag{Job: "infer", Class: 1}}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := ask(a); got != "infer/1" {
		t.Errorf("after the declaration: %q, want infer/1", got)
	}
	if got := ask(b); got != "/0" {
		t.Errorf("another connection: %q, want /0", got)
	}
	if _, err := b.Call(ctx, OpSession, &SessionReq{Qos: QosTag{Job: "ckpt", Class: 3}}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := ask(b); got != "ckpt/3" {
		t.Errorf("second connection: %q, want ckpt/3", got)
	}
	long := SessionReq{Qos: QosTag{Job: string(make([]byte, 256))}}
	if _, err := a.Call(ctx, OpSession, &long, nil, nil, nil); errs.CodeOf(err) != errs.Invalid {
		t.Errorf("a 256-byte job: %v, want invalid", err)
	}
	if _, err := a.Call(ctx, OpSession, &StringResp{S: "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"}, nil, nil, nil); errs.CodeOf(err) != errs.Protocol {
		t.Errorf("a malformed declaration: %v, want protocol", err)
	}
	if got := ask(a); got != "infer/1" {
		t.Errorf("after refused declarations: %q, want infer/1 still", got)
	}
}

// TestAdmit: Server.Admit is asked before each request with what the
// connection declared (not for OpSession itself); a request it holds back
// is not served until Admit returns, and its release comes after the
// reply.
func TestAdmit(t *testing.T) { transports(t, testAdmit) }

func testAdmit(t *testing.T, local bool) {
	type admitted struct {
		tag      QosTag
		released chan struct{}
	}
	asked := make(chan admitted, 16)
	gate := make(chan struct{}) // closed: let requests of class 3 through
	var sessions atomic.Int32
	_, addr := startEchoOn(t, local, func(s *Server) {
		s.Handle(OpSession, func(ctx context.Context, req *Request) (Response, error) {
			sessions.Add(1) // never called: the server answers OpSession itself
			return Response{}, nil
		})
		s.Admit = func(op Op, tag QosTag, done <-chan struct{}) (func(), bool) {
			if op != OpLookup {
				t.Errorf("Admit asked for op %d, want only lookups (%d)", op, OpLookup)
			}
			a := admitted{tag, make(chan struct{})}
			asked <- a
			if tag.Class == 3 {
				select {
				case <-gate:
				case <-done:
					return nil, false
				}
			}
			return func() { close(a.released) }, true
		}
	})
	ctx := context.Background()
	c := dial(t, addr)
	lookup := func() error {
		var a Attr
		_, err := c.Call(ctx, OpLookup, &NameReq{Parent: 1, Name: "x"}, nil, &a, nil)
		return err
	}
	if err := lookup(); err != nil {
		t.Fatal(err)
	}
	a := <-asked
	if a.tag != (QosTag{}) {
		t.Errorf("undeclared connection: Admit got %+v, want the zero tag", a.tag)
	}
	<-a.released // after the reply
	if _, err := c.Call(ctx, OpSession, &SessionReq{Qos: QosTag{Job: "ckpt", Class: 3}}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- lookup() }()
	a = <-asked
	if a.tag != (QosTag{Job: "ckpt", Class: 3}) {
		t.Errorf("declared connection: Admit got %+v, want ckpt/3", a.tag)
	}
	select {
	case err := <-errc:
		t.Fatalf("a request Admit holds back was answered (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	<-a.released
	if n := sessions.Load(); n != 0 {
		t.Errorf("OpSession reached a handler %d times", n)
	}
	select {
	case a := <-asked:
		t.Errorf("Admit asked once more, for %+v (OpSession?)", a.tag)
	default:
	}
}

// TestAdmitStalledFrame: a request that took a slot and whose client
// stops in the middle of the frame gives the slot back (a suspended
// client must not keep it), and is still answered once the rest arrives.
func TestAdmitStalledFrame(t *testing.T) {
	var taken, released atomic.Int32
	_, addr := startEchoOn(t, false, func(s *Server) {
		s.Admit = func(op Op, tag QosTag, done <-chan struct{}) (func(), bool) {
			taken.Add(1)
			return func() { released.Add(1) }, true
		}
	})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(helloBytes()); err != nil {
		t.Fatal(err)
	}
	hello := make([]byte, helloSize)
	if _, err := io.ReadFull(nc, hello); err != nil {
		t.Fatal(err)
	}
	body := Marshal(&NameReq{Parent: 1, Name: "stalled"})
	if _, err := nc.Write(append(frameHeader(uint32(len(body)), 0, 0), body[:2]...)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for released.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a request stalled in its frame kept its slot for 30 s (taken %d)", taken.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := nc.Write(body[2:]); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	hb := make([]byte, HeaderSize)
	if _, err := io.ReadFull(nc, hb); err != nil {
		t.Fatalf("no reply once the frame was whole: %v", err)
	}
	h, err := ParseHeader(hb)
	if err != nil || h.Status != 0 || h.Flags&flagResponse == 0 {
		t.Fatalf("reply %+v, %v; want a successful response", h, err)
	}
	if r := released.Load(); r != 1 {
		t.Errorf("slot released %d times, want once", r)
	}
}
