package s3

import (
	"bytes"
	"net"
	"net/http"
	"strconv"

	"golang.org/x/net/http/httpguts"
)

// Go's net/http answers a request whose Expect header is anything but
// 100-continue with 417 Expectation Failed itself, before a handler sees it
// (server.go, "Expect 100 Continue support"), and it has no option to do
// otherwise. S3 ignores expectations it does not know. So the gateway's
// connections rename such a header, in the request's header section as it
// is read, to unmetExpect, and the handler renames it back (restoreExpect)
// before anything looks at it: a client may have signed it.
//
// To find the header sections in a connection's bytes, expectConn follows
// the requests' framing as net/http does (a framer): a body of
// Content-Length bytes, or a chunked body and its trailer. At anything it
// does not follow exactly as net/http would (not HTTP/1.1, a bare CR or LF,
// a line folded, both Content-Length and Transfer-Encoding, a header section
// over the size limit, a malformed chunk line, ...) it stops rewriting and
// passes every later byte of the connection through unchanged: net/http
// rejects most such requests and closes the connection, and the others get
// its 417 as before. A body's bytes are never changed.
const unmetExpect = "X-Sluice-Unmet-Expect"

// restoreExpect gives r back the Expect headers that expectConn renamed.
func restoreExpect(r *http.Request) {
	v, ok := r.Header[unmetExpect]
	if !ok {
		return
	}
	delete(r.Header, unmetExpect)
	r.Header["Expect"] = append(r.Header["Expect"], v...)
}

// The framer's states.
const (
	frHead      = iota // in a request's header section
	frBody             // in a body of known length
	frChunkLine        // before a chunk's size line
	frChunkData        // in a chunk's data
	frChunkEnd         // before the CRLF after a chunk's data
	frTrailer          // before the trailer of a chunked body
	frPass             // not following: everything passes unchanged
)

// httpChunkLine is net/http's limit on a chunk's size line (and, through
// its buffer, on a trailer).
const httpChunkLine = 4096

// A framer follows the framing of the requests in a connection's bytes.
type framer struct {
	state   int
	n       uint64 // bytes left in a body or a chunk's data
	maxHead int    // the largest header section followed
	seen    int    // bytes of a header section or trailer checked so far
}

// next frames a prefix of in, the connection's next bytes: it returns the
// prefix's length, 0 when it needs more bytes to decide. head is nil if the
// prefix passes unchanged, else what replaces it (a header section with
// its Expect headers renamed).
func (f *framer) next(in []byte) (take int, head []byte) {
	switch f.state {
	case frPass:
		return len(in), nil
	case frBody, frChunkData:
		take = len(in)
		if uint64(take) > f.n {
			take = int(f.n)
		}
		f.consumed(take)
		return take, nil
	case frChunkEnd:
		if len(in) < 2 {
			return 0, nil
		}
		if in[0] != '\r' || in[1] != '\n' {
			return f.pass(in)
		}
		f.state = frChunkLine
		return 2, nil
	case frChunkLine:
		return f.chunkLine(in)
	case frTrailer:
		return f.trailer(in)
	}
	return f.head(in)
}

// consumed counts k bytes of a body or a chunk's data.
func (f *framer) consumed(k int) {
	if f.state != frBody && f.state != frChunkData {
		return
	}
	f.n -= uint64(k)
	if f.n > 0 {
		return
	}
	if f.state == frBody {
		f.state = frHead
	} else {
		f.state = frChunkEnd
	}
}

// direct reports how many of the next bytes pass unchanged whatever they
// are (a body's, a chunk's data), so that they can be read straight into
// the caller's buffer; -1 for all of them.
func (f *framer) direct() int64 {
	switch f.state {
	case frPass:
		return -1
	case frBody, frChunkData:
		return int64(min(f.n, 1<<62))
	}
	return 0
}

func (f *framer) pass(in []byte) (int, []byte) {
	f.state = frPass
	return len(in), nil
}

