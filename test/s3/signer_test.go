package s3

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// A minimal SigV4 client written from the AWS documentation, separate from
// the gateway's verifier, for requests no packaged tool makes (signed
// aws-chunked bodies, broken requests) and for the benchmarks.

type s3client struct {
	endpoint string // http://host:port
	ak, sk   string
	region   string
	hc       *http.Client
	now      func() time.Time
}

func newS3Client(endpoint string) *s3client {
	return &s3client{endpoint: endpoint, ak: testAK, sk: testSK, region: "us-east-1",
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, now: time.Now}
}

func uriEncode(s string, slash bool) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0 || (slash && c == '/') {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func hmacSum(key []byte, s string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(s))
	return h.Sum(nil)
}

func hexSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// derivedKeys caches the signing keys key derives, as SDKs do (the AWS
// SDK for Go v2 keeps them per day): four HMACs a request would otherwise
// weigh on the benchmarks' client beside the gateway it measures.
var derivedKeys sync.Map // derivedKeyID -> []byte

type derivedKeyID struct{ sk, region, date string }

func (c *s3client) key(date string) []byte {
	id := derivedKeyID{c.sk, c.region, date}
	if k, ok := derivedKeys.Load(id); ok {
		return k.([]byte)
	}
	k := hmacSum([]byte("AWS4"+c.sk), date)
	k = hmacSum(k, c.region)
	k = hmacSum(k, "s3")
	k = hmacSum(k, "aws4_request")
	derivedKeys.Store(id, k)
	return k
}

func canonQuery(q url.Values) string {
	var parts []string
	for k, vs := range q {
		for _, v := range vs {
			parts = append(parts, uriEncode(k, false)+"="+uriEncode(v, false))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "&")
}

// newRequest builds a request for a path ("/bucket/key", unescaped).
func (c *s3client) newRequest(method, path string, q url.Values, body io.Reader) *http.Request {
	u := c.endpoint + uriEncode(path, true)
	if len(q) > 0 {
		u += "?" + canonQuery(q)
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		panic(err)
	}
	return req
}

// sign signs req in its headers with the given payload hash. Every header
// already set is signed, with host and the x-amz-* ones added here.
func (c *s3client) sign(req *http.Request, payload string, at time.Time) string {
	amzDate := at.UTC().Format("20060102T150405Z")
	date := amzDate[:8]
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", payload)
	names := []string{"host"}
	vals := map[string]string{"host": req.URL.Host}
	for k, v := range req.Header {
		lk := strings.ToLower(k)
		names = append(names, lk)
		vals[lk] = strings.Join(v, ",")
	}
	if req.ContentLength > 0 && req.Header.Get("Content-Length") == "" {
		names = append(names, "content-length")
		vals["content-length"] = fmt.Sprint(req.ContentLength)
	}
	sort.Strings(names)
	var ch strings.Builder
	for _, n := range names {
		ch.WriteString(n + ":" + strings.TrimSpace(vals[n]) + "\n")
	}
	signed := strings.Join(names, ";")
	cr := req.Method + "\n" + uriEncode(req.URL.Path, true) + "\n" + canonQuery(req.URL.Query()) + "\n" + ch.String() + "\n" + signed + "\n" + payload
	scope := date + "/" + c.region + "/s3/aws4_request"
	sts := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hexSHA([]byte(cr))
	sig := hex.EncodeToString(hmacSum(c.key(date), sts))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+c.ak+"/"+scope+", SignedHeaders="+signed+", Signature="+sig)
	return sig
}

// do sends a signed request with a whole body and returns the response
// with its body read.
func (c *s3client) do(t testing.TB, method, path string, q url.Values, h http.Header, body []byte) (*http.Response, []byte) {
	t.Helper()
	req := c.newRequest(method, path, q, bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	c.sign(req, hexSHA(body), c.now())
	return c.send(t, req)
}

func (c *s3client) send(t testing.TB, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL, err)
	}
	return resp, b
}

