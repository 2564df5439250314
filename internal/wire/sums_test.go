package wire

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// flipProxy forwards one connection's bytes to upstream and back, flipping
// bit 0 of the byte at offset toServer of the client's stream and at
// offset toClient of the server's (-1: none).
func flipProxy(t *testing.T, upstream string, toServer, toClient int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", upstream)
		if err != nil {
			c.Close()
			return
		}
		pipe := func(dst, src net.Conn, at int) {
			defer dst.Close()
			defer src.Close()
			buf := make([]byte, 64<<10)
			off := 0
			for {
				n, err := src.Read(buf)
				if at >= off && at < off+n {
					buf[at-off] ^= 1
				}
				off += n
				if n > 0 {
					if _, werr := dst.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}
		go pipe(u, c, toServer)
		go pipe(c, u, toClient)
	}()
	return ln.Addr().String()
}

// TestFrameSums: a client and a server of this version agree on frame
// checksums, and a bit flipped in a frame's header or body, either way,
// fails the calls in flight (errs.Unavailable) instead of delivering a
// changed message or a reply to another call.
func TestFrameSums(t *testing.T) {
	_, addr := startEcho(t)
	ctx := context.Background()
	c, err := Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if !c.sums {
		t.Fatal("a client and a server of this version did not agree on frame checksums")
	}
	var a Attr
	if _, err := c.Call(ctx, OpLookup, &NameReq{Parent: 1, Name: "name"}, nil, &a, nil); err != nil || a.Ino != 2 || a.Size != 4 {
		t.Fatalf("lookup: %+v, %v", a, err)
	}
	c.Close()

	const first = helloSize // a stream's first frame starts after its hello
	reqBody := len(Marshal(&NameReq{Parent: 1, Name: "name"}))
	for _, tc := range []struct {
		name               string
		toServer, toClient int
	}{
		{"request body", first + HeaderSize + 3, -1},
		{"request header (ID)", first + 8, -1},
		{"request checksum", first + HeaderSize + reqBody + 1, -1},
		{"reply body", -1, first + HeaderSize + 1},
		{"reply header (ID)", -1, first + 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(ctx, flipProxy(t, addr, tc.toServer, tc.toClient))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			var a Attr
			_, err = c.Call(cctx, OpLookup, &NameReq{Parent: 1, Name: "name"}, nil, &a, nil)
			if errs.CodeOf(err) != errs.Unavailable || cctx.Err() != nil {
				t.Fatalf("a garbled frame gave %+v, %v; want the call failed as unavailable, at once", a, err)
			}
		})
	}
}

// TestFrameSumsOlderPeers: a client that does not ask for frame checksums
// (an older one) is served without them, and a client of this version
// talks to a server that does not answer them (an older one) without them.
func TestFrameSumsOlderPeers(t *testing.T) {
	_, addr := startEcho(t)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	var hello [helloSize]byte
	putHello(hello[:], 0)
	nc.Write(hello[:])
	if _, err := io.ReadFull(nc, hello[:]); err != nil {
		t.Fatal(err)
	}
	if _, status, _ := parseHello(hello[:]); status != 0 {
		t.Fatalf("the server answered an older client's hello with status %#x", status)
	}
	body := Marshal(&NameReq{Parent: 1, Name: "old"})
	var hb [HeaderSize]byte
	(&Header{BodyLen: uint32(len(body)), ID: 1, Op: OpLookup}).Put(hb[:])
	nc.Write(append(hb[:], body...))
	if _, err := io.ReadFull(nc, hb[:]); err != nil {
		t.Fatal(err)
	}
	h, err := ParseHeader(hb[:])
	if err != nil || h.Status != 0 {
		t.Fatalf("reply header %+v, %v", h, err)
	}
	rb := make([]byte, h.BodyLen)
	if _, err := io.ReadFull(nc, rb); err != nil {
		t.Fatal(err)
	}
	var a Attr
	if err := Unmarshal(rb, &a); err != nil || a.Ino != 2 || a.Size != 3 {
		t.Fatalf("reply to an older client: %+v, %v", a, err)
	}

	// An older server: answers status 0 and frames without checksums.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		sc, err := ln.Accept()
		if err != nil {
			return
		}
		defer sc.Close()
		var hello [helloSize]byte
		if _, err := io.ReadFull(sc, hello[:]); err != nil {
			return
		}
		putHello(hello[:], 0)
		sc.Write(hello[:])
		var hb [HeaderSize]byte
		if _, err := io.ReadFull(sc, hb[:]); err != nil {
			return
		}
		h, _ := ParseHeader(hb[:])
		io.CopyN(io.Discard, sc, int64(h.BodyLen))
		body := Marshal(&Attr{Ino: 42})
		(&Header{BodyLen: uint32(len(body)), ID: h.ID, Op: h.Op, Flags: flagResponse}).Put(hb[:])
		sc.Write(append(hb[:], body...))
		io.Copy(io.Discard, sc)
	}()
	c, err := Dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.sums {
		t.Fatal("frame checksums with a server that did not agree to them")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Call(ctx, OpLookup, &NameReq{Parent: 1, Name: "x"}, nil, &a, nil); err != nil || a.Ino != 42 {
		t.Fatalf("call to an older server: %+v, %v", a, err)
	}
}
