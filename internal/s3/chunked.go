package s3

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"hash"
	"io"
	"strconv"
	"strings"
)

// The aws-chunked content encoding (Content-Encoding: aws-chunked), which
// SDKs use to stream a body of known length with per-chunk signatures
// and/or a trailing checksum:
//
//	hex-size[;chunk-signature=SIG]\r\n DATA \r\n ... 0[;chunk-signature=SIG]\r\n
//	[trailer-name:value\r\n ... [x-amz-trailer-signature:SIG\r\n]] \r\n
//
// https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-streaming.html and
// sigv4-streaming-trailers.html.

const (
	// maxChunkLine bounds a chunk header or trailer line.
	maxChunkLine = 4096
	// maxTrailers bounds the number of trailer lines.
	maxTrailers = 16
	// maxChunkSize bounds one chunk's declared size.
	maxChunkSize = 1 << 40
)

// chunkSigner verifies chunk and trailer signatures. A nil *chunkSigner
// means the chunks are not signed (STREAMING-UNSIGNED-PAYLOAD-TRAILER).
type chunkSigner struct {
	key     []byte
	amzDate string
	scope   string
	prevSig string // the seed signature, then each chunk's
}

func (s *chunkSigner) chunkSig(dataHash []byte) string {
	sts := "AWS4-HMAC-SHA256-PAYLOAD\n" + s.amzDate + "\n" + s.scope + "\n" + s.prevSig + "\n" + emptySHA256 + "\n" + hex.EncodeToString(dataHash)
	return hex.EncodeToString(hmacSHA256(s.key, sts))
}

func (s *chunkSigner) trailerSig(trailer []byte) string {
	h := sha256.Sum256(trailer)
	sts := "AWS4-HMAC-SHA256-TRAILER\n" + s.amzDate + "\n" + s.scope + "\n" + s.prevSig + "\n" + hex.EncodeToString(h[:])
	return hex.EncodeToString(hmacSHA256(s.key, sts))
}

// chunkedReader decodes an aws-chunked body. It returns the decoded data,
// verifying each chunk's signature when the chunk ends (before reading
// further) and the trailer's signature at the end; any violation is an
// *APIError that sticks. Data of a chunk is returned before its signature
// is checked: callers write uploads to a temporary file and discard it on
// error, so unverified bytes never become visible.
type chunkedReader struct {
	br          *bufio.Reader
	signer      *chunkSigner // nil: unsigned chunks
	signTrailer bool         // a trailer signature is required

	trailers   map[string]string
	left       int64 // data bytes left in the current chunk
	inChunk    bool
	pendingSig string // signature of the current chunk
	chunkHash  hash.Hash
	decoded    int64
	err        error // sticky; io.EOF at the end
}

func newChunkedReader(r io.Reader, signer *chunkSigner, signTrailer bool) *chunkedReader {
	return &chunkedReader{
		br: bufio.NewReaderSize(r, 64<<10), signer: signer, signTrailer: signTrailer,
		trailers: make(map[string]string), chunkHash: sha256.New(),
	}
}

func chunkErr(format string, args ...any) error {
	return apiErr(ErrInvalidChunk, "The aws-chunked body is malformed: "+format, args...)
}