// presign returns a presigned URL for method and path.
func (c *s3client) presign(method, path string, at time.Time, expires time.Duration) string {
	amzDate := at.UTC().Format("20060102T150405Z")
	date := amzDate[:8]
	scope := date + "/" + c.region + "/s3/aws4_request"
	q := url.Values{
		"X-Amz-Algorithm":     {"AWS4-HMAC-SHA256"},
		"X-Amz-Credential":    {c.ak + "/" + scope},
		"X-Amz-Date":          {amzDate},
		"X-Amz-Expires":       {fmt.Sprint(int(expires / time.Second))},
		"X-Amz-SignedHeaders": {"host"},
	}
	u, _ := url.Parse(c.endpoint)
	cr := method + "\n" + uriEncode(path, true) + "\n" + canonQuery(q) + "\nhost:" + u.Host + "\n\nhost\nUNSIGNED-PAYLOAD"
	sts := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hexSHA([]byte(cr))
	q.Set("X-Amz-Signature", hex.EncodeToString(hmacSum(c.key(date), sts)))
	return c.endpoint + uriEncode(path, true) + "?" + canonQuery(q)
}

// chunkedBody encodes data as aws-chunked. signed: each chunk signed
// (seed signature seed); trailer: an x-amz-checksum-<alg> trailer (signed
// too if the chunks are).
func (c *s3client) chunkedBody(data []byte, chunk int, signed bool, seed, amzDate, alg string, ck hash.Hash) []byte {
	var b bytes.Buffer
	date := amzDate[:8]
	scope := date + "/" + c.region + "/s3/aws4_request"
	prev := seed
	emptyHash := hexSHA(nil)
	write := func(p []byte) {
		if signed {
			sts := "AWS4-HMAC-SHA256-PAYLOAD\n" + amzDate + "\n" + scope + "\n" + prev + "\n" + emptyHash + "\n" + hexSHA(p)
			prev = hex.EncodeToString(hmacSum(c.key(date), sts))
			fmt.Fprintf(&b, "%x;chunk-signature=%s\r\n", len(p), prev)
		} else {
			fmt.Fprintf(&b, "%x\r\n", len(p))
		}
		b.Write(p)
		if len(p) > 0 {
			b.WriteString("\r\n")
		}
	}
	for len(data) > 0 {
		n := min(chunk, len(data))
		write(data[:n])
		data = data[n:]
	}
	write(nil)
	if alg != "" {
		line := "x-amz-checksum-" + alg + ":" + base64.StdEncoding.EncodeToString(ck.Sum(nil))
		b.WriteString(line + "\r\n")
		if signed {
			sts := "AWS4-HMAC-SHA256-TRAILER\n" + amzDate + "\n" + scope + "\n" + prev + "\n" + hexSHA([]byte(line+"\n"))
			b.WriteString("x-amz-trailer-signature:" + hex.EncodeToString(hmacSum(c.key(date), sts)) + "\r\n")
		}
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// putChunked uploads data with an aws-chunked body. mode is the
// x-amz-content-sha256 value; alg names a trailing checksum ("" for none).
// corrupt, if set, changes the encoded body before it is sent.
func (c *s3client) putChunked(t testing.TB, path string, data []byte, mode, alg string, ck hash.Hash, corrupt func([]byte) []byte) (*http.Response, []byte) {
	t.Helper()
	at := c.now()
	amzDate := at.UTC().Format("20060102T150405Z")
	signed := mode != "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
	// The seed signature covers the headers, including the encoded length,
	// so encode once with a dummy seed to learn the length.
	probe := c.chunkedBody(data, 64<<10, signed, strings.Repeat("0", 64), amzDate, alg, ck)
	req := c.newRequest("PUT", path, nil, nil)
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("X-Amz-Decoded-Content-Length", fmt.Sprint(len(data)))
	req.Header.Set("Content-Length", fmt.Sprint(len(probe)))
	if alg != "" {
		req.Header.Set("X-Amz-Trailer", "x-amz-checksum-"+alg)
	}
	seed := c.sign(req, mode, at)
	body := c.chunkedBody(data, 64<<10, signed, seed, amzDate, alg, ck)
	if corrupt != nil {
		body = corrupt(body)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	return c.send(t, req)
}

// s3Error is an S3 error document.
type s3Error struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// expectError checks that a response is an S3 error with this status and
// code and a well-formed XML body.
func expectError(t testing.TB, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d (%s); body %s", resp.StatusCode, status, code, body)
		return
	}
	if resp.Request != nil && resp.Request.Method == "HEAD" {
		return
	}
	var e s3Error
	if err := xml.Unmarshal(body, &e); err != nil {
		t.Errorf("error body is not XML: %v: %q", err, body)
		return
	}
	if e.Code != code {
		t.Errorf("error code %q (%s), want %q", e.Code, e.Message, code)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/xml" {
		t.Errorf("error Content-Type %q", ct)
	}
}
