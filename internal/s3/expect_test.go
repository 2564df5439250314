package s3

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"testing"
)

// readConn is a net.Conn whose reads come from data, in pieces of the
// given sizes (cycled), then io.EOF.
type readConn struct {
	net.Conn
	data  []byte
	sizes []int
	i     int
	// timeouts: every timeouts-th read ends at a deadline (with bytes or
	// none, in turn), as net/http's reads do when it stops one.
	timeouts int
}

// errTimeout is what a read past its deadline returns.
var errTimeout = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

func (c *readConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	c.i++
	var err error
	if c.timeouts > 0 && c.i%c.timeouts == 0 {
		err = errTimeout
		if c.i/c.timeouts%2 == 0 {
			return 0, err
		}
	}
	n := len(p)
	if len(c.sizes) > 0 {
		n = min(n, c.sizes[c.i%len(c.sizes)])
	}
	n = copy(p, c.data[:min(n, len(c.data))])
	c.data = c.data[n:]
	return n, err
}

// parsed is what net/http reads of one request.
type parsed struct {
	method, uri string
	header      http.Header
	body        string
	err         string
}

// parseAll reads requests from r as net/http's server does, up to the
// first error, restoring renamed Expect headers as the gateway does.
func parseAll(r io.Reader) []parsed {
	br := bufio.NewReader(r)
	var out []parsed
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				out = append(out, parsed{err: "request"}) // net/http refuses it (its message may quote a renamed header)
			}
			return out
		}
		restoreExpect(req)
		slices.Sort(req.Header["Expect"])
		body, err := io.ReadAll(req.Body)
		p := parsed{method: req.Method, uri: req.RequestURI, header: req.Header, body: string(body)}
		if err != nil {
			p.err = "body"
		}
		out = append(out, p)
		if err != nil || req.Close {
			return out
		}
	}
}

// frame passes data through an expectConn with reads of the given sizes.
func frame(data []byte, sizes []int) io.Reader {
	return &expectConn{Conn: &readConn{data: data, sizes: sizes}, fr: framer{maxHead: 1 << 16}}
}

func checkSame(t *testing.T, data []byte, sizes []int) {
	t.Helper()
	want := parseAll(&readConn{data: data})
	got := parseAll(frame(data, sizes))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("input %q, reads of %v:\nthrough expectConn: %v\ndirect:             %v", data, sizes, got, want)
	}
}

const pipeline = "PUT /b/k1 HTTP/1.1\r\nHost: h\r\nExpect: foo\r\nContent-Length: 33\r\n\r\n" +
	"\r\nExpect: inbody\r\n\r\nGET / HTTP/1." +
	"PUT /b/k2 HTTP/1.1\r\nHost: h\r\nexpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n" +
	"15;ext=1\r\nExpect: x\r\n\r\nGET / HT\r\n0\r\nX-Trailer: 1\r\n\r\n" +
	"GET /b/k1 HTTP/1.1\r\nHost: h\r\nEXPECT: Bar , 100-Continue\r\nExpect: 200-ok\r\n\r\n" +
	"GET /b/k3 HTTP/1.1\r\nHost: h\r\nExpect:\t100-continued\r\nContent-Length: 0\r\n\r\n"

// TestExpectRenamed checks which Expect headers the gateway's connections
// hide from net/http, and that the bodies around them pass unchanged.
func TestExpectRenamed(t *testing.T) {
	for _, sizes := range [][]int{nil, {1}, {3, 7}, {64}} {
		br := bufio.NewReader(frame([]byte(pipeline), sizes))
		var got []string
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				break
			}
			body, err := io.ReadAll(req.Body)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s %q %q %q", req.RequestURI, req.Header["Expect"], req.Header[unmetExpect], body))
		}
		want := []string{
			`/b/k1 [] ["foo"] "\r\nExpect: inbody\r\n\r\nGET / HTTP/1."`,
			`/b/k2 ["100-continue"] [] "Expect: x\r\n\r\nGET / HT"`,
			`/b/k1 ["Bar , 100-Continue"] ["200-ok"] ""`,
			`/b/k3 [] ["100-continued"] ""`,
		}
		if !slices.Equal(got, want) {
			t.Errorf("reads of %v:\ngot  %q\nwant %q", sizes, got, want)
		}
		checkSame(t, []byte(pipeline), sizes)
	}
}

// TestExpectFramingGivesUp checks inputs the framer does not follow: the
// bytes from there on pass unchanged (and net/http answers 417 or refuses
// the request, as without the gateway's connections).
func TestExpectFramingGivesUp(t *testing.T) {
	for _, in := range []string{
		"GET / HTTP/1.0\r\nExpect: foo\r\n\r\n",
		"GET / HTTP/1.1\nHost: h\r\nExpect: foo\r\n\r\n",
		"PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx",
		"PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
		"PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1\nx\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\n folded\r\nExpect: foo\r\n\r\n",
		"\r\nGET / HTTP/1.1\r\nHost: h\r\nExpect: foo\r\n\r\n",
	} {
		br := bufio.NewReader(frame([]byte(in), nil))
		req, err := http.ReadRequest(br)
		if err == nil && req.Header.Get(unmetExpect) != "" {
			t.Errorf("%q: renamed", in)
		}
		checkSame(t, []byte(in), []int{5})
	}
}

// FuzzExpectConn checks that for any bytes, net/http reads the same
// requests, headers (once restored) and bodies through an expectConn as
// from the bytes themselves.
func FuzzExpectConn(f *testing.F) {
	f.Add([]byte(pipeline), uint8(0), uint8(0))
	f.Add([]byte(pipeline), uint8(1), uint8(13))
	f.Add([]byte("PUT /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nExpect: a\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\nExpect: b\r\n\r\n"), uint8(2), uint8(1))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue, x\r\n\r\nabcdGET / HTTP/1.1\r\nHost: h\r\nX-Sluice-Unmet-Expect: z\r\nExpect: y\r\n\r\n"), uint8(5), uint8(200))
	f.Fuzz(func(t *testing.T, data []byte, a, b uint8) {
		sizes := []int{int(a) + 1, int(b) + 1}
		checkSame(t, data, sizes)
		// Reads that end at deadlines change nothing once retried.
		want, err := io.ReadAll(frame(data, nil))
		if err != nil {
			t.Fatal(err)
		}
		c := &expectConn{Conn: &readConn{data: data, sizes: sizes, timeouts: int(a%5) + 2}, fr: framer{maxHead: 1 << 16}}
		var got []byte
		buf := make([]byte, int(b)+1)
		for {
			n, err := c.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil && err != errTimeout {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("input %q: with deadlines %q, without %q", data, got, want)
		}
	})
}

// TestHasToken matches net/http's test for 100-continue.
func TestHasToken(t *testing.T) {
	for v, want := range map[string]bool{
		"100-continue": true, "100-Continue": true, "a,100-continue": true, "a 100-continue b": true,
		"100-continued": false, "x100-continue": false, "": false, "100-continue\t": true, "a;100-continue": false,
	} {
		if got := hasToken([]byte(v), "100-continue"); got != want {
			t.Errorf("hasToken(%q) = %v", v, got)
		}
	}
}
