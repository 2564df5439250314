package s3

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The examples of the AWS SigV4 documentation for S3
// (sig-v4-header-based-auth.html, sigv4-query-string-auth.html,
// sigv4-streaming.html, sigv4-streaming-trailers.html).
const (
	exampleAK     = "AKIAIOSFODNN7EXAMPLE"
	exampleSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

var exampleTime = time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)

func testGateway(now time.Time) *Gateway {
	return &Gateway{
		opts: Options{Credentials: map[string]string{exampleAK: exampleSecret}, MaxClockSkew: 15 * time.Minute, Now: func() time.Time { return now }},
		log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func authReq(method, target, host string, headers map[string]string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	r.Host = host
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	return r
}

func authenticate(g *Gateway, r *http.Request) (*authInfo, error) {
	pairs, err := parseRawQuery(strings.ReplaceAll(r.URL.RawQuery, "+", "%20"))
	if err != nil {
		return nil, err
	}
	return g.authenticate(r, pairs)
}

func TestSigV4Examples(t *testing.T) {
	t.Parallel()
	cred := "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"
	tests := []struct {
		name    string
		method  string
		target  string
		host    string
		headers map[string]string
	}{
		{"GetObject", "GET", "/test.txt", "examplebucket.s3.amazonaws.com", map[string]string{
			"Range":                "bytes=0-9",
			"X-Amz-Content-Sha256": emptySHA256,
			"X-Amz-Date":           "20130524T000000Z",
			"Authorization":        "AWS4-HMAC-SHA256 " + cred + ",SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
		}},
		{"PutObject", "PUT", "/test$file.text", "examplebucket.s3.amazonaws.com", map[string]string{
			"Date":                 "Fri, 24 May 2013 00:00:00 GMT",
			"X-Amz-Date":           "20130524T000000Z",
			"X-Amz-Storage-Class":  "REDUCED_REDUNDANCY",
			"X-Amz-Content-Sha256": "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
			"Authorization":        "AWS4-HMAC-SHA256 " + cred + ",SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
		}},
		{"GetBucketLifecycle", "GET", "/?lifecycle", "examplebucket.s3.amazonaws.com", map[string]string{
			"X-Amz-Content-Sha256": emptySHA256,
			"X-Amz-Date":           "20130524T000000Z",
			"Authorization":        "AWS4-HMAC-SHA256 " + cred + ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
		}},
		{"ListObjects", "GET", "/?max-keys=2&prefix=J", "examplebucket.s3.amazonaws.com", map[string]string{
			"X-Amz-Content-Sha256": emptySHA256,
			"X-Amz-Date":           "20130524T000000Z",
			"Authorization":        "AWS4-HMAC-SHA256 " + cred + ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
		}},
		{"Presigned", "GET", "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
			"examplebucket.s3.amazonaws.com", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := testGateway(exampleTime.Add(time.Minute))
			r := authReq(tc.method, tc.target, tc.host, tc.headers)
			a, err := authenticate(g, r)
			if err != nil {
				t.Fatalf("authenticate: %v", err)
			}
			if a.AccessKey != exampleAK {
				t.Errorf("access key = %q", a.AccessKey)
			}
			// Any change to a signed part must break the signature.
			r2 := authReq(tc.method, tc.target, "other"+tc.host, tc.headers)
			if _, err := authenticate(g, r2); !isCode(err, "SignatureDoesNotMatch") {
				t.Errorf("changed host: err = %v, want SignatureDoesNotMatch", err)
			}
		})
	}
}

func isCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

func TestSigV4Errors(t *testing.T) {
	t.Parallel()
	good := map[string]string{
		"Range":                "bytes=0-9",
		"X-Amz-Content-Sha256": emptySHA256,
		"X-Amz-Date":           "20130524T000000Z",
		"Authorization":        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range good {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	presign := "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
	tests := []struct {
		name    string
		now     time.Time
		target  string
		headers map[string]string
		code    string
	}{
		{"wrong signature", exampleTime, "/test.txt", with("Authorization", strings.Replace(good["Authorization"], "f0e8", "f0e9", 1)), "SignatureDoesNotMatch"},
		{"unknown key", exampleTime, "/test.txt", with("Authorization", strings.Replace(good["Authorization"], "AKIAIOSFODNN7EXAMPLE", "AKIAUNKNOWN", 1)), "InvalidAccessKeyId"},
		{"skew", exampleTime.Add(20 * time.Minute), "/test.txt", good, "RequestTimeTooSkewed"},
		{"skew behind", exampleTime.Add(-20 * time.Minute), "/test.txt", good, "RequestTimeTooSkewed"},
		{"changed range", exampleTime, "/test.txt", with("Range", "bytes=0-10"), "SignatureDoesNotMatch"},
		{"changed path", exampleTime, "/test2.txt", good, "SignatureDoesNotMatch"},
		{"added query", exampleTime, "/test.txt?acl", good, "SignatureDoesNotMatch"},
		{"missing signed header", exampleTime, "/test.txt", with("Range", ""), "SignatureDoesNotMatch"},
		{"no content sha", exampleTime, "/test.txt", with("X-Amz-Content-Sha256", ""), "InvalidRequest"},
		{"no date", exampleTime, "/test.txt", with("X-Amz-Date", ""), "AccessDenied"},
		{"malformed", exampleTime, "/test.txt", with("Authorization", "AWS4-HMAC-SHA256 Credential=x"), "AuthorizationHeaderMalformed"},
		{"sigv2", exampleTime, "/test.txt", with("Authorization", "AWS AKIAIOSFODNN7EXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg="), "InvalidRequest"},
		{"credential date", exampleTime, "/test.txt", with("Authorization", strings.Replace(good["Authorization"], "20130524", "20130523", 1)), "AuthorizationHeaderMalformed"},
		{"presign expired", exampleTime.Add(86401 * time.Second), presign, nil, "AccessDenied"},
		{"presign not yet valid", exampleTime.Add(-time.Hour), presign, nil, "AccessDenied"},
		{"presign tampered", exampleTime, strings.Replace(presign, "test.txt", "test.txu", 1), nil, "SignatureDoesNotMatch"},
		{"presign expires over a week", exampleTime, strings.Replace(presign, "86400", "604801", 1), nil, "AccessDenied"},
		{"presign negative expires", exampleTime, strings.Replace(presign, "86400", "-7", 1), nil, "AccessDenied"},
		{"presign zero expires", exampleTime, strings.Replace(presign, "86400", "0", 1), nil, "AccessDenied"},
		{"presign expires not a number", exampleTime, strings.Replace(presign, "86400", "1d", 1), nil, "AuthorizationQueryParametersError"},
		{"presign missing param", exampleTime, strings.Replace(presign, "X-Amz-SignedHeaders=host&", "", 1), nil, "AuthorizationQueryParametersError"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := testGateway(tc.now)
			_, err := authenticate(g, authReq("GET", tc.target, "examplebucket.s3.amazonaws.com", tc.headers))
			if !isCode(err, tc.code) {
				t.Fatalf("err = %v, want code %s", err, tc.code)
			}
		})
	}
	// Just inside the presigned URL's lifetime it works.
	g := testGateway(exampleTime.Add(86399 * time.Second))
	if _, err := authenticate(g, authReq("GET", presign, "examplebucket.s3.amazonaws.com", nil)); err != nil {
		t.Fatalf("presigned URL within its lifetime: %v", err)
	}
	// No credentials at all: anonymous.
	a, err := authenticate(g, authReq("GET", "/test.txt", "h", nil))
	if err != nil || !a.anonymous() {
		t.Fatalf("anonymous request: %+v, %v", a, err)
	}
}

func TestParseAuthHeader(t *testing.T) {
	t.Parallel()
	ok := "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("ab", 32)
	a, err := parseAuthHeader(ok)
	if err != nil {
		t.Fatal(err)
	}
	if a.Cred.AccessKey != "AK" || a.Cred.Region != "us-east-1" || len(a.SignedHeaders) != 2 || a.Signature != strings.Repeat("ab", 32) {
		t.Fatalf("parsed %+v", a)
	}
	bad := []string{
		"",
		"AWS4-HMAC-SHA256",
		"AWS4-HMAC-SHA256X Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=" + strings.Repeat("ab", 32),
		"AWS4-HMAC-SHA256 Credential=AK/2013052/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=" + strings.Repeat("ab", 32),
		"AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws5_request, SignedHeaders=host, Signature=" + strings.Repeat("ab", 32),
		"AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=Host, Signature=" + strings.Repeat("ab", 32),
		"AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;;x, Signature=" + strings.Repeat("ab", 32),
		"AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=" + strings.Repeat("AB", 32),
		"AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=abc",
		"AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=" + strings.Repeat("ab", 32),
		"AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host",
		"AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=" + strings.Repeat("ab", 32) + ", Extra=1",
	}
	for _, h := range bad {
		if _, err := parseAuthHeader(h); !isCode(err, "AuthorizationHeaderMalformed") {
			t.Errorf("parseAuthHeader(%q) = %v, want AuthorizationHeaderMalformed", h, err)
		}
	}
}

func TestURIEncode(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"/a b/c+d", "/a%20b/c%2Bd"},
		{"/~-._AZaz09", "/~-._AZaz09"},
		{"/ü", "/%C3%BC"},
		{"/%", "/%25"},
		{"/a*b", "/a%2Ab"},
	}
	for _, tc := range tests {
		if got := awsURIEncode(tc.in, true); got != tc.want {
			t.Errorf("awsURIEncode(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := awsURIEncode("a/b", false); got != "a%2Fb" {
		t.Errorf("query encoding of a/b = %q", got)
	}
}

// chunkedExample is the body of the aws-chunked example: 65536 and 1024
// bytes of 'a', with the documented chunk signatures.
func chunkedExample(sigs [3]string, trailer string) []byte {
	var b bytes.Buffer
	b.WriteString("10000;chunk-signature=" + sigs[0] + "\r\n")
	b.Write(bytes.Repeat([]byte("a"), 65536))
	b.WriteString("\r\n400;chunk-signature=" + sigs[1] + "\r\n")
	b.Write(bytes.Repeat([]byte("a"), 1024))
	b.WriteString("\r\n0;chunk-signature=" + sigs[2] + "\r\n")
	b.WriteString(trailer)
	b.WriteString("\r\n")
	return b.Bytes()
}

func exampleSigner(seed string) *chunkSigner {
	c := credential{AccessKey: exampleAK, Date: "20130524", Region: "us-east-1", Service: "s3"}
	return &chunkSigner{key: signingKey(exampleSecret, c), amzDate: "20130524T000000Z", scope: c.scope(), prevSig: seed}
}

func TestChunkedSignedExample(t *testing.T) {
	t.Parallel()
	sigs := [3]string{
		"ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
		"0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
		"b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
	}
	seed := "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"

	// The seed signature itself: the example's PUT request.
	g := testGateway(exampleTime)
	r := authReq("PUT", "/examplebucket/chunkObject.txt", "s3.amazonaws.com", map[string]string{
		"X-Amz-Date":                   "20130524T000000Z",
		"X-Amz-Storage-Class":          "REDUCED_REDUNDANCY",
		"Content-Encoding":             "aws-chunked",
		"X-Amz-Decoded-Content-Length": "66560",
		"Content-Length":               "66824",
		"X-Amz-Content-Sha256":         payloadStreaming,
		"Authorization":                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature=" + seed,
	})
	a, err := authenticate(g, r)
	if err != nil {
		t.Fatalf("seed signature: %v", err)
	}
	body := chunkedExample(sigs, "")
	if len(body) != 66824 {
		t.Fatalf("example body is %d bytes, want 66824", len(body))
	}
	cr := newChunkedReader(bytes.NewReader(body), &chunkSigner{key: a.key, amzDate: a.amzDate, scope: a.cred.scope(), prevSig: a.signature}, false)
	got, err := io.ReadAll(cr)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if len(got) != 66560 || bytes.Count(got, []byte("a")) != 66560 {
		t.Fatalf("decoded %d bytes", len(got))
	}

	// Each tampering is detected.
	for i, mutate := range []func([]byte) []byte{
		func(b []byte) []byte { b[100] = 'b'; return b },                                     // data of chunk 1
		func(b []byte) []byte { b[len(b)-100] = 'b'; return b },                              // data of chunk 2
		func(b []byte) []byte { return bytes.Replace(b, []byte("b6c6"), []byte("b6c7"), 1) }, // final signature
		func(b []byte) []byte { return b[:60000] },                                           // truncated
		func(b []byte) []byte { return b[:len(b)-90] },                                       // no final chunk
		func(b []byte) []byte { return bytes.Replace(b, []byte("400;"), []byte("3ff;"), 1) }, // wrong size
	} {
		b := mutate(append([]byte(nil), body...))
		cr := newChunkedReader(bytes.NewReader(b), exampleSigner(seed), false)
		if _, err := io.ReadAll(cr); err == nil {
			t.Errorf("mutation %d: no error", i)
		}
	}
}

func TestChunkedTrailerExample(t *testing.T) {
	t.Parallel()
	// sigv4-streaming-trailers.html: the same data with a signed CRC32C trailer.
	seed := "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e"
	sigs := [3]string{
		"b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
		"1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
		"2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992",
	}
	trailer := "x-amz-checksum-crc32c:sOO8/Q==\r\nx-amz-trailer-signature:d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n"
	cr := newChunkedReader(bytes.NewReader(chunkedExample(sigs, trailer)), exampleSigner(seed), true)
	got, err := io.ReadAll(cr)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if len(got) != 66560 {
		t.Fatalf("decoded %d bytes", len(got))
	}
	if v, _ := cr.Trailer("x-amz-checksum-crc32c"); v != "sOO8/Q==" {
		t.Fatalf("trailer = %q", v)
	}
	h := checksumAlgorithms["crc32c"]()
	h.Write(got)
	if v := b64(h.Sum(nil)); v != "sOO8/Q==" {
		t.Fatalf("crc32c of the example = %s, want sOO8/Q==", v)
	}
	bad := strings.Replace(trailer, "sOO8", "sOO9", 1)
	cr = newChunkedReader(bytes.NewReader(chunkedExample(sigs, bad)), exampleSigner(seed), true)
	if _, err := io.ReadAll(cr); !isCode(err, "SignatureDoesNotMatch") {
		t.Fatalf("tampered trailer: %v", err)
	}
}

func TestSigningKeysCache(t *testing.T) {
	var k signingKeys
	c := credential{AccessKey: "AK", Date: "20130524", Region: "us-east-1", Service: "s3"}
	want := signingKey(exampleSecret, c)
	for range 2 {
		if got := k.get(exampleSecret, c); !bytes.Equal(got, want) {
			t.Fatalf("get = %x, want %x", got, want)
		}
	}
	if got := k.get("another secret", c); bytes.Equal(got, want) {
		t.Fatal("a key cached for one secret was returned for another")
	}
	other := c
	other.Region = "eu-west-1"
	if got, want := k.get(exampleSecret, other), signingKey(exampleSecret, other); !bytes.Equal(got, want) {
		t.Fatalf("get for another region = %x, want %x", got, want)
	}
	for i := range 2 * maxSigningKeys {
		other.Region = fmt.Sprintf("region-%d", i)
		k.get(exampleSecret, other)
	}
	if n := len(k.m); n > maxSigningKeys {
		t.Fatalf("the cache holds %d keys, more than %d", n, maxSigningKeys)
	}
}
