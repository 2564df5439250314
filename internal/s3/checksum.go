package s3

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"strconv"
	"strings"
)

// Checksums S3 clients send with a body (x-amz-checksum-<algorithm>, in a
// header or an aws-chunked trailer): base64 of the big-endian digest.
var checksumAlgorithms = map[string]func() hash.Hash{
	"crc32":     func() hash.Hash { return crc32.NewIEEE() },
	"crc32c":    func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
	"crc64nvme": func() hash.Hash { return crc64.New(crc64NVMETable) },
	"sha1":      sha1.New,
	"sha256":    sha256.New,
}

// crc64NVMETable is CRC-64/NVME (the reflected polynomial of
// 0xAD93D23594C93659), which Go's crc64 computes with the usual ^0 input
// and output.
var crc64NVMETable = crc64.MakeTable(0x9a6c9329ac4bc9b5)

const checksumHeaderPrefix = "x-amz-checksum-"

// checksumFromHeader returns the algorithm named by an x-amz-checksum-*
// header name ("" if it is not one we know).
func checksumFromHeader(name string) string {
	alg, ok := strings.CutPrefix(strings.ToLower(name), checksumHeaderPrefix)
	if !ok {
		return ""
	}
	if _, ok := checksumAlgorithms[alg]; !ok {
		return ""
	}
	return alg
}

// verifier tees a body through the digests an upload needs and checks them
// when the body ends: the byte count, Content-MD5, x-amz-content-sha256,
// and one x-amz-checksum-* value (from a header, or from the aws-chunked
// trailer once the body is read). At the end it returns an *APIError instead
// of io.EOF if anything does not match, so that a copy loop reading it fails
// and the upload is discarded.
type verifier struct {
	r    io.Reader
	n    int64
	want int64 // -1: unknown
	max  int64

	md5      hash.Hash
	wantMD5  []byte
	sha      hash.Hash
	wantSHA  string
	ck       hash.Hash
	ckAlg    string
	wantCK   func() (string, bool) // the expected checksum once the body is read
	ckValue  string                // the verified checksum (base64)
	done     bool
	finalErr error
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.done {
		if v.finalErr != nil {
			return 0, v.finalErr
		}
		return 0, io.EOF
	}
	n, err := v.r.Read(p)
	if n > 0 {
		v.n += int64(n)
		if v.n > v.max {
			v.done, v.finalErr = true, apiErr(ErrEntityTooLarge, "Your proposed upload exceeds the maximum allowed size of %d bytes", v.max)
			return 0, v.finalErr
		}
		if v.want >= 0 && v.n > v.want {
			v.done, v.finalErr = true, apiErr(ErrIncompleteBody, "The body is longer than the %d bytes announced", v.want)
			return 0, v.finalErr
		}
		v.md5.Write(p[:n])
		if v.sha != nil {
			v.sha.Write(p[:n])
		}
		if v.ck != nil {
			v.ck.Write(p[:n])
		}
	}
	if err == io.EOF {
		v.done = true
		v.finalErr = v.check()
		if v.finalErr != nil {
			return n, v.finalErr
		}
		return n, io.EOF
	}
	if err == io.ErrUnexpectedEOF {
		v.done = true
		v.finalErr = apiErr(ErrIncompleteBody, "You did not provide the number of bytes specified by the Content-Length HTTP header: got %d", v.n)
		return n, v.finalErr
	}
	return n, err
}

func (v *verifier) check() error {
	if v.want >= 0 && v.n != v.want {
		return apiErr(ErrIncompleteBody, "You did not provide the number of bytes specified by the Content-Length HTTP header: want %d, got %d", v.want, v.n)
	}
	sum := v.md5.Sum(nil)
	if v.wantMD5 != nil && string(sum) != string(v.wantMD5) {
		return apiErr(ErrBadDigest, "The Content-MD5 you specified did not match what we received.")
	}
	if v.sha != nil && hex.EncodeToString(v.sha.Sum(nil)) != v.wantSHA {
		return apiErr(ErrContentSHA256Mismatch, "The provided 'x-amz-content-sha256' header does not match what was computed.")
	}
	if v.ck != nil && v.wantCK == nil {
		v.ckValue = base64.StdEncoding.EncodeToString(v.ck.Sum(nil)) // computed, not checked
	} else if v.ck != nil {
		got := base64.StdEncoding.EncodeToString(v.ck.Sum(nil))
		want, ok := v.wantCK()
		if !ok {
			return apiErr(ErrInvalidRequest, "The x-amz-checksum-%s trailer announced in x-amz-trailer is missing", v.ckAlg)
		}
		if got != want {
			return apiErr(ErrBadDigest, "The %s you specified did not match the calculated checksum.", strings.ToUpper(v.ckAlg))
		}
		v.ckValue = got
	}
	return nil
}

