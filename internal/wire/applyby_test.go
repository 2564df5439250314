package wire

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/tcpproxy"
)

// seen is what the truncate handler of startTimed saw of one request.
type seen struct {
	applyBy  uint64
	deadline time.Time // by the server's clock (this process's)
	has      bool
	late     bool
}

// startTimed starts a server whose OpChunkTruncate handler reports what it
// saw on the channel it returns.
func startTimed(t *testing.T, local bool) (string, <-chan seen) {
	t.Helper()
	got := make(chan seen, 16)
	_, addr := startEchoOn(t, local, func(s *Server) {
		s.Handle(OpChunkTruncate, func(ctx context.Context, req *Request) (Response, error) {
			var m ChunkTruncateReq
			if err := Unmarshal(req.Body, &m); err != nil {
				return Response{}, err
			}
			dl, ok := req.ApplyDeadline(m.ApplyBy)
			got <- seen{applyBy: m.ApplyBy, deadline: dl, has: ok, late: ok && time.Now().After(dl)}
			return Response{}, nil
		})
	})
	return addr, got
}

// TestApplyByWithinDeadline: a request with a deadline reaches the server
// with a deadline of its own that is not after the sender's and not much
// before it; one without names none.
func TestApplyByWithinDeadline(t *testing.T) {
	transports(t, func(t *testing.T, local bool) {
		addr, got := startTimed(t, local)
		c := dial(t, addr)
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			dl, _ := ctx.Deadline()
			if _, err := c.Call(ctx, OpChunkTruncate, &ChunkTruncateReq{Size: 1}, nil, nil, nil); err != nil {
				t.Fatal(err)
			}
			cancel()
			s := <-got
			if !s.has || s.late {
				t.Fatalf("the server saw %+v; want a deadline not yet past", s)
			}
			// Both ends run in this process: their deadlines compare.
			if s.deadline.After(dl) {
				t.Fatalf("the server's deadline %v is after the sender's %v", s.deadline, dl)
			}
			slack := c.clock.zero.Sub(c.epoch) // the hello's round trip
			if early := dl.Sub(s.deadline); early > slack+50*time.Millisecond {
				t.Fatalf("the server's deadline is %v before the sender's (hello slack %v)", early, slack)
			}
		}
		if _, err := c.Call(context.Background(), OpChunkTruncate, &ChunkTruncateReq{Size: 1}, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		if s := <-got; s.has || s.applyBy != 0 || s.late {
			t.Fatalf("a call without a deadline arrived with %+v", s)
		}
	})
}

// TestApplyByLateOnTheWire: a truncate held on the network past its
// sender's deadline arrives late, and the server can tell, though the
// server's clock has no relation to the sender's but the hello. The
// message is reused, as a chain's forwarding reuses its copy: its stamp
// is the later call's.
func TestApplyByLateOnTheWire(t *testing.T) {
	addr, got := startTimed(t, false)
	p := tcpproxy.Start(t, addr)
	c := dial(t, p.Addr)
	m := &ChunkTruncateReq{Size: 1}

	p.SetDelay(600 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := c.Call(ctx, OpChunkTruncate, m, nil, nil, nil)
	cancel()
	if err == nil {
		t.Fatal("a call held for 600 ms answered within its 200 ms")
	}
	if s := <-got; !s.has || !s.late {
		t.Fatalf("a truncate held past its deadline arrived as %+v; want late", s)
	}

	p.SetDelay(0)
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Call(ctx, OpChunkTruncate, m, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if s := <-got; !s.has || s.late {
		t.Fatalf("a prompt truncate arrived as %+v; want on time", s)
	}
}

// TestApplyByResync: a connection whose estimate of the server's epoch
// drifted (as if its clock lost 10 s against the server's since the
// hello) lets the server apply requests 10 s after their deadline; a
// timed request sent when the estimate is older than clockResync has it
// measured again (OpClock, in the background), and the requests after
// that are bounded by their deadline again.
func TestApplyByResync(t *testing.T) {
	addr, got := startTimed(t, false)
	c := dial(t, addr)
	c.clock.mu.Lock()
	c.clock.zero = c.clock.zero.Add(-10 * time.Second)
	c.clock.mu.Unlock()
	call := func() (seen, time.Time) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dl, _ := ctx.Deadline()
		if _, err := c.Call(ctx, OpChunkTruncate, &ChunkTruncateReq{Size: 1}, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		return <-got, dl
	}
	if s, dl := call(); !s.deadline.After(dl.Add(9 * time.Second)) {
		t.Fatalf("a drifted estimate gave the server a deadline %v after the sender's; want about 10 s", s.deadline.Sub(dl))
	}
	c.clock.mu.Lock()
	c.clock.synced = time.Now().Add(-2 * clockResync)
	c.clock.mu.Unlock()
	call() // finds the estimate old: measures it again
	for end := time.Now().Add(10 * time.Second); ; {
		c.clock.mu.Lock()
		done := time.Since(c.clock.synced) < clockResync
		c.clock.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the estimate was not measured again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	s, dl := call()
	if s.deadline.After(dl) {
		t.Fatalf("after the exchange the server's deadline is %v after the sender's", s.deadline.Sub(dl))
	}
	// Earlier by the exchange's round trip at most: far less than the
	// drift it corrected.
	if early := dl.Sub(s.deadline); early > 5*time.Second {
		t.Fatalf("after the exchange the server's deadline is %v before the sender's", early)
	}
}
