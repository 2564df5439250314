package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

type listResult struct {
	IsTruncated           bool
	NextContinuationToken string
	NextMarker            string
	KeyCount              int
	Contents              []struct {
		Key  string
		ETag string
		Size int64
	}
	CommonPrefixes []struct{ Prefix string }
}

func (c *s3client) list(t testing.TB, bucket string, q url.Values) listResult {
	t.Helper()
	if q == nil {
		q = url.Values{}
	}
	if !q.Has("list-type") && !q.Has("marker") {
		q.Set("list-type", "2")
	}
	resp, body := c.do(t, "GET", "/"+bucket, q, nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("list %s %v: %d %s", bucket, q, resp.StatusCode, body)
	}
	var r listResult
	if err := xml.Unmarshal(body, &r); err != nil {
		t.Fatalf("list: %v: %s", err, body)
	}
	return r
}

func (r listResult) keys() []string {
	var out []string
	for _, c := range r.Contents {
		out = append(out, c.Key)
	}
	return out
}

func (r listResult) prefixes() []string {
	var out []string
	for _, c := range r.CommonPrefixes {
		out = append(out, c.Prefix)
	}
	return out
}

func mustStatus(t testing.TB, resp *http.Response, body []byte, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", resp.Request.Method, resp.Request.URL, resp.StatusCode, want, body)
	}
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

