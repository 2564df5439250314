package s3

import (
	"net"
	"sync"
	"time"
)

// net/http writes a response through a 4 KiB buffer: the response to a GET
// of a 4 KiB object (its header and its body) leaves the server in two
// write system calls, the full buffer and then the rest when the response
// ends, and reaches the client in two segments, which it reads with two
// read system calls. The gateway's connections hold back one small write
// and send it with the next one if that is small too, so such a response
// costs one write and one read. The write held back goes out at the latest when the
// connection is read (the server reads the next request only after it
// finished the response), closed, or holdFor after it was written (a
// handler that writes part of a response and then waits).
const (
	// holdMax is the largest write held back: net/http's buffer size,
	// so that a full buffer's flush is held and the response's tail
	// joins it.
	holdMax = 4 << 10
	// holdFor bounds how long a write stays held back.
	holdFor = time.Millisecond
)

// tailListener wraps the connections it accepts in tailConns.
type tailListener struct{ net.Listener }

func (l tailListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newTailConn(c), nil
}

// tailConn is a connection that holds back one small write (see above).
type tailConn struct {
	net.Conn

	mu    sync.Mutex
	held  []byte // the write held back; empty if none
	hbuf  [2 * holdMax]byte
	timer *time.Timer // sends a write held back for holdFor
	err   error       // the error of the last write, returned for writes held back
}

func newTailConn(c net.Conn) *tailConn {
	t := &tailConn{Conn: c}
	t.timer = time.AfterFunc(time.Hour, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.flushLocked()
	})
	t.timer.Stop()
	return t
}

// Write holds p back if it is small and nothing is held; if something is
// held, it sends that with p in one system call when p is small too, or
// first when p is large. (A large write joined to the held bytes with
// writev made 1 MiB GETs 15-20% slower: the client got nothing until the
// whole megabyte was in the socket.)
func (t *tailConn) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return 0, t.err
	}
	if len(t.held) == 0 {
		if len(p) > holdMax || len(p) == 0 {
			n, err := t.Conn.Write(p)
			t.err = err
			return n, err
		}
		t.held = t.hbuf[:copy(t.hbuf[:], p)]
		t.timer.Reset(holdFor)
		return len(p), nil
	}
	t.timer.Stop()
	if len(p) <= holdMax {
		held := len(t.held)
		t.held = append(t.held, p...) // within hbuf: 2*holdMax bytes
		n, err := t.Conn.Write(t.held)
		t.held, t.err = t.held[:0], err
		if err != nil {
			// The bytes held back were acknowledged to the writer
			// before; report what of p was sent.
			return max(0, n-held), err
		}
		return len(p), nil
	}
	if t.flushLocked(); t.err != nil {
		return 0, t.err
	}
	n, err := t.Conn.Write(p)
	t.err = err
	return n, err
}

// flushLocked sends the write held back, if any.
func (t *tailConn) flushLocked() {
	if len(t.held) == 0 || t.err != nil {
		return
	}
	_, t.err = t.Conn.Write(t.held)
	t.held = t.held[:0]
}

// Read sends the write held back before it reads. It does not wait for a
// write in progress (net/http reads in the background while a handler
// writes, to learn that the client went away): that write sends what is
// held, or holds its own bytes for at most holdFor.
func (t *tailConn) Read(p []byte) (int, error) {
	if t.mu.TryLock() {
		if len(t.held) > 0 {
			t.timer.Stop()
			t.flushLocked()
		}
		t.mu.Unlock()
	}
	return t.Conn.Read(p)
}

// Close sends the write held back and closes the connection. Like Read it
// does not wait for a write in progress, which may wait for a client that
// does not read: closing ends that write.
func (t *tailConn) Close() error {
	if t.mu.TryLock() {
		t.timer.Stop()
		t.flushLocked()
		t.mu.Unlock()
	}
	return t.Conn.Close()
}

// CloseWrite sends the write held back and shuts down the writing side,
// where the connection can (net/http does this before it closes a
// connection whose request it did not read to the end).
func (t *tailConn) CloseWrite() error {
	t.mu.Lock()
	t.timer.Stop()
	t.flushLocked()
	t.mu.Unlock()
	if cw, ok := t.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