// crlfLines checks that every CR and LF in b is part of a CRLF; b may end
// in a CR whose LF has not come yet. It returns the index of the CRLF of
// the first empty line after a non-empty one (the end of a header
// section), -1 if none yet, and false at a bare CR or LF. b[:from] was
// checked before (it held no such line, and at most a CR at its end
// waiting for its LF).
func crlfLines(b []byte, from int) (end int, ok bool) {
	for i := max(from-1, 0); i < len(b); i++ {
		switch b[i] {
		case '\r':
			if i+1 < len(b) && b[i+1] != '\n' {
				return -1, false
			}
		case '\n':
			if i == 0 || b[i-1] != '\r' {
				return -1, false
			}
			// An empty line: CRLF right after the previous CRLF.
			if i >= 3 && b[i-2] == '\n' && b[i-3] == '\r' {
				return i - 1, true
			}
		}
	}
	return -1, true
}

// head frames a request's header section.
func (f *framer) head(in []byte) (int, []byte) {
	end, ok := crlfLines(in, f.seen)
	if !ok {
		return f.pass(in)
	}
	if end < 0 {
		if len(in) > f.maxHead {
			return f.pass(in)
		}
		f.seen = len(in)
		return 0, nil
	}
	f.seen = 0
	take := end + 2
	lines := in[:end] // the request line and the header lines, CRLF-separated
	reqLine, rest, _ := bytes.Cut(lines, []byte("\r\n"))
	if !http11RequestLine(reqLine) {
		return f.pass(in)
	}
	var (
		contentLength []byte
		clLines, te   int
		chunked       bool
		rename        []int // offsets in in of Expect header names to rename
	)
	off := len(reqLine) + 2
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		lineOff := off
		off += len(line) + 2
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || !httpguts.ValidHeaderFieldName(string(name)) {
			return f.pass(in) // also a folded line: it starts with a space
		}
		value = trimOWS(value)
		switch {
		case asciiEqualFold(name, "Content-Length"):
			if !isDigits(value) || (clLines > 0 && !bytes.Equal(value, contentLength)) {
				return f.pass(in)
			}
			contentLength = value
			clLines++
		case asciiEqualFold(name, "Transfer-Encoding"):
			te++
			chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "Expect"):
			if !hasToken(value, "100-continue") {
				rename = append(rename, lineOff)
			}
		}
	}
	switch {
	case te > 0:
		if te > 1 || !chunked || clLines > 0 {
			return f.pass(in)
		}
		f.state = frChunkLine
	case clLines > 0:
		var n uint64
		for _, c := range contentLength {
			n = n*10 + uint64(c-'0')
		}
		if n > 0 {
			f.state, f.n = frBody, n
		}
	}
	if len(rename) == 0 {
		return take, nil
	}
	out := make([]byte, 0, take+len(rename)*(len(unmetExpect)-len("Expect")))
	prev := 0
	for _, at := range rename {
		out = append(out, in[prev:at]...)
		out = append(out, unmetExpect...)
		prev = at + len("Expect")
	}
	return take, append(out, in[prev:take]...)
}

// http11RequestLine reports whether line is "METHOD SP TARGET SP HTTP/1.1",
// split as net/http splits it.
func http11RequestLine(line []byte) bool {
	method, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok || len(method) == 0 {
		return false
	}
	_, proto, ok := bytes.Cut(rest, []byte(" "))
	return ok && string(proto) == "HTTP/1.1"
}

// chunkLine frames a chunk's size line, as net/http reads it.
func (f *framer) chunkLine(in []byte) (int, []byte) {
	i := bytes.IndexByte(in, '\n')
	if i < 0 {
		if len(in) >= httpChunkLine {
			return f.pass(in)
		}
		return 0, nil
	}
	line := in[:i+1]
	if len(line) < 2 || bytes.IndexByte(line, '\r') != len(line)-2 || len(line)-2 >= httpChunkLine {
		return f.pass(in)
	}
	size, _, _ := bytes.Cut(line[:len(line)-2], []byte(";"))
	size = bytes.TrimRight(size, " \t")
	if len(size) == 0 || len(size) > 16 {
		return f.pass(in)
	}
	n, err := strconv.ParseUint(string(size), 16, 64) // hex digits only, as net/http
	if err != nil {
		return f.pass(in)
	}
	if n == 0 {
		f.state = frTrailer
	} else {
		f.state, f.n = frChunkData, n
	}
	return len(line), nil
}