func TestObjectAPI(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	c := newS3Client(g.endpoint)
	resp, body := c.do(t, "PUT", "/api", nil, nil, nil)
	mustStatus(t, resp, body, 200)

	t.Run("PutGetHead", func(t *testing.T) {
		data := []byte("hello, sluice\n")
		h := http.Header{"Content-Type": {"text/x-test"}, "X-Amz-Meta-Color": {"blue"}, "X-Amz-Meta-Empty-Ish": {"a b"},
			"Cache-Control": {"max-age=60"}, "Content-Disposition": {`attachment; filename="x.txt"`},
			"Content-Language": {"fr"}, "Expires": {"Thu, 01 Dec 2044 16:00:00 GMT"}}
		resp, body := c.do(t, "PUT", "/api/meta/obj.txt", nil, h, data)
		mustStatus(t, resp, body, 200)
		if resp.Header.Get("ETag") != `"`+md5hex(data)+`"` {
			t.Errorf("PUT ETag %q, want MD5 %s", resp.Header.Get("ETag"), md5hex(data))
		}
		for _, m := range []string{"GET", "HEAD"} {
			resp, body = c.do(t, m, "/api/meta/obj.txt", nil, nil, nil)
			mustStatus(t, resp, body, 200)
			want := map[string]string{"Content-Type": "text/x-test", "X-Amz-Meta-Color": "blue", "X-Amz-Meta-Empty-Ish": "a b",
				"Cache-Control": "max-age=60", "Content-Disposition": `attachment; filename="x.txt"`, "Content-Language": "fr",
				"Expires": "Thu, 01 Dec 2044 16:00:00 GMT", "Etag": `"` + md5hex(data) + `"`, "Content-Length": fmt.Sprint(len(data)),
				"Accept-Ranges": "bytes"}
			for k, v := range want {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s header %s = %q, want %q", m, k, got, v)
				}
			}
			if m == "GET" && !bytes.Equal(body, data) {
				t.Errorf("GET body %q", body)
			}
			if _, err := http.ParseTime(resp.Header.Get("Last-Modified")); err != nil {
				t.Errorf("Last-Modified %q: %v", resp.Header.Get("Last-Modified"), err)
			}
		}
		// Response header overrides of a signed GET.
		resp, _ = c.do(t, "GET", "/api/meta/obj.txt", url.Values{"response-content-type": {"application/json"}}, nil, nil)
		if resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("response-content-type override: %q", resp.Header.Get("Content-Type"))
		}
		// Overwrite replaces data and metadata.
		resp, body = c.do(t, "PUT", "/api/meta/obj.txt", nil, nil, []byte("v2"))
		mustStatus(t, resp, body, 200)
		resp, body = c.do(t, "GET", "/api/meta/obj.txt", nil, nil, nil)
		if string(body) != "v2" || resp.Header.Get("X-Amz-Meta-Color") != "" || resp.Header.Get("Content-Type") != "binary/octet-stream" {
			t.Errorf("after overwrite: %q %v", body, resp.Header)
		}
	})

	t.Run("ContentMD5", func(t *testing.T) {
		data := []byte("checked")
		sum := md5.Sum(data)
		good := http.Header{"Content-Md5": {b64(sum[:])}}
		resp, body := c.do(t, "PUT", "/api/md5", nil, good, data)
		mustStatus(t, resp, body, 200)
		bad := http.Header{"Content-Md5": {b64(make([]byte, 16))}}
		resp, body = c.do(t, "PUT", "/api/md5", nil, bad, []byte("other"))
		expectError(t, resp, body, 400, "BadDigest")
		resp, body = c.do(t, "PUT", "/api/md5", nil, http.Header{"Content-Md5": {"nope"}}, data)
		expectError(t, resp, body, 400, "InvalidDigest")
		// The failed uploads left the object as it was.
		_, body = c.do(t, "GET", "/api/md5", nil, nil, nil)
		if string(body) != "checked" {
			t.Errorf("after failed PUTs: %q", body)
		}
		crc := crc32.ChecksumIEEE(data)
		ck := []byte{byte(crc >> 24), byte(crc >> 16), byte(crc >> 8), byte(crc)}
		resp, body = c.do(t, "PUT", "/api/crc", nil, http.Header{"X-Amz-Checksum-Crc32": {b64(ck)}}, data)
		mustStatus(t, resp, body, 200)
		if resp.Header.Get("X-Amz-Checksum-Crc32") != b64(ck) {
			t.Errorf("checksum not echoed: %v", resp.Header)
		}
		resp, _ = c.do(t, "GET", "/api/crc", nil, http.Header{"X-Amz-Checksum-Mode": {"ENABLED"}}, nil)
		if resp.Header.Get("X-Amz-Checksum-Crc32") != b64(ck) {
			t.Errorf("checksum not returned with checksum mode: %v", resp.Header)
		}
		resp, body = c.do(t, "PUT", "/api/crc", nil, http.Header{"X-Amz-Checksum-Crc32": {"AAAAAA=="}}, data)
		expectError(t, resp, body, 400, "BadDigest")
	})

	t.Run("Range", func(t *testing.T) {
		data := []byte("0123456789")
		resp, body := c.do(t, "PUT", "/api/range", nil, nil, data)
		mustStatus(t, resp, body, 200)
		tests := []struct {
			rng, body, cr string
			status        int
		}{
			{"bytes=0-3", "0123", "bytes 0-3/10", 206},
			{"bytes=7-", "789", "bytes 7-9/10", 206},
			{"bytes=-2", "89", "bytes 8-9/10", 206},
			{"bytes=-20", "0123456789", "bytes 0-9/10", 206},
			{"bytes=5-100", "56789", "bytes 5-9/10", 206},
			{"bytes=3-1", "0123456789", "", 200},
			{"bytes=0-1,3-4", "0123456789", "", 200},
		}
		for _, tc := range tests {
			resp, body := c.do(t, "GET", "/api/range", nil, http.Header{"Range": {tc.rng}}, nil)
			if resp.StatusCode != tc.status || string(body) != tc.body || resp.Header.Get("Content-Range") != tc.cr {
				t.Errorf("Range %s: %d %q %q", tc.rng, resp.StatusCode, body, resp.Header.Get("Content-Range"))
			}
		}
		resp, body = c.do(t, "GET", "/api/range", nil, http.Header{"Range": {"bytes=10-"}}, nil)
		expectError(t, resp, body, 416, "InvalidRange")
		if resp.Header.Get("Content-Range") != "bytes */10" {
			t.Errorf("416 Content-Range %q", resp.Header.Get("Content-Range"))
		}
	})

	t.Run("Conditional", func(t *testing.T) {
		resp, body := c.do(t, "PUT", "/api/cond", nil, nil, []byte("x"))
		mustStatus(t, resp, body, 200)
		etag := resp.Header.Get("ETag")
		resp, body = c.do(t, "HEAD", "/api/cond", nil, nil, nil)
		mustStatus(t, resp, body, 200)
		lm := resp.Header.Get("Last-Modified")
		mt, _ := http.ParseTime(lm)
		past, future := mt.Add(-time.Hour).Format(http.TimeFormat), mt.Add(time.Hour).Format(http.TimeFormat)
		tests := []struct {
			h      http.Header
			status int
		}{
			{http.Header{"If-Match": {etag}}, 200},
			{http.Header{"If-Match": {`"nope"`}}, 412},
			{http.Header{"If-None-Match": {etag}}, 304},
			{http.Header{"If-None-Match": {`"nope"`}}, 200},
			{http.Header{"If-Modified-Since": {lm}}, 304},
			{http.Header{"If-Modified-Since": {past}}, 200},
			{http.Header{"If-Unmodified-Since": {past}}, 412},
			{http.Header{"If-Unmodified-Since": {future}}, 200},
			{http.Header{"If-Match": {etag}, "If-Unmodified-Since": {past}}, 200},
			{http.Header{"If-None-Match": {etag}, "If-Modified-Since": {past}}, 304},
		}
		for _, m := range []string{"GET", "HEAD"} {
			for _, tc := range tests {
				resp, body := c.do(t, m, "/api/cond", nil, tc.h, nil)
				if resp.StatusCode != tc.status {
					t.Errorf("%s %v: %d, want %d: %s", m, tc.h, resp.StatusCode, tc.status, body)
				}
				if tc.status == 412 && m == "GET" {
					expectError(t, resp, body, 412, "PreconditionFailed")
				}
			}
		}
		// Conditional writes.
		resp, body = c.do(t, "PUT", "/api/cond", nil, http.Header{"If-None-Match": {"*"}}, []byte("y"))
		expectError(t, resp, body, 412, "PreconditionFailed")
		resp, body = c.do(t, "PUT", "/api/cond-new", nil, http.Header{"If-None-Match": {"*"}}, []byte("y"))
		mustStatus(t, resp, body, 200)
		resp, body = c.do(t, "PUT", "/api/cond", nil, http.Header{"If-Match": {`"nope"`}}, []byte("y"))
		expectError(t, resp, body, 412, "PreconditionFailed")
		resp, body = c.do(t, "PUT", "/api/cond", nil, http.Header{"If-Match": {etag}}, []byte("z"))
		mustStatus(t, resp, body, 200)
	})

	t.Run("Copy", func(t *testing.T) {
		data := bytes.Repeat([]byte("copy me "), 100000)
		resp, body := c.do(t, "PUT", "/api/src/a", nil, http.Header{"Content-Type": {"text/a"}, "X-Amz-Meta-K": {"v"}}, data)
		mustStatus(t, resp, body, 200)
		resp, body = c.do(t, "PUT", "/api/dst/b", nil, http.Header{"X-Amz-Copy-Source": {"/api/src/a"}}, nil)
		mustStatus(t, resp, body, 200)
		if !strings.Contains(string(body), md5hex(data)) {
			t.Errorf("CopyObjectResult %s does not have the MD5", body)
		}
		resp, got := c.do(t, "GET", "/api/dst/b", nil, nil, nil)
		if !bytes.Equal(got, data) || resp.Header.Get("Content-Type") != "text/a" || resp.Header.Get("X-Amz-Meta-K") != "v" {
			t.Errorf("copy (COPY directive): %d bytes, headers %v", len(got), resp.Header)
		}
		resp, body = c.do(t, "PUT", "/api/dst/c", nil, http.Header{"X-Amz-Copy-Source": {"api/src/a"}, "X-Amz-Metadata-Directive": {"REPLACE"}, "Content-Type": {"text/c"}}, nil)
		mustStatus(t, resp, body, 200)
		resp, _ = c.do(t, "HEAD", "/api/dst/c", nil, nil, nil)
		if resp.Header.Get("Content-Type") != "text/c" || resp.Header.Get("X-Amz-Meta-K") != "" {
			t.Errorf("copy (REPLACE directive): %v", resp.Header)
		}
		resp, body = c.do(t, "PUT", "/api/src/a", nil, http.Header{"X-Amz-Copy-Source": {"/api/src/a"}}, nil)
		expectError(t, resp, body, 400, "InvalidRequest")
		resp, body = c.do(t, "PUT", "/api/src/a", nil, http.Header{"X-Amz-Copy-Source": {"/api/src/a"}, "X-Amz-Metadata-Directive": {"REPLACE"}, "X-Amz-Meta-New": {"1"}}, nil)
		mustStatus(t, resp, body, 200)
		resp, _ = c.do(t, "HEAD", "/api/src/a", nil, nil, nil)
		if resp.Header.Get("X-Amz-Meta-New") != "1" || resp.Header.Get("Etag") != `"`+md5hex(data)+`"` {
			t.Errorf("metadata-only copy: %v", resp.Header)
		}
		resp, body = c.do(t, "PUT", "/api/dst/d", nil, http.Header{"X-Amz-Copy-Source": {"/api/src/none"}}, nil)
		expectError(t, resp, body, 404, "NoSuchKey")
		resp, body = c.do(t, "PUT", "/api/dst/d", nil, http.Header{"X-Amz-Copy-Source": {"/api/src/a"}, "X-Amz-Copy-Source-If-Match": {`"nope"`}}, nil)
		expectError(t, resp, body, 412, "PreconditionFailed")
	})

	t.Run("Multipart", func(t *testing.T) {
		part1 := bytes.Repeat([]byte{'1'}, 5<<20)
		part2 := bytes.Repeat([]byte{'2'}, 5<<20)
		resp, body := c.do(t, "PUT", "/api/mpsrc", nil, nil, bytes.Repeat([]byte("s"), 6<<20))
		mustStatus(t, resp, body, 200)
		resp, body = c.do(t, "POST", "/api/mp/obj", url.Values{"uploads": {""}}, http.Header{"Content-Type": {"text/mp"}, "X-Amz-Meta-Mp": {"yes"}}, nil)
		mustStatus(t, resp, body, 200)
		var init struct{ UploadId string }
		xml.Unmarshal(body, &init)
		id := init.UploadId
		up := func(n int, data []byte) string {
			resp, body := c.do(t, "PUT", "/api/mp/obj", url.Values{"uploadId": {id}, "partNumber": {fmt.Sprint(n)}}, nil, data)
			mustStatus(t, resp, body, 200)
			return resp.Header.Get("ETag")
		}
		e1 := up(1, part1)
		up(2, []byte("replaced below"))
		e2 := up(2, part2)
		// Part 3 copied from a range of another object.
		resp, body = c.do(t, "PUT", "/api/mp/obj", url.Values{"uploadId": {id}, "partNumber": {"3"}},
			http.Header{"X-Amz-Copy-Source": {"/api/mpsrc"}, "X-Amz-Copy-Source-Range": {"bytes=0-999"}}, nil)
		mustStatus(t, resp, body, 200)
		var cp struct{ ETag string }
		xml.Unmarshal(body, &cp)
		e3 := cp.ETag
		if e3 != `"`+md5hex(bytes.Repeat([]byte("s"), 1000))+`"` {
			t.Errorf("UploadPartCopy ETag %s", e3)
		}
		resp, body = c.do(t, "GET", "/api/mp/obj", url.Values{"uploadId": {id}}, nil, nil)
		mustStatus(t, resp, body, 200)
		var lp struct {
			Part []struct {
				PartNumber int
				ETag       string
				Size       int64
			}
		}
		xml.Unmarshal(body, &lp)
		if len(lp.Part) != 3 || lp.Part[1].ETag != e2 || lp.Part[1].Size != 5<<20 || lp.Part[2].Size != 1000 {
			t.Errorf("ListParts: %+v", lp)
		}
		resp, body = c.do(t, "GET", "/api", url.Values{"uploads": {""}}, nil, nil)
		mustStatus(t, resp, body, 200)
		if !strings.Contains(string(body), id) {
			t.Errorf("ListMultipartUploads does not show %s: %s", id, body)
		}
		// The parts never show in listings.
		if keys := c.list(t, "api", url.Values{"prefix": {"mp/"}}).keys(); len(keys) != 0 {
			t.Errorf("listing during an upload: %v", keys)
		}
		complete := func(parts ...string) (*http.Response, []byte) {
			var b strings.Builder
			b.WriteString("<CompleteMultipartUpload>")
			for i := 0; i < len(parts); i += 2 {
				fmt.Fprintf(&b, "<Part><PartNumber>%s</PartNumber><ETag>%s</ETag></Part>", parts[i], parts[i+1])
			}
			b.WriteString("</CompleteMultipartUpload>")
			return c.do(t, "POST", "/api/mp/obj", url.Values{"uploadId": {id}}, nil, []byte(b.String()))
		}
		resp, body = complete("2", e2, "1", e1)
		expectError(t, resp, body, 400, "InvalidPartOrder")
		resp, body = complete("1", `"deadbeef"`, "2", e2)
		expectError(t, resp, body, 400, "InvalidPart")
		resp, body = complete("1", e1, "3", e3, "2", e2)
		expectError(t, resp, body, 400, "InvalidPartOrder")
		resp, body = complete("1", e1, "3", e3)
		mustStatus(t, resp, body, 200)
		var done struct{ ETag string }
		xml.Unmarshal(body, &done)
		s1, _ := hex.DecodeString(strings.Trim(e1, `"`))
		s3, _ := hex.DecodeString(strings.Trim(e3, `"`))
		want := `"` + md5hex(append(s1, s3...)) + `-2"`
		if done.ETag != want {
			t.Errorf("multipart ETag %s, want %s", done.ETag, want)
		}
		resp, got := c.do(t, "GET", "/api/mp/obj", nil, nil, nil)
		exp := append(append([]byte(nil), part1...), bytes.Repeat([]byte("s"), 1000)...)
		if !bytes.Equal(got, exp) || resp.Header.Get("Etag") != want || resp.Header.Get("Content-Type") != "text/mp" || resp.Header.Get("X-Amz-Meta-Mp") != "yes" {
			t.Errorf("assembled object: %d bytes, %v", len(got), resp.Header)
		}
		// A repeated Complete answers as the first one did.
		resp, body = complete("1", e1, "3", e3)
		mustStatus(t, resp, body, 200)
		var again struct{ ETag string }
		xml.Unmarshal(body, &again)
		if again.ETag != want {
			t.Errorf("repeated Complete: %s, want ETag %s", body, want)
		}
		// Small parts are refused, as in S3; abort removes everything.
		resp, body = c.do(t, "POST", "/api/mp/small", url.Values{"uploads": {""}}, nil, nil)
		mustStatus(t, resp, body, 200)
		xml.Unmarshal(body, &init)
		id = init.UploadId
		r1, _ := c.do(t, "PUT", "/api/mp/small", url.Values{"uploadId": {id}, "partNumber": {"1"}}, nil, []byte("tiny"))
		r2, _ := c.do(t, "PUT", "/api/mp/small", url.Values{"uploadId": {id}, "partNumber": {"2"}}, nil, []byte("tiny"))
		body = []byte("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>" + r1.Header.Get("ETag") + "</ETag></Part><Part><PartNumber>2</PartNumber><ETag>" + r2.Header.Get("ETag") + "</ETag></Part></CompleteMultipartUpload>")
		resp, body = c.do(t, "POST", "/api/mp/small", url.Values{"uploadId": {id}}, nil, body)
		expectError(t, resp, body, 400, "EntityTooSmall")
		resp, body = c.do(t, "DELETE", "/api/mp/small", url.Values{"uploadId": {id}}, nil, nil)
		mustStatus(t, resp, body, 204)
		resp, body = c.do(t, "PUT", "/api/mp/small", url.Values{"uploadId": {id}, "partNumber": {"3"}}, nil, []byte("late"))
		expectError(t, resp, body, 404, "NoSuchUpload")
		resp, body = c.do(t, "DELETE", "/api/mp/small", url.Values{"uploadId": {id}}, nil, nil)
		expectError(t, resp, body, 404, "NoSuchUpload")
		resp, body = c.do(t, "PUT", "/api/mp/small", url.Values{"uploadId": {"../../etc"}, "partNumber": {"1"}}, nil, []byte("x"))
		expectError(t, resp, body, 404, "NoSuchUpload")
	})

	t.Run("Chunked", func(t *testing.T) {
		data := bytes.Repeat([]byte("chunky data "), 30000)
		for _, mode := range []string{"STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"} {
			for _, alg := range []string{"", "crc32", "crc32c", "crc64nvme", "sha1", "sha256"} {
				if alg == "" && mode != "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" || alg != "" && mode == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" {
					continue
				}
				key := "/api/chunked/" + strings.ToLower(mode) + "-" + alg
				var ck = newHash(alg)
				if ck != nil {
					ck.Write(data)
				}
				resp, body := c.putChunked(t, key, data, mode, alg, ck, nil)
				mustStatus(t, resp, body, 200)
				if resp.Header.Get("ETag") != `"`+md5hex(data)+`"` {
					t.Errorf("%s %s: ETag %s", mode, alg, resp.Header.Get("ETag"))
				}
				_, got := c.do(t, "GET", key, nil, nil, nil)
				if !bytes.Equal(got, data) {
					t.Errorf("%s %s: read back %d bytes", mode, alg, len(got))
				}
				// A flipped data byte fails the chunk signature or the checksum.
				ck = newHash(alg)
				if ck != nil {
					ck.Write(data)
				}
				resp, body = c.putChunked(t, key+"-bad", data, mode, alg, ck, func(b []byte) []byte { b[1000] ^= 1; return b })
				if mode == "STREAMING-UNSIGNED-PAYLOAD-TRAILER" {
					expectError(t, resp, body, 400, "BadDigest")
				} else {
					expectError(t, resp, body, 403, "SignatureDoesNotMatch")
				}
				resp, _ = c.do(t, "HEAD", key+"-bad", nil, nil, nil)
				if resp.StatusCode != 404 {
					t.Errorf("%s %s: a rejected upload is visible: %d", mode, alg, resp.StatusCode)
				}
			}
		}
	})

	t.Run("Keys", func(t *testing.T) {
		keys := []string{"with space", "plus+sign", "percent%25and%", "ünïcødé/日本語", "tilde~star*", "a=b&c?d#e", "semi;colon",
			strings.Repeat("long/", 199) + strings.Repeat("x", 24), strings.Repeat("y", 255)}
		for _, k := range keys {
			resp, body := c.do(t, "PUT", "/api/keys/"+k, nil, nil, []byte(k))
			mustStatus(t, resp, body, 200)
			resp, body = c.do(t, "GET", "/api/keys/"+k, nil, nil, nil)
			if resp.StatusCode != 200 || string(body) != k {
				t.Errorf("key %q: %d %q", k, resp.StatusCode, body)
			}
		}
		got := c.list(t, "api", url.Values{"prefix": {"keys/"}, "encoding-type": {"url"}}).keys()
		for i := range got {
			got[i], _ = url.QueryUnescape(got[i])
		}
		var want []string
		for _, k := range keys {
			want = append(want, "keys/"+k)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("listed %q\nwant %q", got, want)
		}
		bad := []struct {
			key    string
			status int
			code   string
		}{
			{"keys/../escape", 400, "XSluiceInvalidObjectName"},
			{"../escape", 400, "XSluiceInvalidObjectName"},
			{"keys/./x", 400, "XSluiceInvalidObjectName"},
			{"keys//x", 400, "XSluiceInvalidObjectName"},
			{".sluice-s3/tmp/x", 400, "XSluiceInvalidObjectName"},
			{strings.Repeat("z", 256), 400, "KeyTooLongError"},
			{strings.Repeat("z/", 512) + "z", 400, "KeyTooLongError"},
			{"keys/with space/sub", 409, "XSluiceKeyConflict"}, // "keys/with space" is a file
			{"keys", 409, "XSluiceKeyConflict"},                // "keys" is a directory
		}
		for _, tc := range bad {
			resp, body := c.do(t, "PUT", "/api/"+tc.key, nil, nil, []byte("x"))
			expectError(t, resp, body, tc.status, tc.code)
		}
		// Nothing escaped the bucket.
		fc := g.client()
		if _, err := fc.Stat(context.Background(), "/escape"); err == nil {
			t.Error("a key escaped its bucket")
		}
	})

	t.Run("Listing", func(t *testing.T) {
		resp, body := c.do(t, "PUT", "/lst", nil, nil, nil)
		mustStatus(t, resp, body, 200)
		// '-' and '.' sort before '/': "d-x" < "d.x" < "d/..." in key order.
		keys := []string{"d/a", "d/b/c", "d-x", "d.x", "d0", "e", "emptydir/", "f/g/h/i", "marker/", "marker/in"}
		for _, k := range keys {
			resp, body := c.do(t, "PUT", "/lst/"+k, nil, nil, nil)
			mustStatus(t, resp, body, 200)
		}
		all := c.list(t, "lst", nil).keys()
		want := []string{"d-x", "d.x", "d/a", "d/b/c", "d0", "e", "emptydir/", "f/g/h/i", "marker/", "marker/in"}
		if !slices.Equal(all, want) {
			t.Errorf("full listing %q\nwant %q", all, want)
		}
		r := c.list(t, "lst", url.Values{"delimiter": {"/"}})
		if !slices.Equal(r.keys(), []string{"d-x", "d.x", "d0", "e"}) || !slices.Equal(r.prefixes(), []string{"d/", "emptydir/", "f/", "marker/"}) {
			t.Errorf("delimiter listing %q %q", r.keys(), r.prefixes())
		}
		r = c.list(t, "lst", url.Values{"delimiter": {"/"}, "prefix": {"d/"}})
		if !slices.Equal(r.keys(), []string{"d/a"}) || !slices.Equal(r.prefixes(), []string{"d/b/"}) {
			t.Errorf("prefix d/ listing %q %q", r.keys(), r.prefixes())
		}
		r = c.list(t, "lst", url.Values{"delimiter": {"/"}, "prefix": {"marker/"}})
		if !slices.Equal(r.keys(), []string{"marker/", "marker/in"}) {
			t.Errorf("marker/ listing %q", r.keys())
		}
		r = c.list(t, "lst", url.Values{"prefix": {"d"}, "delimiter": {"."}})
		if !slices.Equal(r.keys(), []string{"d-x", "d/a", "d/b/c", "d0"}) || !slices.Equal(r.prefixes(), []string{"d."}) {
			t.Errorf("delimiter . listing %q %q", r.keys(), r.prefixes())
		}
		if r := c.list(t, "lst", url.Values{"start-after": {"d/b"}}); !slices.Equal(r.keys(), want[3:]) {
			t.Errorf("start-after d/b: %q", r.keys())
		}
		if r := c.list(t, "lst", url.Values{"marker": {"e"}}); !slices.Equal(r.keys(), want[6:]) {
			t.Errorf("V1 marker e: %q", r.keys())
		}
		// Pages of 3 add up to the full listing, in V2 and V1.
		var paged []string
		q := url.Values{"max-keys": {"3"}}
		for i := 0; ; i++ {
			r := c.list(t, "lst", q)
			paged = append(paged, r.keys()...)
			if !r.IsTruncated {
				break
			}
			q.Set("continuation-token", r.NextContinuationToken)
			if i > 10 {
				t.Fatal("endless pagination")
			}
		}
		if !slices.Equal(paged, want) {
			t.Errorf("paged V2 %q", paged)
		}
		paged = nil
		q = url.Values{"max-keys": {"4"}, "marker": {""}}
		for {
			r := c.list(t, "lst", q)
			paged = append(paged, r.keys()...)
			if !r.IsTruncated {
				break
			}
			q.Set("marker", r.NextMarker)
		}
		if !slices.Equal(paged, want) {
			t.Errorf("paged V1 %q", paged)
		}
		// Deleting the last object of a directory removes the directory,
		// except a "dir/" object.
		for _, k := range []string{"f/g/h/i", "marker/in"} {
			resp, body := c.do(t, "DELETE", "/lst/"+k, nil, nil, nil)
			mustStatus(t, resp, body, 204)
		}
		fc := g.client()
		if _, err := fc.Stat(context.Background(), "/lst/f"); err == nil {
			t.Error("empty directories were left behind")
		}
		if r := c.list(t, "lst", url.Values{"prefix": {"marker"}}); !slices.Equal(r.keys(), []string{"marker/"}) {
			t.Errorf("after delete: %q", r.keys())
		}
		resp, body = c.do(t, "DELETE", "/lst/marker/", nil, nil, nil)
		mustStatus(t, resp, body, 204)
		resp, _ = c.do(t, "HEAD", "/lst/marker/", nil, nil, nil)
		if resp.StatusCode != 404 {
			t.Errorf("HEAD of a deleted dir object: %d", resp.StatusCode)
		}
	})

	t.Run("DeleteObjects", func(t *testing.T) {
		for _, k := range []string{"x/1", "x/2", "x/3"} {
			resp, body := c.do(t, "PUT", "/api/del/"+k, nil, nil, []byte(k))
			mustStatus(t, resp, body, 200)
		}
		doc := "<Delete><Object><Key>del/x/1</Key></Object><Object><Key>del/x/2</Key></Object><Object><Key>del/missing</Key></Object><Object><Key>../bad</Key></Object></Delete>"
		sum := md5.Sum([]byte(doc))
		resp, body := c.do(t, "POST", "/api", url.Values{"delete": {""}}, http.Header{"Content-Md5": {b64(sum[:])}}, []byte(doc))
		mustStatus(t, resp, body, 200)
		var res struct {
			Deleted []struct{ Key string }
			Error   []struct{ Key, Code string }
		}
		xml.Unmarshal(body, &res)
		if len(res.Deleted) != 3 || len(res.Error) != 1 || res.Error[0].Key != "../bad" {
			t.Errorf("DeleteObjects result %s", body)
		}
		if keys := c.list(t, "api", url.Values{"prefix": {"del/"}}).keys(); !slices.Equal(keys, []string{"del/x/3"}) {
			t.Errorf("after DeleteObjects: %q", keys)
		}
		resp, body = c.do(t, "POST", "/api", url.Values{"delete": {""}}, nil, []byte("<Delete><Object><Key>x</Key></Object>"))
		expectError(t, resp, body, 400, "MalformedXML")
	})

	t.Run("Buckets", func(t *testing.T) {
		resp, body := c.do(t, "PUT", "/api", nil, nil, nil)
		expectError(t, resp, body, 409, "BucketAlreadyOwnedByYou")
		resp, body = c.do(t, "PUT", "/Bad_Name", nil, nil, nil)
		expectError(t, resp, body, 400, "InvalidBucketName")
		resp, body = c.do(t, "DELETE", "/api", nil, nil, nil)
		expectError(t, resp, body, 409, "BucketNotEmpty")
		resp, body = c.do(t, "HEAD", "/nosuch", nil, nil, nil)
		expectError(t, resp, body, 404, "NoSuchBucket")
		resp, body = c.do(t, "GET", "/nosuch/key", nil, nil, nil)
		expectError(t, resp, body, 404, "NoSuchBucket")
		resp, body = c.do(t, "GET", "/api/nosuchkey", nil, nil, nil)
		expectError(t, resp, body, 404, "NoSuchKey")
		resp, body = c.do(t, "PUT", "/nosuch/key", nil, nil, []byte("x"))
		expectError(t, resp, body, 404, "NoSuchBucket")
		resp, body = c.do(t, "PUT", "/tmpbucket", nil, nil, []byte(`<CreateBucketConfiguration><LocationConstraint>us-east-1</LocationConstraint></CreateBucketConfiguration>`))
		mustStatus(t, resp, body, 200)
		resp, body = c.do(t, "PUT", "/tmpbucket2", nil, nil, []byte(`<CreateBucketConfiguration><Location`))
		expectError(t, resp, body, 400, "MalformedXML")
		// Multipart debris does not keep a bucket from being deleted.
		c.do(t, "POST", "/tmpbucket/k", url.Values{"uploads": {""}}, nil, nil)
		resp, body = c.do(t, "DELETE", "/tmpbucket", nil, nil, nil)
		mustStatus(t, resp, body, 204)
		resp, body = c.do(t, "GET", "/", nil, nil, nil)
		mustStatus(t, resp, body, 200)
		if !strings.Contains(string(body), "<Name>api</Name>") || strings.Contains(string(body), "tmpbucket") {
			t.Errorf("ListBuckets: %s", body)
		}
	})
	g.alive()
}
