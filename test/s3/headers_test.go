package s3

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// headersScript sends requests botocore's own SigV4 signer signs and
// http.client sends, for the header cases boto3's API does not reach
// (issue 19): a body with Transfer-Encoding: chunked and no
// Content-Length, an empty Content-MD5, a request dated by Date (botocore
// signs so when a Date header is set), non-ASCII metadata values, and
// Content-Encoding lists.
const headersScript = `
import os, http.client, hashlib, email.header, urllib.parse
import boto3, botocore
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
creds = Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))
host = urllib.parse.urlparse(ep).netloc

def send(method, path, headers={}, body=b"", chunked=False, unsigned_headers={}):
    req = AWSRequest(method=method, url=ep + path, data=body, headers=dict(headers))
    S3SigV4Auth(creds, "s3", "us-east-1").add_auth(req)
    conn = http.client.HTTPConnection(host)
    conn.putrequest(method, path, skip_accept_encoding=True)
    for k, v in list(req.headers.items()) + list(unsigned_headers.items()):
        conn.putheader(k, v)
    if chunked:
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        for i in range(0, len(body), 1000):
            piece = body[i:i + 1000]
            conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        conn.send(b"0\r\n\r\n")
    else:
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
    r = conn.getresponse()
    out = (r.status, r.getheaders(), r.read())
    conn.close()
    return out

s3.create_bucket(Bucket="hdr")

# Transfer-Encoding: chunked without Content-Length.
data = os.urandom(100000)
st, _, body = send("PUT", "/hdr/chunked", body=data, chunked=True)
assert st == 200, (st, body)
assert s3.get_object(Bucket="hdr", Key="chunked")["Body"].read() == data

# An empty Content-MD5 is invalid.
st, _, body = send("PUT", "/hdr/md5", {"Content-MD5": ""}, b"x")
assert st == 400 and b"<Code>InvalidDigest</Code>" in body, (st, body)
assert s3.list_objects_v2(Bucket="hdr", Prefix="md5").get("KeyCount") == 0

# Signed with Date instead of X-Amz-Date (botocore writes it "..., -0000").
st, hs, body = send("PUT", "/hdr/dated", {"Date": "placeholder"}, b"dated")
sent = AWSRequest(method="GET", url=ep + "/", headers={"Date": "x"})
S3SigV4Auth(creds, "s3", "us-east-1").add_auth(sent)
assert "X-Amz-Date" not in sent.headers and "Date" in sent.headers, sent.headers
assert st == 200, (st, body)
st, _, body = send("GET", "/hdr/dated", {"Date": "placeholder"})
assert st == 200 and body == b"dated", (st, body)

# Non-ASCII metadata: UTF-8 or ISO-8859-1 bytes in, RFC 2047 out (as S3).
for key, raw, text in [("utf8", "wüh 日本".encode().decode("latin-1"), "wüh 日本"), ("latin1", "café", "café")]:
    st, _, body = send("PUT", "/hdr/meta-" + key, body=b"m", unsigned_headers={"x-amz-meta-word": raw})
    assert st == 200, (st, body)
    v = s3.head_object(Bucket="hdr", Key="meta-" + key)["Metadata"]["word"]
    assert v.startswith("=?UTF-8?") and str(email.header.make_header(email.header.decode_header(v))) == text, (key, v)
# RFC 2047 values sent by the client (botocore allows only ASCII) come back as sent.
enc = email.header.Header("naïve", "utf-8").encode()
s3.put_object(Bucket="hdr", Key="meta-2047", Body=b"m", Metadata={"word": enc})
assert s3.head_object(Bucket="hdr", Key="meta-2047")["Metadata"]["word"] == enc

# Content-Encoding lists keep their spelling.
s3.put_object(Bucket="hdr", Key="enc", Body=b"e", ContentEncoding="gzip, identity")
assert s3.head_object(Bucket="hdr", Key="enc")["ContentEncoding"] == "gzip, identity"
st, hs, body = send("PUT", "/hdr/enc2", body=b"e", unsigned_headers={"Content-Encoding": "br,  gzip"})
assert st == 200
assert s3.head_object(Bucket="hdr", Key="enc2")["ContentEncoding"] == "br,  gzip"

# An expectation other than 100-continue is ignored, as S3 ignores it
# (botocore does not sign Expect; TestExpectHeaders signs it).
st, _, body = send("PUT", "/hdr/expect", body=b"expected", unsigned_headers={"Expect": "foo"})
assert st == 200, (st, body)
st, _, body = send("GET", "/hdr/expect", unsigned_headers={"Expect": "200-ok"})
assert st == 200 and body == b"expected", (st, body)
print("OK")
`

