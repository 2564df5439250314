package s3

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AWS Signature Version 4, as S3 uses it:
// https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-authenticating-requests.html
//
// The gateway verifies the signature in the Authorization header and in
// presigned query strings, the payload hash (x-amz-content-sha256) as the
// body streams in, and for aws-chunked bodies each chunk's signature and the
// trailer's (chunked.go).

const (
	sigAlgorithm  = "AWS4-HMAC-SHA256"
	timeFormat    = "20060102T150405Z"
	dateFormat    = "20060102"
	scopeTerminal = "aws4_request"

	payloadUnsigned               = "UNSIGNED-PAYLOAD"
	payloadStreaming              = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	payloadStreamingTrailer       = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	payloadStreamingUnsignedTrail = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

	// maxPresignExpiry is the longest X-Amz-Expires S3 accepts: 7 days.
	maxPresignExpiry = 7 * 24 * time.Hour
)

// credential is the Credential= part of a signature:
// AKID/20130524/us-east-1/s3/aws4_request.
type credential struct {
	AccessKey string
	Date      string // yyyymmdd
	Region    string
	Service   string
}

func (c credential) scope() string {
	return c.Date + "/" + c.Region + "/" + c.Service + "/" + scopeTerminal
}

var errBadCredential = errors.New("s3: malformed credential")

// parseCredential parses AKID/date/region/service/aws4_request.
func parseCredential(s string) (credential, error) {
	// The access key may itself not contain '/', so split from the right.
	parts := strings.Split(s, "/")
	if len(parts) != 5 || parts[4] != scopeTerminal {
		return credential{}, errBadCredential
	}
	c := credential{AccessKey: parts[0], Date: parts[1], Region: parts[2], Service: parts[3]}
	if c.AccessKey == "" || c.Region == "" || c.Service == "" {
		return credential{}, errBadCredential
	}
	if _, err := time.Parse(dateFormat, c.Date); err != nil || len(c.Date) != 8 {
		return credential{}, errBadCredential
	}
	return c, nil
}

// authHeader is a parsed "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
// Signature=..." Authorization header.
type authHeader struct {
	Cred          credential
	SignedHeaders []string // lowercase, sorted as sent
	Signature     string   // 64 lowercase hex digits
}

// parseAuthHeader parses a SigV4 Authorization header. It is strict about
// the three fields (each once, in any order) and lenient about spaces.
func parseAuthHeader(h string) (authHeader, error) {
	var a authHeader
	rest, ok := strings.CutPrefix(h, sigAlgorithm)
	if !ok || (rest != "" && rest[0] != ' ') {
		return a, apiErr(ErrAuthorizationHeaderMalf, "the authorization header must start with %s", sigAlgorithm)
	}
	var haveCred, haveSH, haveSig bool
	for field := range strings.SplitSeq(rest, ",") {
		field = strings.TrimSpace(field)
		name, val, ok := strings.Cut(field, "=")
		if !ok {
			return a, apiErr(ErrAuthorizationHeaderMalf, "the authorization header has a malformed field %q", field)
		}
		switch name {
		case "Credential":
			if haveCred {
				return a, apiErr(ErrAuthorizationHeaderMalf, "the authorization header has Credential twice")
			}
			c, err := parseCredential(val)
			if err != nil {
				return a, apiErr(ErrAuthorizationHeaderMalf, "the authorization header has a malformed Credential %q", val)
			}
			a.Cred, haveCred = c, true
		case "SignedHeaders":
			if haveSH {
				return a, apiErr(ErrAuthorizationHeaderMalf, "the authorization header has SignedHeaders twice")
			}
			sh, err := parseSignedHeaders(val)
			if err != nil {
				return a, err
			}
			a.SignedHeaders, haveSH = sh, true
		case "Signature":
			if haveSig {
				return a, apiErr(ErrAuthorizationHeaderMalf, "the authorization header has Signature twice")
			}
			if !isHexSignature(val) {
				return a, apiErr(ErrAuthorizationHeaderMalf, "the authorization header has a malformed Signature")
			}
			a.Signature, haveSig = val, true
		default:
			return a, apiErr(ErrAuthorizationHeaderMalf, "the authorization header has an unknown field %q", name)
		}
	}
	if !haveCred || !haveSH || !haveSig {
		return a, apiErr(ErrAuthorizationHeaderMalf, "the authorization header needs Credential, SignedHeaders and Signature")
	}
	return a, nil
}

