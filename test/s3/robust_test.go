package s3

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// rawRequest sends bytes on a new connection and returns the response
// (nil if the server closed the connection without one).
func rawRequest(t *testing.T, endpoint string, raw []byte, closeWrite bool) (*http.Response, []byte) {
	t.Helper()
	u, _ := url.Parse(endpoint)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	conn.Write(raw)
	if closeWrite {
		conn.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, nil
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// signedRaw signs a request and serializes it with the given body bytes
// (which may disagree with its Content-Length).
func signedRaw(c *s3client, method, path string, h http.Header, declared int64, payload string, body []byte) []byte {
	req := c.newRequest(method, path, nil, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	req.ContentLength = declared
	req.Header.Set("Content-Length", fmt.Sprint(declared))
	c.sign(req, payload, c.now())
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, req.URL.RequestURI(), req.URL.Host)
	req.Header.Write(&b)
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	c := newS3Client(g.endpoint)
	resp, body := c.do(t, "PUT", "/bad", nil, nil, nil)
	mustStatus(t, resp, body, 200)
	// The gateway must keep serving after each bad request.
	healthy := func(t *testing.T) {
		t.Helper()
		resp, body := c.do(t, "PUT", "/bad/ok", nil, nil, []byte("fine"))
		mustStatus(t, resp, body, 200)
		resp, body = c.do(t, "GET", "/bad/ok", nil, nil, nil)
		if resp.StatusCode != 200 || string(body) != "fine" {
			t.Fatalf("gateway unhealthy after a bad request: %d %q", resp.StatusCode, body)
		}
		g.alive()
	}

	t.Run("MalformedXML", func(t *testing.T) {
		for _, doc := range []string{"<Delete>", "garbage", "<Delete><Object><Key>a</Key></Object></Other>", "", strings.Repeat("<a>", 100000)} {
			resp, body := c.do(t, "POST", "/bad", url.Values{"delete": {""}}, nil, []byte(doc))
			expectError(t, resp, body, 400, "MalformedXML")
		}
		resp, body := c.do(t, "POST", "/bad/k", url.Values{"uploads": {""}}, nil, nil)
		mustStatus(t, resp, body, 200)
		id := between(string(body), "<UploadId>", "</UploadId>")
		resp, body = c.do(t, "POST", "/bad/k", url.Values{"uploadId": {id}}, nil, []byte("<CompleteMultipartUpload><Part>"))
		expectError(t, resp, body, 400, "MalformedXML")
		resp, body = c.do(t, "POST", "/bad/k", url.Values{"uploadId": {id}}, nil, []byte("<CompleteMultipartUpload></CompleteMultipartUpload>"))
		expectError(t, resp, body, 400, "MalformedXML")
		healthy(t)
	})

	t.Run("TruncatedBody", func(t *testing.T) {
		// Content-Length 1000, 10 bytes sent, then the client half-closes.
		raw := signedRaw(c, "PUT", "/bad/trunc", nil, 1000, "UNSIGNED-PAYLOAD", []byte("0123456789"))
		resp, body := rawRequest(t, g.endpoint, raw, true)
		if resp == nil {
			t.Fatal("no response to a truncated body")
		}
		expectError(t, resp, body, 400, "IncompleteBody")
		resp, _ = c.do(t, "HEAD", "/bad/trunc", nil, nil, nil)
		if resp.StatusCode != 404 {
			t.Errorf("a truncated upload is visible: %d", resp.StatusCode)
		}
		healthy(t)
	})

	t.Run("WrongContentLength", func(t *testing.T) {
		// The body is longer than declared: the signed SHA-256 of the
		// declared bytes does not match.
		data := []byte("0123456789")
		raw := signedRaw(c, "PUT", "/bad/len", nil, 5, hexSHA(data), data)
		resp, body := rawRequest(t, g.endpoint, raw, false)
		if resp == nil {
			t.Fatal("no response")
		}
		expectError(t, resp, body, 400, "XAmzContentSHA256Mismatch")
		// A signed SHA-256 that does not match the body.
		resp, body = rawRequest(t, g.endpoint, signedRaw(c, "PUT", "/bad/len", nil, 10, hexSHA([]byte("other")), data), false)
		expectError(t, resp, body, 400, "XAmzContentSHA256Mismatch")
		// aws-chunked with a decoded length that does not match.
		h := http.Header{"Content-Encoding": {"aws-chunked"}, "X-Amz-Decoded-Content-Length": {"11"}}
		chunked := []byte("a\r\n0123456789\r\n0\r\n\r\n")
		resp, body = rawRequest(t, g.endpoint, signedRaw(c, "PUT", "/bad/len", h, int64(len(chunked)), "STREAMING-UNSIGNED-PAYLOAD-TRAILER", chunked), false)
		expectError(t, resp, body, 400, "IncompleteBody")
		resp, _ = c.do(t, "HEAD", "/bad/len", nil, nil, nil)
		if resp.StatusCode != 404 {
			t.Errorf("a bad upload is visible: %d", resp.StatusCode)
		}
		healthy(t)
	})

	t.Run("OversizedHeaders", func(t *testing.T) {
		h := http.Header{"X-Amz-Meta-Big": {strings.Repeat("m", 3000)}}
		resp, body := c.do(t, "PUT", "/bad/meta", nil, h, []byte("x"))
		expectError(t, resp, body, 400, "MetadataTooLarge")
		h = http.Header{}
		for i := range 100 {
			h.Set(fmt.Sprintf("X-Filler-%d", i), strings.Repeat("f", 1000))
		}
		resp, body = c.do(t, "GET", "/bad/ok", nil, h, nil)
		expectError(t, resp, body, 400, "RequestHeaderSectionTooLarge")
		healthy(t)
	})

	t.Run("Signatures", func(t *testing.T) {
		bad := *c
		bad.sk = "wrong-secret-key"
		resp, body := bad.do(t, "GET", "/bad/ok", nil, nil, nil)
		expectError(t, resp, body, 403, "SignatureDoesNotMatch")
		bad = *c
		bad.ak = "NOSUCHACCESSKEY"
		resp, body = bad.do(t, "GET", "/bad/ok", nil, nil, nil)
		expectError(t, resp, body, 403, "InvalidAccessKeyId")
		bad = *c
		bad.now = func() time.Time { return time.Now().Add(-time.Hour) }
		resp, body = bad.do(t, "GET", "/bad/ok", nil, nil, nil)
		expectError(t, resp, body, 403, "RequestTimeTooSkewed")
		resp, body = bad.do(t, "HEAD", "/bad/ok", nil, nil, nil)
		expectError(t, resp, body, 403, "RequestTimeTooSkewed")
		if resp.Header.Get("X-Amz-Error-Code") != "RequestTimeTooSkewed" {
			t.Errorf("HEAD error code header: %v", resp.Header)
		}
		// Tampered after signing.
		req := c.newRequest("GET", "/bad/ok", nil, nil)
		c.sign(req, hexSHA(nil), time.Now())
		req.URL.Path = "/bad/other"
		resp, body = c.send(t, req)
		expectError(t, resp, body, 403, "SignatureDoesNotMatch")
		healthy(t)
	})

	t.Run("Presigned", func(t *testing.T) {
		get := func(u string) (*http.Response, []byte) {
			resp, err := http.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp, b
		}
		resp, body := get(c.presign("GET", "/bad/ok", time.Now(), time.Hour))
		if resp.StatusCode != 200 || string(body) != "fine" {
			t.Errorf("presigned GET: %d %q", resp.StatusCode, body)
		}
		resp, body = get(c.presign("GET", "/bad/ok", time.Now().Add(-2*time.Hour), time.Hour))
		expectError(t, resp, body, 403, "AccessDenied")
		if !strings.Contains(string(body), "expired") {
			t.Errorf("expired presign message: %s", body)
		}
		u := c.presign("GET", "/bad/ok", time.Now(), time.Hour)
		resp, body = get(strings.Replace(u, "/bad/ok", "/bad/ok2", 1))
		expectError(t, resp, body, 403, "SignatureDoesNotMatch")
		put, err := http.NewRequest("PUT", c.presign("PUT", "/bad/presigned-put", time.Now(), time.Hour), strings.NewReader("via presigned PUT"))
		if err != nil {
			t.Fatal(err)
		}
		resp, body = c.send(t, put)
		mustStatus(t, resp, body, 200)
		_, body = c.do(t, "GET", "/bad/presigned-put", nil, nil, nil)
		if string(body) != "via presigned PUT" {
			t.Errorf("presigned PUT stored %q", body)
		}
		healthy(t)
	})

	t.Run("Anonymous", func(t *testing.T) {
		anon := func(method, path string) (*http.Response, []byte) {
			req, _ := http.NewRequest(method, g.endpoint+path, nil)
			return c.send(t, req)
		}
		resp, body := anon("GET", "/bad/ok")
		expectError(t, resp, body, 403, "AccessDenied")
		resp, body = anon("GET", "/")
		expectError(t, resp, body, 403, "AccessDenied")
		resp, body = c.do(t, "PUT", "/bad", url.Values{"acl": {""}}, http.Header{"X-Amz-Acl": {"public-read"}}, nil)
		mustStatus(t, resp, body, 200)
		// A public-read bucket can be listed; its objects are read only
		// as their own ACLs allow.
		resp, body = anon("GET", "/bad/ok")
		expectError(t, resp, body, 403, "AccessDenied")
		resp, body = c.do(t, "PUT", "/bad/ok", url.Values{"acl": {""}}, http.Header{"X-Amz-Acl": {"public-read"}}, nil)
		mustStatus(t, resp, body, 200)
		resp, body = anon("GET", "/bad/ok")
		if resp.StatusCode != 200 || string(body) != "fine" {
			t.Errorf("anonymous GET of a public-read object: %d %s", resp.StatusCode, body)
		}
		resp, body = anon("GET", "/bad?list-type=2")
		if resp.StatusCode != 200 || !strings.Contains(string(body), "<Key>ok</Key>") {
			t.Errorf("anonymous list of a public bucket: %d %s", resp.StatusCode, body)
		}
		resp, body = anon("PUT", "/bad/anon")
		expectError(t, resp, body, 403, "AccessDenied")
		resp, body = anon("DELETE", "/bad/ok")
		expectError(t, resp, body, 403, "AccessDenied")
		resp, body = c.do(t, "PUT", "/bad", url.Values{"acl": {""}}, http.Header{"X-Amz-Acl": {"private"}}, nil)
		mustStatus(t, resp, body, 200)
		resp, body = anon("GET", "/bad?list-type=2")
		expectError(t, resp, body, 403, "AccessDenied")
		resp, body = c.do(t, "PUT", "/bad/ok", url.Values{"acl": {""}}, http.Header{"X-Amz-Acl": {"private"}}, nil)
		mustStatus(t, resp, body, 200)
		resp, body = anon("GET", "/bad/ok")
		expectError(t, resp, body, 403, "AccessDenied")
		healthy(t)
	})

	t.Run("Unsupported", func(t *testing.T) {
		resp, body := c.do(t, "PUT", "/bad/ok", url.Values{"retention": {""}}, nil, []byte("<Retention/>"))
		expectError(t, resp, body, 501, "NotImplemented")
		resp, body = c.do(t, "GET", "/bad", url.Values{"policy": {""}}, nil, nil)
		expectError(t, resp, body, 404, "NoSuchBucketPolicy")
		resp, body = c.do(t, "PATCH", "/bad/ok", nil, nil, nil)
		expectError(t, resp, body, 405, "MethodNotAllowed")
		healthy(t)
	})

	// The client library sees everything the gateway wrote, and no
	// temporary files are left behind.
	fc := g.client()
	ents, err := fc.ReadDirAll(context.Background(), "/bad/.sluice-s3/tmp")
	if err == nil && len(ents) > 0 {
		t.Errorf("temporary files left behind: %v", ents)
	}
}

func between(s, a, b string) string {
	_, rest, _ := strings.Cut(s, a)
	v, _, _ := strings.Cut(rest, b)
	return v
}