func TestRequestHeaders(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	g.runScript(t, py, "headers", headersScript, g.clientEnv(t))
}

// TestExpectHeaders sends requests whose Expect headers net/http alone
// would answer with 417, signed and pipelined on one connection with
// bodies that look like header sections, and checks that each is served
// and each body stored as sent.
func TestExpectHeaders(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	c := newS3Client(g.endpoint)
	resp, body := c.do(t, "PUT", "/expect", nil, nil, nil)
	mustStatus(t, resp, body, 200)

	a := []byte("\r\nExpect: in-a-body\r\n\r\nGET /expect/a HTTP/1.1\r\n\r\n")
	b := bytes.Repeat([]byte("Expect: foo\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"), 300)
	var raw bytes.Buffer
	raw.Write(signedRaw(c, "PUT", "/expect/a", http.Header{"Expect": {"foo"}}, int64(len(a)), "UNSIGNED-PAYLOAD", a))
	// A chunked body, its Expect header signed, then one with 100-continue
	// among others.
	req := c.newRequest("PUT", "/expect/b", nil, nil)
	req.Header.Set("Expect", "something-else")
	c.sign(req, "UNSIGNED-PAYLOAD", c.now())
	fmt.Fprintf(&raw, "PUT %s HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n", req.URL.RequestURI(), req.URL.Host)
	req.Header.Write(&raw)
	raw.WriteString("\r\n")
	for i := 0; i < len(b); i += 1000 {
		piece := b[i:min(i+1000, len(b))]
		fmt.Fprintf(&raw, "%x;ext=\"Expect: x\"\r\n%s\r\n", len(piece), piece)
	}
	raw.WriteString("0\r\nX-Trailer: Expect\r\n\r\n")
	raw.Write(signedRaw(c, "PUT", "/expect/c", http.Header{"Expect": {"bar, 100-continue"}}, 3, "UNSIGNED-PAYLOAD", []byte("ccc")))
	get := c.newRequest("GET", "/expect/a", nil, nil)
	get.Header.Set("Expect", "200-ok")
	c.sign(get, hexSHA(nil), c.now())
	fmt.Fprintf(&raw, "GET %s HTTP/1.1\r\nHost: %s\r\n", get.URL.RequestURI(), get.URL.Host)
	get.Header.Write(&raw)
	raw.WriteString("\r\n")

	u, _ := url.Parse(g.endpoint)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	go conn.Write(raw.Bytes())
	br := bufio.NewReader(conn)
	for i, want := range []string{"PUT a", "PUT b", "PUT c", "GET a"} {
		resp, err := http.ReadResponse(br, nil)
		for err == nil && resp.StatusCode == 100 {
			resp, err = http.ReadResponse(br, nil)
		}
		if err != nil {
			t.Fatalf("response %d (%s): %v", i, want, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s %v", want, resp.StatusCode, body, err)
		}
		if want == "GET a" && !bytes.Equal(body, a) {
			t.Errorf("GET a on the pipeline: %q, want %q", body, a)
		}
	}
	for key, want := range map[string][]byte{"a": a, "b": b, "c": []byte("ccc")} {
		resp, body := c.do(t, "GET", "/expect/"+key, nil, nil, nil)
		mustStatus(t, resp, body, 200)
		if !bytes.Equal(body, want) {
			t.Errorf("%s: %d bytes back, want the %d sent", key, len(body), len(want))
		}
	}
	g.alive()
}