func parseSignedHeaders(v string) ([]string, error) {
	if v == "" {
		return nil, apiErr(ErrAuthorizationHeaderMalf, "SignedHeaders is empty")
	}
	sh := strings.Split(v, ";")
	for _, h := range sh {
		if h == "" || h != strings.ToLower(h) || strings.ContainsAny(h, " \t\r\n:") {
			return nil, apiErr(ErrAuthorizationHeaderMalf, "SignedHeaders has a malformed header name %q", h)
		}
	}
	return sh, nil
}

func isHexSignature(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func sha256Hex(data string) string {
	s := sha256.Sum256([]byte(data))
	return hex.EncodeToString(s[:])
}

// signingKey derives the key for one day, region and service.
func signingKey(secret string, c credential) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), c.Date)
	k = hmacSHA256(k, c.Region)
	k = hmacSHA256(k, c.Service)
	return hmacSHA256(k, scopeTerminal)
}

// signingKeys caches derived signing keys: deriving one takes four HMACs,
// and a client signs all its requests of a day with the same key. Safe for
// concurrent use; the keys it returns are shared and must not be changed.
type signingKeys struct {
	mu sync.Mutex
	m  map[signingKeyID][]byte // guarded by mu
}

type signingKeyID struct{ secret, date, region, service string }

// maxSigningKeys bounds the cache (requests choose the region and date);
// past it, the cache starts over.
const maxSigningKeys = 1024

// get returns signingKey(secret, c).
func (k *signingKeys) get(secret string, c credential) []byte {
	id := signingKeyID{secret: secret, date: c.Date, region: c.Region, service: c.Service}
	k.mu.Lock()
	key, ok := k.m[id]
	k.mu.Unlock()
	if ok {
		return key
	}
	key = signingKey(secret, c)
	k.mu.Lock()
	if k.m == nil || len(k.m) >= maxSigningKeys {
		k.m = make(map[signingKeyID][]byte)
	}
	k.m[id] = key
	k.mu.Unlock()
	return key
}

// stringToSign is the string a request's signature covers.
func stringToSign(amzDate string, c credential, canonicalRequest string) string {
	return sigAlgorithm + "\n" + amzDate + "\n" + c.scope() + "\n" + sha256Hex(canonicalRequest)
}

// awsURIEncode encodes s as SigV4 requires: every byte except the unreserved
// characters A-Z a-z 0-9 - . _ ~ as %XY (upper-case hex), and '/' too
// unless keepSlash.
func awsURIEncode(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '/' && keepSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

// canonicalURI is the request path, decoded and re-encoded with the SigV4
// rules (S3 neither normalizes the path nor encodes it twice).
func canonicalURI(r *http.Request) string {
	p := r.URL.Path
	if p == "" {
		p = "/"
	}
	return awsURIEncode(p, true)
}

// queryPair is one query parameter, decoded.
type queryPair struct{ k, v string }

// parseRawQuery decodes a raw query string keeping every parameter (also
// valueless ones like ?uploads) in order. '+' means a space, as S3 reads it.
func parseRawQuery(raw string) ([]queryPair, error) {
	var out []queryPair
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		dk, err := url.QueryUnescape(k)
		if err != nil {
			return nil, err
		}
		dv, err := url.QueryUnescape(v)
		if err != nil {
			return nil, err
		}
		out = append(out, queryPair{dk, dv})
	}
	return out, nil
}

