package s3

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"testing"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestChecksums(t *testing.T) {
	t.Parallel()
	// The check values of the CRC catalogue for "123456789".
	tests := map[string]string{
		"crc32":     "cbf43926",
		"crc32c":    "e3069283",
		"crc64nvme": "ae8b14860a799888",
		"sha1":      "f7c3bc1d808e04732adf679965ccc34ca7ae3441",
		"sha256":    "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225",
	}
	for alg, want := range tests {
		h := checksumAlgorithms[alg]()
		h.Write([]byte("123456789"))
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			t.Errorf("%s = %s, want %s", alg, got, want)
		}
	}
}

// unsignedChunked encodes data as an unsigned aws-chunked body with a
// trailer, as the AWS SDKs do.
func unsignedChunked(data []byte, chunk int, trailer string) []byte {
	var b bytes.Buffer
	for len(data) > 0 {
		n := min(chunk, len(data))
		fmt.Fprintf(&b, "%x\r\n", n)
		b.Write(data[:n])
		b.WriteString("\r\n")
		data = data[n:]
	}
	b.WriteString("0\r\n" + trailer + "\r\n")
	return b.Bytes()
}

func TestVerifier(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("0123456789abcdef"), 10000)
	md := md5.Sum(data)
	sha := sha256.Sum256(data)
	crc := checksumAlgorithms["crc32"]()
	crc.Write(data)
	crcVal := b64(crc.Sum(nil))
	tests := []struct {
		name string
		v    func() *verifier
		code string // "" for success
	}{
		{"plain", func() *verifier { return &verifier{r: bytes.NewReader(data), want: int64(len(data)), max: 1 << 30} }, ""},
		{"md5 ok", func() *verifier {
			return &verifier{r: bytes.NewReader(data), want: int64(len(data)), max: 1 << 30, wantMD5: md[:]}
		}, ""},
		{"md5 bad", func() *verifier {
			return &verifier{r: bytes.NewReader(data), want: int64(len(data)), max: 1 << 30, wantMD5: make([]byte, 16)}
		}, "BadDigest"},
		{"sha ok", func() *verifier {
			return &verifier{r: bytes.NewReader(data), want: -1, max: 1 << 30, sha: sha256.New(), wantSHA: hex.EncodeToString(sha[:])}
		}, ""},
		{"sha bad", func() *verifier {
			return &verifier{r: bytes.NewReader(data), want: -1, max: 1 << 30, sha: sha256.New(), wantSHA: emptySHA256}
		}, "XAmzContentSHA256Mismatch"},
		{"short", func() *verifier { return &verifier{r: bytes.NewReader(data), want: int64(len(data)) + 1, max: 1 << 30} }, "IncompleteBody"},
		{"long", func() *verifier { return &verifier{r: bytes.NewReader(data), want: int64(len(data)) - 1, max: 1 << 30} }, "IncompleteBody"},
		{"too big", func() *verifier { return &verifier{r: bytes.NewReader(data), want: -1, max: 1000} }, "EntityTooLarge"},
		{"header checksum", func() *verifier {
			return &verifier{r: bytes.NewReader(data), want: -1, max: 1 << 30, ck: checksumAlgorithms["crc32"](), ckAlg: "crc32", wantCK: func() (string, bool) { return crcVal, true }}
		}, ""},
		{"header checksum bad", func() *verifier {
			return &verifier{r: bytes.NewReader(data), want: -1, max: 1 << 30, ck: checksumAlgorithms["crc32"](), ckAlg: "crc32", wantCK: func() (string, bool) { return "AAAAAA==", true }}
		}, "BadDigest"},
		{"trailer checksum", func() *verifier {
			cr := newChunkedReader(bytes.NewReader(unsignedChunked(data, 8192, "x-amz-checksum-crc32:"+crcVal+"\r\n")), nil, false)
			return &verifier{r: cr, want: int64(len(data)), max: 1 << 30, ck: checksumAlgorithms["crc32"](), ckAlg: "crc32", wantCK: func() (string, bool) { return cr.Trailer("x-amz-checksum-crc32") }}
		}, ""},
		{"trailer checksum bad", func() *verifier {
			cr := newChunkedReader(bytes.NewReader(unsignedChunked(data, 8192, "x-amz-checksum-crc32:AAAAAA==\r\n")), nil, false)
			return &verifier{r: cr, want: int64(len(data)), max: 1 << 30, ck: checksumAlgorithms["crc32"](), ckAlg: "crc32", wantCK: func() (string, bool) { return cr.Trailer("x-amz-checksum-crc32") }}
		}, "BadDigest"},
		{"trailer missing", func() *verifier {
			cr := newChunkedReader(bytes.NewReader(unsignedChunked(data, 8192, "")), nil, false)
			return &verifier{r: cr, want: int64(len(data)), max: 1 << 30, ck: checksumAlgorithms["crc32"](), ckAlg: "crc32", wantCK: func() (string, bool) { return cr.Trailer("x-amz-checksum-crc32") }}
		}, "InvalidRequest"},
		{"decoded length mismatch", func() *verifier {
			cr := newChunkedReader(bytes.NewReader(unsignedChunked(data, 8192, "")), nil, false)
			return &verifier{r: cr, want: int64(len(data)) + 5, max: 1 << 30}
		}, "IncompleteBody"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := tc.v()
			v.md5 = md5.New()
			got, err := io.ReadAll(v)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("data differs")
				}
				if v.etag() != hex.EncodeToString(md[:]) {
					t.Fatalf("etag = %s", v.etag())
				}
				return
			}
			if !isCode(err, tc.code) {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
		})
	}
}

func TestChunkedUnsigned(t *testing.T) {
	t.Parallel()
	data := []byte(strings.Repeat("x", 100000))
	for _, chunk := range []int{1, 7, 8192, 65536, 200000} {
		body := unsignedChunked(data, chunk, "x-amz-checksum-sha256:abc\r\n")
		cr := newChunkedReader(bytes.NewReader(body), nil, false)
		got, err := io.ReadAll(cr)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("chunk %d: %d bytes, %v", chunk, len(got), err)
		}
		if v, ok := cr.Trailer("X-Amz-Checksum-Sha256"); !ok || v != "abc" {
			t.Fatalf("trailer %q %v", v, ok)
		}
	}
	bad := []string{
		"zz\r\nab\r\n0\r\n\r\n",              // bad size
		"2\r\nabc\r\n0\r\n\r\n",              // chunk longer than declared
		"2\r\na",                             // truncated data
		"2\nab\r\n0\r\n\r\n",                 // LF only
		"2\r\nab\r\n",                        // no final chunk
		"2\r\nab\r\n0\r\nbadtrailer\r\n\r\n", // trailer without ':'
		"ffffffffffffffffff\r\n",             // size overflow
		"1" + strings.Repeat("0", 4100) + "\r\n",
	}
	for _, b := range bad {
		cr := newChunkedReader(strings.NewReader(b), nil, false)
		if _, err := io.ReadAll(cr); err == nil {
			t.Errorf("body %q: no error", truncate(b, 40))
		}
	}
}