// Trailer returns the value of a trailing header once the body is read.
func (c *chunkedReader) Trailer(name string) (string, bool) {
	v, ok := c.trailers[strings.ToLower(name)]
	return v, ok
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	for c.err == nil && c.left == 0 {
		c.err = c.next()
	}
	if c.err != nil {
		return 0, c.err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	c.decoded += int64(n)
	if c.signer != nil {
		c.chunkHash.Write(p[:n])
	}
	switch {
	case err == io.EOF:
		c.err = apiErr(ErrIncompleteBody, "The aws-chunked body ended inside a chunk")
	case err != nil:
		c.err = err
	}
	if n == 0 && c.err != nil {
		return 0, c.err
	}
	return n, nil
}

// line reads one \r\n-terminated line without the terminator; io.EOF if
// the body ends before the line starts.
func (c *chunkedReader) line() ([]byte, error) {
	l, err := c.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull || len(l) > maxChunkLine {
		return nil, chunkErr("a chunk header or trailer line is longer than %d bytes", maxChunkLine)
	}
	if err == io.EOF {
		if len(l) == 0 {
			return nil, io.EOF
		}
		return nil, apiErr(ErrIncompleteBody, "The aws-chunked body ended inside a line")
	}
	if err != nil {
		return nil, err
	}
	if len(l) < 2 || l[len(l)-2] != '\r' {
		return nil, chunkErr("a line does not end with CRLF")
	}
	return l[:len(l)-2], nil
}

// next finishes the current chunk (its CRLF and signature) and starts the
// next one; io.EOF after the final chunk and the trailers.
func (c *chunkedReader) next() error {
	if c.inChunk {
		l, err := c.line()
		if err == io.EOF {
			return apiErr(ErrIncompleteBody, "The aws-chunked body ended after a chunk")
		}
		if err != nil {
			return err
		}
		if len(l) != 0 {
			return chunkErr("a chunk is longer than its declared size")
		}
		c.inChunk = false
		if err := c.verifyChunk(c.pendingSig, c.chunkHash.Sum(nil)); err != nil {
			return err
		}
	}
	l, err := c.line()
	if err == io.EOF {
		return apiErr(ErrIncompleteBody, "The aws-chunked body ended without its final chunk")
	}
	if err != nil {
		return err
	}
	size, sig, err := parseChunkHeader(l, c.signer != nil)
	if err != nil {
		return err
	}
	if size == 0 {
		empty := sha256.Sum256(nil)
		if err := c.verifyChunk(sig, empty[:]); err != nil {
			return err
		}
		if err := c.readTrailers(); err != nil {
			return err
		}
		return io.EOF
	}
	c.chunkHash.Reset()
	c.left, c.inChunk, c.pendingSig = size, true, sig
	return nil
}

func (c *chunkedReader) verifyChunk(sig string, dataHash []byte) error {
	if c.signer == nil {
		return nil
	}
	want := c.signer.chunkSig(dataHash)
	if subtle.ConstantTimeCompare([]byte(want), []byte(sig)) != 1 {
		return apiErr(ErrSignatureDoesNotMatch, "The chunk signature at decoded offset %d does not match", c.decoded)
	}
	c.signer.prevSig = sig
	return nil
}

// readTrailers reads the trailing headers up to the empty line that ends
// the body, and checks the trailer signature if one is required.
func (c *chunkedReader) readTrailers() error {
	var signed bytes.Buffer
	var trailerSig string
	for i := 0; ; i++ {
		l, err := c.line()
		if err == io.EOF && i == 0 && !c.signTrailer {
			break // some clients end the body right after the last chunk
		}
		if err == io.EOF {
			return apiErr(ErrIncompleteBody, "The aws-chunked body ended inside its trailers")
		}
		if err != nil {
			return err
		}
		if len(l) == 0 {
			break
		}
		if i >= maxTrailers {
			return chunkErr("more than %d trailing headers", maxTrailers)
		}
		name, val, ok := bytes.Cut(l, []byte(":"))
		if !ok {
			return chunkErr("a trailing header has no ':'")
		}
		n := strings.ToLower(string(bytes.TrimSpace(name)))
		v := string(bytes.TrimSpace(val))
		if n == "x-amz-trailer-signature" {
			trailerSig = v
			continue
		}
		if n == "" {
			return chunkErr("a trailing header has an empty name")
		}
		c.trailers[n] = v
		signed.WriteString(n + ":" + v + "\n")
	}
	if c.signTrailer {
		if c.signer == nil {
			return chunkErr("a signed trailer needs signed chunks")
		}
		want := c.signer.trailerSig(signed.Bytes())
		if subtle.ConstantTimeCompare([]byte(want), []byte(trailerSig)) != 1 {
			return apiErr(ErrSignatureDoesNotMatch, "The trailer signature does not match")
		}
	}
	return nil
}

// parseChunkHeader parses "hex-size[;chunk-signature=SIG]". Signed chunks
// must carry a signature; unsigned ones may carry extensions, which are
// ignored.
func parseChunkHeader(l []byte, signed bool) (int64, string, error) {
	sizeHex, ext, hasExt := bytes.Cut(l, []byte(";"))
	sizeHex = bytes.TrimRight(sizeHex, " ")
	if len(sizeHex) == 0 || len(sizeHex) > 16 {
		return 0, "", chunkErr("bad chunk size %q", truncate(string(sizeHex), 32))
	}
	size, err := strconv.ParseInt(string(sizeHex), 16, 64)
	if err != nil || size < 0 || size > maxChunkSize {
		return 0, "", chunkErr("bad chunk size %q", truncate(string(sizeHex), 32))
	}
	if !signed {
		return size, "", nil
	}
	if !hasExt {
		return 0, "", chunkErr("a chunk has no chunk-signature")
	}
	sig, ok := bytes.CutPrefix(ext, []byte("chunk-signature="))
	if !ok || !isHexSignature(string(sig)) {
		return 0, "", chunkErr("a chunk has a malformed chunk-signature")
	}
	return size, string(sig), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