// canonicalQuery encodes and sorts the query parameters, leaving out skip
// (X-Amz-Signature in a presigned URL).
func canonicalQuery(pairs []queryPair, skip string) string {
	enc := make([]queryPair, 0, len(pairs))
	for _, p := range pairs {
		if skip != "" && p.k == skip {
			continue
		}
		enc = append(enc, queryPair{awsURIEncode(p.k, false), awsURIEncode(p.v, false)})
	}
	sort.Slice(enc, func(i, j int) bool {
		if enc[i].k != enc[j].k {
			return enc[i].k < enc[j].k
		}
		return enc[i].v < enc[j].v
	})
	var b strings.Builder
	for i, p := range enc {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// headerValue returns the canonical value of a signed header: the values
// joined with ',', each trimmed and with runs of spaces folded.
func headerValue(r *http.Request, name string) (string, bool) {
	switch name {
	case "host":
		return r.Host, r.Host != ""
	case "content-length":
		if _, ok := r.Header["Content-Length"]; !ok && r.ContentLength >= 0 {
			return strconv.FormatInt(r.ContentLength, 10), true
		}
	case "transfer-encoding":
		if len(r.TransferEncoding) > 0 {
			return strings.Join(r.TransferEncoding, ","), true
		}
	}
	vals, ok := r.Header[http.CanonicalHeaderKey(name)]
	if !ok {
		return "", false
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(out, ","), true
}

// canonicalRequest builds the SigV4 canonical request.
func canonicalRequest(r *http.Request, query []queryPair, skipQuery string, signed []string, payloadHash string) (string, error) {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(canonicalURI(r))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(query, skipQuery))
	b.WriteByte('\n')
	for _, h := range signed {
		v, ok := headerValue(r, h)
		if !ok {
			return "", apiErr(ErrSignatureDoesNotMatch, "the signed header %q is missing from the request", h)
		}
		b.WriteString(h)
		b.WriteByte(':')
		b.WriteString(v)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(signed, ";"))
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String(), nil
}

// authInfo is what authentication learned about a request.
type authInfo struct {
	AccessKey   string // "" for an anonymous request
	Presigned   bool
	PayloadHash string // x-amz-content-sha256 (UNSIGNED-PAYLOAD for presigned)

	// For aws-chunked bodies: the seed signature and what chunk
	// signatures are derived from.
	cred      credential
	amzDate   string
	key       []byte
	signature string
}

func (a *authInfo) anonymous() bool { return a.AccessKey == "" }

// authenticate verifies a request's SigV4 signature (header or query). An
// unsigned request is anonymous; whether it may proceed is the caller's
// decision.
func (g *Gateway) authenticate(r *http.Request, query []queryPair) (*authInfo, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		if strings.HasPrefix(h, "AWS ") {
			return nil, ErrUnsupportedSignatureV2
		}
		return g.authHeaderRequest(r, query, h)
	}
	q := r.URL.Query()
	if q.Has("X-Amz-Algorithm") || q.Has("X-Amz-Signature") || q.Has("X-Amz-Credential") {
		return g.authPresigned(r, query, q)
	}
	if q.Has("AWSAccessKeyId") && q.Has("Signature") {
		return nil, ErrUnsupportedSignatureV2
	}
	return &authInfo{PayloadHash: payloadUnsigned}, nil
}

// secretFor returns the secret of an access key.
func (g *Gateway) secretFor(ak string) (string, error) {
	secret, ok := g.opts.Credentials[ak]
	if !ok {
		return "", apiErr(ErrInvalidAccessKeyID, "The AWS Access Key Id you provided does not exist in our records.")
	}
	return secret, nil
}

func (g *Gateway) authHeaderRequest(r *http.Request, query []queryPair, h string) (*authInfo, error) {
	a, err := parseAuthHeader(h)
	if err != nil {
		return nil, err
	}
	secret, err := g.secretFor(a.Cred.AccessKey)
	if err != nil {
		return nil, err
	}
	if a.Cred.Service != "s3" {
		return nil, apiErr(ErrAuthorizationHeaderMalf, "the credential names service %q, expected s3", a.Cred.Service)
	}
	if !contains(a.SignedHeaders, "host") {
		return nil, apiErr(ErrAuthorizationHeaderMalf, "the Host header must be signed")
	}
	amzDate := r.Header.Get("X-Amz-Date")
	var t time.Time
	if amzDate != "" {
		t, err = time.Parse(timeFormat, amzDate)
		if err != nil {
			return nil, apiErr(ErrAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
		}
	} else if d := r.Header.Get("Date"); d != "" {
		t, err = parseDateHeader(d)
		if err != nil {
			return nil, apiErr(ErrAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
		}
		amzDate = t.UTC().Format(timeFormat)
	} else {
		return nil, apiErr(ErrAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
	}
	if skew := g.now().Sub(t); skew > g.opts.MaxClockSkew || -skew > g.opts.MaxClockSkew {
		return nil, apiErr(ErrRequestTimeTooSkewed, "The difference between the request time (%s) and the server's time (%s) is too large.", t.UTC().Format(time.RFC3339), g.now().UTC().Format(time.RFC3339))
	}
	if a.Cred.Date != amzDate[:8] {
		return nil, apiErr(ErrAuthorizationHeaderMalf, "Invalid credential date %q: it is not the date of x-amz-date %q", a.Cred.Date, amzDate)
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return nil, apiErr(ErrInvalidRequest, "Missing required header for this request: x-amz-content-sha256")
	}
	switch payload {
	case payloadUnsigned, payloadStreaming, payloadStreamingTrailer, payloadStreamingUnsignedTrail:
	default:
		if len(payload) != 64 || !isHexSignature(strings.ToLower(payload)) {
			return nil, apiErr(ErrContentSHA256Mismatch, "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, a STREAMING- value or the SHA-256 of the body in hex")
		}
	}
	cr, err := canonicalRequest(r, query, "", a.SignedHeaders, payload)
	if err != nil {
		return nil, err
	}
	key := g.sigKeys.get(secret, a.Cred)
	want := hex.EncodeToString(hmacSHA256(key, stringToSign(amzDate, a.Cred, cr)))
	if subtle.ConstantTimeCompare([]byte(want), []byte(a.Signature)) != 1 {
		g.log.Debug("s3: signature mismatch", "access_key", a.Cred.AccessKey, "canonical_request", cr)
		return nil, ErrSignatureDoesNotMatch
	}
	return &authInfo{AccessKey: a.Cred.AccessKey, PayloadHash: payload, cred: a.Cred, amzDate: amzDate, key: key, signature: a.Signature}, nil
}

// dateFormats are the forms of a Date header that sign a request: HTTP's
// (RFC 1123 with GMT, RFC 850, asctime), RFC 1123 with a numeric zone
// (Python's email.utils.formatdate, which botocore uses when it signs with
// Date, writes "-0000") and ISO 8601 basic.
var dateFormats = []string{http.TimeFormat, time.RFC1123Z, time.RFC1123, time.RFC850, time.ANSIC, timeFormat}

// parseDateHeader parses a Date header in any of dateFormats.
func parseDateHeader(d string) (time.Time, error) {
	d = strings.TrimSpace(d)
	var err error
	for _, f := range dateFormats {
		var t time.Time
		if t, err = time.Parse(f, d); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, err
}

// presignParams are the X-Amz-* query parameters of a presigned URL.
type presignParams struct {
	Cred          credential
	Date          time.Time
	AmzDate       string
	Expires       time.Duration
	SignedHeaders []string
	Signature     string
}

// parsePresign parses and checks the presigned-URL query parameters.
func parsePresign(q url.Values) (presignParams, error) {
	var p presignParams
	for _, name := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"} {
		if len(q[name]) != 1 {
			return p, apiErr(ErrAuthQueryMalformed, "Query-string authentication requires exactly one %s parameter", name)
		}
	}
	if q.Get("X-Amz-Algorithm") != sigAlgorithm {
		return p, apiErr(ErrAuthQueryMalformed, "X-Amz-Algorithm only supports %q", sigAlgorithm)
	}
	c, err := parseCredential(q.Get("X-Amz-Credential"))
	if err != nil {
		return p, apiErr(ErrAuthQueryMalformed, "Error parsing the X-Amz-Credential parameter")
	}
	p.Cred = c
	p.AmzDate = q.Get("X-Amz-Date")
	p.Date, err = time.Parse(timeFormat, p.AmzDate)
	if err != nil {
		return p, apiErr(ErrAuthQueryMalformed, "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	// A lifetime out of range denies the request (403), as an expired
	// one does; only one that is not a number is malformed (400).
	secs, err := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64)
	if err != nil {
		return p, apiErr(ErrAuthQueryMalformed, "X-Amz-Expires should be a number of seconds")
	}
	if secs < 0 {
		return p, apiErr(ErrAccessDenied, "X-Amz-Expires must be non-negative")
	}
	if secs > int64(maxPresignExpiry/time.Second) {
		return p, apiErr(ErrAccessDenied, "X-Amz-Expires must be less than a week (in seconds) that is 604800")
	}
	p.Expires = time.Duration(secs) * time.Second
	p.SignedHeaders, err = parseSignedHeaders(q.Get("X-Amz-SignedHeaders"))
	if err != nil {
		return p, apiErr(ErrAuthQueryMalformed, "X-Amz-SignedHeaders is malformed")
	}
	p.Signature = q.Get("X-Amz-Signature")
	if !isHexSignature(p.Signature) {
		return p, apiErr(ErrAuthQueryMalformed, "X-Amz-Signature is malformed")
	}
	if c.Date != p.AmzDate[:8] {
		return p, apiErr(ErrAuthQueryMalformed, "Invalid credential date %q: it is not the date of X-Amz-Date %q", c.Date, p.AmzDate)
	}
	return p, nil
}

func (g *Gateway) authPresigned(r *http.Request, query []queryPair, q url.Values) (*authInfo, error) {
	p, err := parsePresign(q)
	if err != nil {
		return nil, err
	}
	secret, err := g.secretFor(p.Cred.AccessKey)
	if err != nil {
		return nil, err
	}
	if p.Cred.Service != "s3" {
		return nil, apiErr(ErrAuthQueryMalformed, "the credential names service %q, expected s3", p.Cred.Service)
	}
	if !contains(p.SignedHeaders, "host") {
		return nil, apiErr(ErrAuthQueryMalformed, "the Host header must be signed")
	}
	now := g.now()
	if p.Date.Sub(now) > g.opts.MaxClockSkew {
		return nil, apiErr(ErrAccessDenied, "Request is not valid yet")
	}
	if !now.Before(p.Date.Add(p.Expires)) {
		return nil, apiErr(ErrExpiredPresignRequest, "Request has expired")
	}
	payload := payloadUnsigned
	if v := q.Get("X-Amz-Content-Sha256"); v != "" {
		payload = v
	}
	cr, err := canonicalRequest(r, query, "X-Amz-Signature", p.SignedHeaders, payload)
	if err != nil {
		return nil, err
	}
	key := g.sigKeys.get(secret, p.Cred)
	want := hex.EncodeToString(hmacSHA256(key, stringToSign(p.AmzDate, p.Cred, cr)))
	if subtle.ConstantTimeCompare([]byte(want), []byte(p.Signature)) != 1 {
		g.log.Debug("s3: presigned signature mismatch", "access_key", p.Cred.AccessKey, "canonical_request", cr)
		return nil, ErrSignatureDoesNotMatch
	}
	if payload != payloadUnsigned && (len(payload) != 64 || !isHexSignature(strings.ToLower(payload))) {
		return nil, apiErr(ErrContentSHA256Mismatch, "X-Amz-Content-Sha256 must be UNSIGNED-PAYLOAD or a SHA-256 in hex")
	}
	return &authInfo{AccessKey: p.Cred.AccessKey, Presigned: true, PayloadHash: payload, cred: p.Cred, amzDate: p.AmzDate, key: key, signature: p.Signature}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
