package wire

import (
	"context"
	"testing"

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
