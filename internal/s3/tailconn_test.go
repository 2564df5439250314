package s3

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection, the first
// wrapped in a tailConn.
func tcpPair(t *testing.T) (*tailConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := tailListener{ln}.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := <-accepted
	if c == nil {
		t.Fatal("accept failed")
	}
	tc := c.(*tailConn)
	t.Cleanup(func() { tc.Close(); peer.Close() })
	return tc, peer
}

// TestTailConnOrder writes random sizes (held, joined and direct writes)
// with reads between some of them and checks that the peer receives every
// byte, in order.
func TestTailConnOrder(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	tc, peer := tcpPair(t)
	var want bytes.Buffer
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(peer)
		got <- b
	}()
	for i := range 2000 {
		var n int
		switch rng.IntN(4) {
		case 0:
			n = rng.IntN(64)
		case 1:
			n = holdMax - rng.IntN(8)
		case 2:
			n = holdMax + rng.IntN(8)
		default:
			n = rng.IntN(64 << 10)
		}
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(i + j*7)
		}
		if k, err := tc.Write(p); err != nil || k != n {
			t.Fatalf("write %d: %d, %v", n, k, err)
		}
		want.Write(p)
		if rng.IntN(16) == 0 {
			// A read sends what is held; nothing comes back, so it
			// ends on its deadline.
			tc.SetReadDeadline(time.Now().Add(time.Millisecond))
			if _, err := tc.Read(make([]byte, 1)); err == nil {
				t.Fatal("read returned data the peer never sent")
			}
		}
	}
	if err := tc.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("peer got %d bytes, want %d (or different bytes)", len(b), want.Len())
	}
}

// TestTailConnHeldWriteSent checks that a write held back reaches the peer
// with no later write, read or close (after holdFor), and that Close sends
// one too.
func TestTailConnHeldWriteSent(t *testing.T) {
	tc, peer := tcpPair(t)
	if _, err := tc.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	peer.SetReadDeadline(time.Now().Add(30 * time.Second))
	b := make([]byte, 16)
	n, err := io.ReadAtLeast(peer, b, 4)
	if err != nil || string(b[:n]) != "held" {
		t.Fatalf("peer read %q, %v; want \"held\"", b[:n], err)
	}
	if _, err := tc.Write([]byte("at close")); err != nil {
		t.Fatal(err)
	}
	tc.Close()
	rest, err := io.ReadAll(peer)
	if err != nil || string(rest) != "at close" {
		t.Fatalf("peer read %q, %v after close; want \"at close\"", rest, err)
	}
}

// TestTailConnCloseDuringWrite checks that Close does not wait for a write
// blocked on a peer that does not read, and that the write then fails.
func TestTailConnCloseDuringWrite(t *testing.T) {
	tc, _ := tcpPair(t)
	done := make(chan error, 1)
	go func() {
		big := make([]byte, 1<<20)
		for {
			if _, err := tc.Write(big); err != nil {
				done <- err
				return
			}
		}
	}()
	// The writer fills the socket buffers and blocks; Close must end it.
	time.Sleep(50 * time.Millisecond)
	closed := make(chan struct{})
	go func() { tc.Close(); close(closed) }()
	<-closed
	if err := <-done; err == nil {
		t.Fatal("write to a closed connection succeeded")
	}
}