// trailer frames the trailer of a chunked body: an empty line, or header
// lines and an empty line within net/http's buffer.
func (f *framer) trailer(in []byte) (int, []byte) {
	if len(in) < 2 {
		return 0, nil
	}
	if in[0] == '\r' && in[1] == '\n' {
		f.state = frHead
		return 2, nil
	}
	end, ok := crlfLines(in, f.seen)
	if !ok || (end < 0 && len(in) >= httpChunkLine) || end+2 > httpChunkLine {
		return f.pass(in)
	}
	if end < 0 {
		f.seen = len(in)
		return 0, nil
	}
	f.seen = 0
	f.state = frHead
	return end + 2, nil
}

func trimOWS(b []byte) []byte { return bytes.Trim(b, " \t") }

func isDigits(b []byte) bool {
	if len(b) == 0 || len(b) > 18 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// hasToken reports whether v holds token, case-insensitively, between
// token boundaries (a space, a tab, a comma, or v's ends): net/http's test
// for 100-continue in an Expect header.
func hasToken(v []byte, token string) bool {
	for at := 0; at+len(token) <= len(v); at++ {
		end := at + len(token)
		if (at == 0 || isTokenBoundary(v[at-1])) && (end == len(v) || isTokenBoundary(v[end])) &&
			asciiEqualFold(v[at:end], token) {
			return true
		}
	}
	return false
}

func isTokenBoundary(c byte) bool { return c == ' ' || c == ',' || c == '\t' }

// expectListener wraps the connections it accepts in expectConns.
type expectListener struct {
	net.Listener
	maxHead int
}

func (l expectListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &expectConn{Conn: c, fr: framer{maxHead: l.maxHead}}, nil
}

// expectConn is a connection whose requests' unmet Expect headers are
// renamed as they are read (see above). Like any net.Conn read by
// net/http, it is read by one goroutine at a time.
type expectConn struct {
	net.Conn
	fr  framer
	buf []byte // holds raw
	raw []byte // bytes read and not framed yet
	out []byte // bytes framed and not returned yet
	err error  // a read error to return once out and raw are empty
}

func (c *expectConn) Read(p []byte) (int, error) {
	for {
		if len(c.out) > 0 {
			n := copy(p, c.out)
			c.out = c.out[n:]
			return n, nil
		}
		if len(c.raw) > 0 {
			if take, head := c.fr.next(c.raw); take > 0 {
				c.out = c.raw[:take]
				if head != nil {
					c.out = head
				}
				c.raw = c.raw[take:]
				continue
			}
		}
		if c.err != nil {
			return 0, c.err
		}
		if len(c.raw) == 0 {
			if d := c.fr.direct(); d != 0 {
				q := p
				if d > 0 && int64(len(q)) > d {
					q = q[:d]
				}
				n, err := c.Conn.Read(q)
				c.fr.consumed(n)
				return n, err
			}
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
}

// fill reads more bytes into raw. Out is empty.
func (c *expectConn) fill() error {
	if c.buf == nil {
		c.buf = make([]byte, 4<<10)
	}
	if len(c.raw) == len(c.buf) { // full: grow
		c.buf = append(c.buf[:cap(c.buf)], make([]byte, len(c.buf))...)
	}
	n := copy(c.buf, c.raw)
	k, err := c.Conn.Read(c.buf[n:])
	c.raw = c.buf[:n+k]
	if err == nil {
		return nil
	}
	// A type assertion, not errors.As: net/http ends a background read
	// with a deadline after every request, and errors.As costs about 5% of
	// a small GET's CPU. A read past a deadline returns a *net.OpError.
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		if k > 0 {
			return nil // frame what came; the next read times out again
		}
		return err // not final: net/http may read on after a deadline it set to stop a read
	}
	c.fr.state = frPass
	c.err = err
	return nil
}

// CloseWrite shuts down the writing side where the connection can.
func (c *expectConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
