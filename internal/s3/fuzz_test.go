package s3

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func FuzzRange(f *testing.F) {
	for _, s := range []string{"bytes=0-9", "bytes=-5", "bytes=5-", "bytes=5-3", "bytes=0-1,2-3", "bytes=", "bytes=-", "bytes=99999999999999999999-", "items=1-2", "bytes= 1 - 2"} {
		f.Add(s, int64(100))
		f.Add(s, int64(0))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			size = -size
		}
		if size < 0 {
			return
		}
		r, ok, err := parseRange(h, size)
		if err != nil && (ok || !isCode(err, "InvalidRange")) {
			t.Fatalf("parseRange(%q, %d) = %v %v %v", h, size, r, ok, err)
		}
		if ok && (r.Start < 0 || r.Length <= 0 || r.Start+r.Length > size) {
			t.Fatalf("parseRange(%q, %d) = %+v out of the object", h, size, r)
		}
		if cr, err := parseCopyRange(h, size); err == nil && (cr.Start < 0 || cr.Length <= 0 || cr.Start+cr.Length > size) {
			t.Fatalf("parseCopyRange(%q, %d) = %+v", h, size, cr)
		}
	})
}

func FuzzSigV4(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41", "/test.txt")
	f.Add("AWS4-HMAC-SHA256 Credential=a/b/c/d/e, SignedHeaders=, Signature=", "/?acl")
	f.Add("AWS AK:sig", "/x")
	f.Add("", "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404")
	f.Add("", "/a?X-Amz-Algorithm=x&X-Amz-Credential=%zz")
	f.Fuzz(func(t *testing.T, h, target string) {
		if a, err := parseAuthHeader(h); err == nil {
			if !isHexSignature(a.Signature) || len(a.SignedHeaders) == 0 || a.Cred.AccessKey == "" {
				t.Fatalf("parseAuthHeader(%q) accepted %+v", h, a)
			}
		}
		u, err := url.ParseRequestURI(target)
		if err != nil || !strings.HasPrefix(target, "/") {
			return
		}
		if q, err := url.ParseQuery(u.RawQuery); err == nil {
			parsePresign(q)
		}
		r := &http.Request{Method: "GET", URL: u, Host: "examplebucket.s3.amazonaws.com", Header: http.Header{}, RequestURI: target}
		r.Header.Set("Authorization", h)
		r.Header.Set("X-Amz-Date", "20130524T000000Z")
		r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
		g := testGateway(exampleTime)
		a, err := authenticate(g, r)
		if err == nil && a.AccessKey != "" && a.AccessKey != exampleAK {
			t.Fatalf("authenticated as unknown key %q", a.AccessKey)
		}
	})
}

func FuzzChunkedReader(f *testing.F) {
	f.Add(unsignedChunked([]byte("hello world"), 4, "x-amz-checksum-crc32:DUoRhQ==\r\n"), false, false)
	f.Add([]byte("0\r\n\r\n"), false, false)
	f.Add([]byte("5;ext=1\r\nhello\r\n0\r\n\r\n"), false, false)
	sigs := [3]string{
		"ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
		"0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
		"b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
	}
	f.Add(chunkedExample(sigs, ""), true, false)
	f.Add([]byte("400;chunk-signature="+strings.Repeat("0", 64)+"\r\n"), true, true)
	f.Fuzz(func(t *testing.T, body []byte, signed, signTrailer bool) {
		var s *chunkSigner
		if signed {
			s = exampleSigner("4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9")
		}
		cr := newChunkedReader(bytes.NewReader(body), s, signTrailer)
		got, err := io.ReadAll(io.LimitReader(cr, 1<<20))
		if len(got) > len(body) {
			t.Fatalf("decoded %d bytes from %d", len(got), len(body))
		}
		if err == nil && cr.err == io.EOF && !bytes.Contains(body, []byte("0")) {
			t.Fatalf("a body without a final chunk decoded cleanly: %q", body)
		}
	})
}

func FuzzXML(f *testing.F) {
	f.Add([]byte(`<Delete><Quiet>true</Quiet><Object><Key>a</Key></Object></Delete>`))
	f.Add([]byte(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"x"</ETag></Part></CompleteMultipartUpload>`))
	f.Add([]byte(`<CreateBucketConfiguration><LocationConstraint>eu</LocationConstraint></CreateBucketConfiguration>`))
	f.Add([]byte(`<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><Delete>&a;</Delete>`))
	f.Add([]byte(`<Delete><Object><Key>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var d deleteRequest
		if _, err := decodeXML(bytes.NewReader(data), &d, false); err == nil && d.XMLName.Local != "Delete" {
			t.Fatalf("accepted root %q as Delete", d.XMLName.Local)
		}
		var c completeRequest
		decodeXML(bytes.NewReader(data), &c, false)
		var b createBucketRequest
		decodeXML(bytes.NewReader(data), &b, true)
	})
}

func FuzzObjectPath(f *testing.F) {
	for _, k := range []string{"a", "a/b/", "../x", "a//b", ".sluice-s3/x", "ü/日本", "a/./b", "x\x00y", strings.Repeat("k/", 600)} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		p, dir, err := objectPath("bkt", key)
		if err != nil {
			return
		}
		if !strings.HasPrefix(p, "/bkt/") || strings.Contains(p, "//") || strings.Contains(p+"/", "/../") ||
			strings.Contains(p+"/", "/./") || strings.HasPrefix(p, "/bkt/.sluice-s3/") || p == "/bkt/.sluice-s3" ||
			strings.IndexByte(p, 0) >= 0 || len(key) > maxKeyLen {
			t.Fatalf("objectPath(%q) = %q: unsafe", key, p)
		}
		if want := "/bkt/" + strings.TrimSuffix(key, "/"); p != want || dir != strings.HasSuffix(key, "/") {
			t.Fatalf("objectPath(%q) = %q %v", key, p, dir)
		}
	})
}
