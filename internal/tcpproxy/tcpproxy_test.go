package tcpproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo serves lines back on loopback.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(l))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// ask sends a line on c and returns whether its echo came within d.
func ask(t *testing.T, c net.Conn, r *bufio.Reader, d time.Duration) bool {
	t.Helper()
	if _, err := c.Write([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	l, err := r.ReadString('\n')
	if err != nil {
		return false
	}
	if l != "hi\n" {
		t.Fatalf("echo %q", l)
	}
	return true
}

// TestHoldResume: Hold holds the connections open then and not later
// ones; Resume passes what was held, in order.
func TestHoldResume(t *testing.T) {
	p := Start(t, echo(t))
	a, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ra := bufio.NewReader(a)
	if !ask(t, a, ra, 5*time.Second) {
		t.Fatal("no echo through the proxy")
	}
	p.Hold()
	if ask(t, a, ra, 200*time.Millisecond) {
		t.Fatal("a held connection passed a line")
	}
	b, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !ask(t, b, bufio.NewReader(b), 5*time.Second) {
		t.Fatal("a connection made after Hold was held")
	}
	p.Resume()
	a.SetReadDeadline(time.Now().Add(5 * time.Second))
	if l, err := ra.ReadString('\n'); err != nil || l != "hi\n" {
		t.Fatalf("the held line after Resume: %q, %v", l, err)
	}
	a.SetReadDeadline(time.Time{})

	p.Pause()
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc := bufio.NewReader(c)
	if ask(t, c, rc, 200*time.Millisecond) {
		t.Fatal("a connection made while paused passed a line")
	}
	p.Hold() // c stays held; later connections pass
	d, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !ask(t, d, bufio.NewReader(d), 5*time.Second) {
		t.Fatal("a connection made after Hold ended the pause was held")
	}
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if l, err := rc.ReadString('\n'); err == nil {
		t.Fatalf("a connection paused, then held, passed %q", l)
	}
	p.Resume()
}

// TestDelay: a delayed piece arrives no sooner than the delay.
func TestDelay(t *testing.T) {
	p := Start(t, echo(t))
	a, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r := bufio.NewReader(a)
	p.SetDelay(300 * time.Millisecond)
	start := time.Now()
	if !ask(t, a, r, 5*time.Second) {
		t.Fatal("no echo")
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("a line delayed 300 ms came back in %v", d)
	}
}
