// Package tcpproxy is a TCP proxy for tests: it forwards the connections
// made to it to an upstream address and can hold back or delay what the
// clients send, as a congested or cut network would, while the
// connections stay open.
package tcpproxy

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards connections to one upstream address. Only what clients
// send is held or delayed; answers flow back at once.
type Proxy struct {
	// Addr is the loopback address clients dial.
	Addr string

	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	cond   *sync.Cond
	paused bool          // every connection, also later ones, holds
	delay  time.Duration // added before each piece a client sent is passed on
	jitter time.Duration // and a random part of up to this, per piece
	conns  map[*conn]struct{}
}

type conn struct {
	down, up net.Conn
	held     bool
	rng      *rand.Rand // the connection's jitter (its forward loop's alone)
}

// Start starts a proxy to upstream on loopback. The test's cleanup closes
// it and its connections and waits for its goroutines.
//
// A test that touches a FUSE mount through mmap must not run the proxy of
// that mount's connections in its own process: a page fault on the mount
// cannot be preempted, so a garbage collection that waits for the
// faulting goroutine stops the proxy's goroutines, and the fault, which
// needs the proxy, never ends (proctest.StartProxy runs it in a process
// of its own).
func Start(t testing.TB, upstream string) *Proxy {
	t.Helper()
	p, err := New(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// New starts a proxy to upstream on loopback; Close stops it.
func New(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, conns: make(map[*conn]struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				down.Close()
				continue
			}
			c := &conn{down: down, up: up, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
			p.mu.Lock()
			p.conns[c] = struct{}{}
			p.mu.Unlock()
			p.wg.Go(func() {
				p.forward(c)
				up.Close()
				p.mu.Lock()
				delete(p.conns, c)
				p.mu.Unlock()
			})
			p.wg.Go(func() { io.Copy(down, up); down.Close() })
		}
	})
	return p, nil
}

// Close stops the proxy, closes its connections and waits for its
// goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Resume()
	p.mu.Lock()
	for c := range p.conns {
		c.down.Close()
		c.up.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// forward passes what c's client sends upstream, waiting while c is held
// and for the delay.
func (p *Proxy) forward(c *conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.down.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.paused || c.held {
				p.cond.Wait()
			}
			d := p.delay
			if p.jitter > 0 {
				d += time.Duration(c.rng.Int64N(int64(p.jitter)))
			}
			p.mu.Unlock()
			if d > 0 {
				time.Sleep(d)
			}
			if _, werr := c.up.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Pause holds back what every client sends, on the connections open now
// and on later ones, until Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

// Hold holds back what clients send on the connections open now, until
// Resume; connections made later pass. After Pause it narrows the pause
// to the connections made until then.
func (p *Proxy) Hold() {
	p.mu.Lock()
	for c := range p.conns {
		c.held = true
	}
	p.paused = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Resume passes on what Pause and Hold held back, and what comes after.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.paused = false
	for c := range p.conns {
		c.held = false
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

// SetDelay makes each piece a client sends wait d before it is passed on
// (0: none).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// SetJitter adds to each piece's delay a random part of up to j, drawn
// for each piece: connections then overtake one another, while what one
// connection carries stays in order, as on a real network (0: none).
func (p *Proxy) SetJitter(j time.Duration) {
	p.mu.Lock()
	p.jitter = j
	p.mu.Unlock()
}

// Conns returns how many connections the proxy holds open.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}