// computeChecksum makes the verifier compute the alg checksum of the body
// if the request gave none (UploadPart of an upload created with
// x-amz-checksum-algorithm). Call it before reading.
func (v *verifier) computeChecksum(alg string) {
	if v.ck == nil && checksumAlgorithms[alg] != nil {
		v.ck, v.ckAlg, v.wantCK = checksumAlgorithms[alg](), alg, nil
	}
}

// etag returns the hex MD5 of the body; valid once the body is read.
func (v *verifier) etag() string { return hex.EncodeToString(v.md5.Sum(nil)) }

// Checksum types of a multipart object (x-amz-checksum-type).
const (
	checksumComposite  = "COMPOSITE"
	checksumFullObject = "FULL_OBJECT"
)

// multipartChecksum computes one algorithm's checksums of a multipart
// object while CompleteMultipartUpload streams its parts: each part's, the
// composite (the checksum of the parts' digests, "-N" appended) and the
// full object's.
type multipartChecksum struct {
	alg   string
	whole hash.Hash
	part  hash.Hash
	parts []string // base64 of each part's digest
	raw   []byte   // the parts' digests, concatenated
}

func newMultipartChecksum(alg string) *multipartChecksum {
	mk := checksumAlgorithms[alg]
	return &multipartChecksum{alg: alg, whole: mk(), part: mk()}
}

func (m *multipartChecksum) Write(p []byte) (int, error) {
	m.whole.Write(p)
	m.part.Write(p)
	return len(p), nil
}

// endPart closes the current part.
func (m *multipartChecksum) endPart() {
	d := m.part.Sum(nil)
	m.raw = append(m.raw, d...)
	m.parts = append(m.parts, base64.StdEncoding.EncodeToString(d))
	m.part.Reset()
}

func (m *multipartChecksum) composite() string {
	h := checksumAlgorithms[m.alg]()
	h.Write(m.raw)
	return base64.StdEncoding.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(len(m.parts))
}

func (m *multipartChecksum) full() string {
	return base64.StdEncoding.EncodeToString(m.whole.Sum(nil))
}

// checksumType returns the type of a recorded checksum value: composite
// values end in "-N".
func checksumType(v string) string {
	if i := strings.LastIndexByte(v, '-'); i > 0 {
		if _, err := strconv.Atoi(v[i+1:]); err == nil {
			return checksumComposite
		}
	}
	return checksumFullObject
}

// matchObjectChecksum checks the checksum a client gave for a whole
// multipart object (x-amz-checksum-ALG on Complete, with or without the
// "-N" suffix) against the computed composite and full-object values. typ
// is x-amz-checksum-type (or the upload's); empty accepts either. It
// returns the value to record.
func matchObjectChecksum(sent, typ, composite, full string) (string, error) {
	base, n, hasN := strings.Cut(sent, "-")
	compBase, compN, _ := strings.Cut(composite, "-")
	mismatch := apiErr(ErrBadDigest, "The checksum you specified for the object did not match the calculated checksum (composite %s, full object %s).", composite, full)
	switch typ {
	case "", checksumComposite, checksumFullObject:
	default:
		return "", apiErr(ErrInvalidRequest, "Value for x-amz-checksum-type header is invalid: %q", typ)
	}
	if typ != checksumFullObject && base == compBase && (!hasN || n == compN) {
		return composite, nil
	}
	if typ != checksumComposite && !hasN && sent == full {
		return full, nil
	}
	return "", mismatch
}
