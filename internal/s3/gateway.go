package s3

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// Options configure a Gateway. Zero values take the defaults.
type Options struct {
	// Client reaches the file system; required. The gateway does not
	// close it.
	Client *client.Client
	// Credentials maps access key IDs to secret keys; at least one is
	// required. All keys have full access to every bucket.
	Credentials map[string]string
	// Region is what GetBucketLocation reports (default us-east-1).
	// Requests signed for any region are accepted.
	Region string
	// Domains enable virtual-hosted-style addressing: a request for
	// host BUCKET.DOMAIN (for a DOMAIN listed here) addresses BUCKET.
	// Path-style addressing always works.
	Domains []string
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// MaxClockSkew bounds the difference between a signed request's time
	// and the gateway's clock (default 15 minutes, as S3).
	MaxClockSkew time.Duration
	// MaxPutSize bounds a single PUT and one multipart part (default
	// 5 GiB, as S3).
	MaxPutSize int64
	// MinPartSize is the smallest part but the last of a multipart
	// upload (default 5 MiB, as S3).
	MinPartSize int64
	// MaxHeaderBytes bounds the request header section; larger requests
	// get 400 RequestHeaderSectionTooLarge (default 64 KiB).
	MaxHeaderBytes int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// TempGrace is how long a temporary file of an upload must have gone
	// unwritten before the gateway removes it when it cannot tell
	// whether its maker still runs (default 24 hours; temps.go).
	TempGrace time.Duration
	// TempSweepEvery is how often Run collects abandoned temporary files
	// (default 10 minutes; also once when it starts).
	TempSweepEvery time.Duration
	// BucketConfigTTL is how long a gateway keeps a bucket configuration
	// (versioning, CORS, lifecycle) it read before reading it again
	// (default 5 seconds; bucketconfig.go). Its own changes apply at once.
	BucketConfigTTL time.Duration
	// LifecycleSweepEvery is how often Run applies the buckets' lifecycle
	// expiration rules (default 1 hour; lifecycle.go).
	LifecycleSweepEvery time.Duration
	// LifecycleDay is the length of a day in lifecycle rules (default 24
	// hours: Days count from midnight UTC to midnight UTC). Tests shorten
	// it.
	LifecycleDay time.Duration
	// TransitionTier is the tier backend lifecycle transitions move
	// objects to, whatever their storage class (default: the only
	// registered one; transition.go).
	TransitionTier string
}

// Validate checks the options and fills in defaults.
func (o *Options) Validate() error {
	if o.Client == nil {
		return errs.New(errs.Invalid, "s3: Options.Client is required")
	}
	if len(o.Credentials) == 0 {
		return errs.New(errs.Invalid, "s3: at least one access key is required")
	}
	for ak, sk := range o.Credentials {
		if err := validKeyPair(ak, sk); err != nil {
			return err
		}
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxClockSkew <= 0 {
		o.MaxClockSkew = 15 * time.Minute
	}
	if o.MaxPutSize <= 0 {
		o.MaxPutSize = 5 << 30
	}
	if o.MinPartSize <= 0 {
		o.MinPartSize = 5 << 20
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 64 << 10
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TempGrace <= 0 {
		o.TempGrace = 24 * time.Hour
	}
	if o.TempSweepEvery <= 0 {
		o.TempSweepEvery = 10 * time.Minute
	}
	if o.BucketConfigTTL <= 0 {
		o.BucketConfigTTL = 5 * time.Second
	}
	if o.LifecycleSweepEvery <= 0 {
		o.LifecycleSweepEvery = time.Hour
	}
	if o.LifecycleDay <= 0 {
		o.LifecycleDay = 24 * time.Hour
	}
	for i, d := range o.Domains {
		o.Domains[i] = strings.ToLower(strings.TrimPrefix(d, "."))
	}
	return nil
}

// Gateway is the S3 API over a Sluice file system, an http.Handler. It is
// safe for concurrent use.
type Gateway struct {
	opts    Options
	c       *client.Client
	log     *slog.Logger
	temps   *temps       // the temporary files in use
	configs *configCache // bucket configurations read recently
	keys    keyLocks     // serializes versioned writes of a key
	sigKeys signingKeys  // derived SigV4 keys

	mu  sync.Mutex
	srv *http.Server // set by Serve
}

// New returns a gateway.
func New(opts Options) (*Gateway, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Gateway{opts: opts, c: opts.Client, log: opts.Logger, temps: newTemps(), configs: newConfigCache(opts.BucketConfigTTL)}, nil
}

func (g *Gateway) now() time.Time { return g.opts.Now() }

// Serve accepts HTTP connections on ln until Shutdown. It returns
// http.ErrServerClosed after Shutdown, like http.Server.Serve.
func (g *Gateway) Serve(ln net.Listener) error {
	srv := g.server()
	return srv.Serve(g.expectListener(tailListener{ln}))
}

// ServeTLS is Serve with TLS, from a certificate and key in PEM files. The
// gateway makes the TLS connections itself, so that its expectConns read
// their plaintext (expect.go): net/http then sees no *tls.Conn and speaks
// HTTP/1.1 only, as the gateway did anyway.
func (g *Gateway) ServeTLS(ln net.Listener, certFile, keyFile string) error {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("s3: TLS certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	srv := g.server()
	return srv.Serve(g.expectListener(tls.NewListener(tailListener{ln}, cfg)))
}

// expectListener follows requests' header sections up to the size
// net/http reads before it answers 431.
func (g *Gateway) expectListener(ln net.Listener) net.Listener {
	return expectListener{Listener: ln, maxHead: g.server().MaxHeaderBytes + 8<<10}
}

func (g *Gateway) server() *http.Server {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.srv == nil {
		g.srv = &http.Server{
			Handler:           g,
			ReadHeaderTimeout: 30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			// Larger than MaxHeaderBytes so that the handler, not
			// net/http, rejects big headers, with an S3 error.
			MaxHeaderBytes: max(1<<20, 2*g.opts.MaxHeaderBytes),
			ErrorLog:       slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		}
	}
	return g.srv
}

// Shutdown stops accepting connections and waits for requests in flight to
// finish, or for ctx to end.
func (g *Gateway) Shutdown(ctx context.Context) error {
	return g.server().Shutdown(ctx)
}

// Run serves on ln until ctx is done, then shuts down, giving requests in
// flight up to 10 seconds. TLS is used if certFile is set. Meanwhile it
// collects the abandoned temporary files of interrupted uploads (temps.go),
// once at the start and every TempSweepEvery, and applies the buckets'
// lifecycle rules every LifecycleSweepEvery (lifecycle.go).
func (g *Gateway) Run(ctx context.Context, ln net.Listener, certFile, keyFile string) error {
	cctx, stopCollector := context.WithCancel(ctx)
	var collector sync.WaitGroup
	collector.Go(func() { g.collectTempsLoop(cctx) })
	collector.Go(func() { g.lifecycleLoop(cctx) })
	defer collector.Wait()
	defer stopCollector()
	errc := make(chan error, 1)
	go func() {
		if certFile != "" {
			errc <- g.ServeTLS(ln, certFile, keyFile)
		} else {
			errc <- g.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("s3: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := g.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// request is one S3 request in flight.
type request struct {
	w      *responseWriter
	r      *http.Request
	ctx    context.Context
	id     string
	bucket string
	key    string
	query  url.Values
	auth   *authInfo
}

// responseWriter remembers whether the response has started.
type responseWriter struct {
	http.ResponseWriter
	status int
}

func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *responseWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// randReader is the source of upload IDs and generated keys.
var randReader = rand.Reader

// requestIDs numbers requests: an ID is 16 upper-case hex digits, a
// random 32-bit prefix chosen at start (gateways of a cluster differ) and
// a count. Reading crypto/rand for every request cost 1% of a small GET.
var (
	requestIDPrefix = func() uint64 {
		var b [4]byte
		rand.Read(b[:])
		return uint64(binary.BigEndian.Uint32(b[:])) << 32
	}()
	requestCount atomic.Uint32
)

func newRequestID() string {
	const digits = "0123456789ABCDEF"
	v := requestIDPrefix | uint64(requestCount.Add(1))
	var b [16]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = digits[v&15]
		v >>= 4
	}
	return string(b[:])
}

// ServeHTTP serves one S3 request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	restoreExpect(r)
	rq := &request{w: &responseWriter{ResponseWriter: w}, r: r, ctx: r.Context(), id: newRequestID()}
	h := w.Header()
	h.Set("X-Amz-Request-Id", rq.id)
	h.Set("X-Amz-Id-2", rq.id)
	h.Set("Server", "Sluice")
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			g.log.Error("s3: panic serving request", "method", r.Method, "uri", r.RequestURI, "panic", p, "stack", string(debug.Stack()))
			g.writeError(rq, apiErr(ErrInternal, "%s", ErrInternal.Message))
		}
	}()
	err := g.serve(rq)
	if err != nil {
		g.writeError(rq, err)
	}
	if g.log.Enabled(rq.ctx, slog.LevelDebug) {
		g.log.Debug("s3 request", "id", rq.id, "method", r.Method, "uri", r.RequestURI, "status", rq.w.status, "took", time.Since(start), "err", err)
	}
}

func (g *Gateway) serve(rq *request) error {
	r := rq.r
	if n := headerSize(r); n > g.opts.MaxHeaderBytes {
		return apiErr(ErrRequestHeaderTooLarge, "Your request header section is %d bytes; the limit is %d", n, g.opts.MaxHeaderBytes)
	}
	pairs, err := parseRawQuery(strings.ReplaceAll(r.URL.RawQuery, "+", "%20"))
	if err != nil {
		return apiErr(ErrInvalidArgument, "The query string is not valid URL encoding")
	}
	rq.query = make(url.Values, len(pairs))
	for _, p := range pairs {
		rq.query[p.k] = append(rq.query[p.k], p.v)
	}
	rq.bucket, rq.key = g.address(r)
	if r.Method == http.MethodOptions {
		return g.preflight(rq)
	}
	g.addCORSHeaders(rq)
	if isPostForm(r, rq.key) && r.Header.Get("Authorization") == "" && validBucketName(rq.bucket) {
		// A browser form: signed by its policy (post.go).
		return g.postObject(rq)
	}
	if rq.auth, err = g.authenticate(r, pairs); err != nil {
		return err
	}
	if rq.auth.anonymous() {
		if err := g.allowAnonymous(rq); err != nil {
			return err
		}
	}
	return g.route(rq)
}

// headerSize approximates the size of the request's header section.
func headerSize(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Host) + 16
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// address splits a request into bucket and key, from the Host
// (virtual-hosted style, for a configured domain) or the path.
func (g *Gateway) address(r *http.Request) (bucket, key string) {
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	for _, d := range g.opts.Domains {
		if b, ok := strings.CutSuffix(host, "."+d); ok && b != "" {
			return b, strings.TrimPrefix(r.URL.Path, "/")
		}
	}
	p := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ = strings.Cut(p, "/")
	return bucket, key
}

// allowAnonymous lets an unsigned request through only as far as the
// bucket's ACL allows (object reads: the object's ACL, checked in
// getObject). acl.go has the decision.
func (g *Gateway) allowAnonymous(rq *request) error {
	for name := range rq.query {
		if strings.HasPrefix(name, "response-") {
			return apiErr(ErrInvalidRequest, "Request specific response headers cannot be used for anonymous GET requests.")
		}
	}
	if rq.bucket == "" || !validBucketName(rq.bucket) {
		return errAnonymousDenied()
	}
	return g.authorizeAnonymous(rq, requestOp(rq.r.Method, rq.bucket, rq.key, rq.query, rq.r.Header))
}

// route dispatches a request to its handler.
func (g *Gateway) route(rq *request) error {
	q, m := rq.query, rq.r.Method
	if err := refuseSSE(rq.r.Header); err != nil {
		return err
	}
	if rq.bucket == "" {
		if m == http.MethodGet {
			return g.listBuckets(rq)
		}
		return apiErr(ErrMethodNotAllowed, "The specified method is not allowed against the service")
	}
	if !validBucketName(rq.bucket) {
		if m == http.MethodPut && rq.key == "" {
			return apiErr(ErrInvalidBucketName, "The specified bucket %q is not valid: bucket names have 3-63 lowercase letters, digits, '.' and '-'", rq.bucket)
		}
		return apiErr(ErrNoSuchBucket, "The specified bucket does not exist")
	}
	if rq.key == "" {
		switch m {
		case http.MethodGet:
			switch {
			case q.Has("location"):
				return g.getBucketLocation(rq)
			case q.Has("uploads"):
				return g.listMultipartUploads(rq)
			case q.Has("versioning"):
				return g.getBucketVersioning(rq)
			case q.Has("acl"):
				return g.getBucketACL(rq)
			case q.Has("versions"):
				return g.listObjectVersions(rq)
			case q.Has("tagging"):
				return g.getBucketTagging(rq)
			case q.Has("cors"):
				return g.getBucketCORS(rq)
			case q.Has("lifecycle"):
				return g.getBucketLifecycle(rq)
			case q.Has("policy"), q.Has("encryption"),
				q.Has("website"), q.Has("replication"), q.Has("object-lock"), q.Has("notification"),
				q.Has("logging"), q.Has("accelerate"), q.Has("requestPayment"),
				q.Has("ownershipControls"), q.Has("publicAccessBlock"), q.Has("intelligent-tiering"),
				q.Has("inventory"), q.Has("metrics"), q.Has("analytics"):
				return g.unsupportedBucketConfig(rq)
			}
			if q.Get("list-type") == "2" {
				return g.listObjects(rq, 2)
			}
			return g.listObjects(rq, 1)
		case http.MethodHead:
			return g.headBucket(rq)
		case http.MethodPut:
			switch {
			case q.Has("acl"):
				return g.putBucketACL(rq)
			case q.Has("versioning"):
				return g.putBucketVersioning(rq)
			case q.Has("tagging"):
				return g.putBucketTagging(rq, false)
			case q.Has("cors"):
				return g.putBucketCORS(rq)
			case q.Has("lifecycle"):
				return g.putBucketLifecycle(rq)
			}
			if len(q) > 0 {
				return apiErr(ErrNotImplemented, "This bucket configuration is not supported by Sluice")
			}
			return g.createBucket(rq)
		case http.MethodDelete:
			switch {
			case q.Has("tagging"):
				return g.putBucketTagging(rq, true)
			case q.Has("cors"):
				return g.deleteBucketCORS(rq)
			case q.Has("lifecycle"):
				return g.deleteBucketLifecycle(rq)
			case len(q) > 0:
				return apiErr(ErrNotImplemented, "This bucket configuration is not supported by Sluice")
			}
			return g.deleteBucket(rq)
		case http.MethodPost:
			if q.Has("delete") {
				return g.deleteObjects(rq)
			}
			return apiErr(ErrMalformedPOSTRequest, "A POST to a bucket is a form upload (a multipart/form-data body) or DeleteObjects (?delete)")
		}
		return apiErr(ErrMethodNotAllowed, "The specified method is not allowed against a bucket")
	}
	switch m {
	case http.MethodGet, http.MethodHead:
		switch {
		case q.Has("uploadId") && m == http.MethodGet:
			return g.listParts(rq)
		case q.Has("acl") && m == http.MethodGet:
			return g.getObjectACL(rq)
		case q.Has("tagging") && m == http.MethodGet:
			return g.getObjectTagging(rq)
		case q.Has("attributes") && m == http.MethodGet:
			return g.getObjectAttributes(rq)
		case q.Has("attributes"), q.Has("torrent"), q.Has("legal-hold"), q.Has("retention"):
			return apiErr(ErrNotImplemented, "This object subresource is not supported by Sluice")
		}
		return g.getObject(rq, m == http.MethodHead)
	case http.MethodPut:
		switch {
		case q.Has("partNumber") || q.Has("uploadId"):
			if rq.r.Header.Get("X-Amz-Copy-Source") != "" {
				return g.uploadPartCopy(rq)
			}
			return g.uploadPart(rq)
		case q.Has("acl"):
			return g.putObjectACL(rq)
		case q.Has("tagging"):
			return g.putObjectTagging(rq, false)
		case q.Has("legal-hold"), q.Has("retention"):
			return apiErr(ErrNotImplemented, "This object subresource is not supported by Sluice")
		case rq.r.Header.Get("X-Amz-Copy-Source") != "":
			return g.copyObject(rq)
		}
		return g.putObject(rq)
	case http.MethodDelete:
		if q.Has("uploadId") {
			return g.abortMultipartUpload(rq)
		}
		if q.Has("tagging") {
			return g.putObjectTagging(rq, true)
		}
		return g.deleteObject(rq)
	case http.MethodPost:
		switch {
		case q.Has("uploads"):
			return g.createMultipartUpload(rq)
		case q.Has("uploadId"):
			return g.completeMultipartUpload(rq)
		case q.Has("restore"):
			return apiErr(ErrNotImplemented, "RestoreObject is not needed with Sluice: an object a lifecycle transition moved to the object tier is read directly (GetObject fetches its bytes from the tier and restores them to the file system)")
		}
		return apiErr(ErrNotImplemented, "This POST request is not supported by Sluice")
	}
	return apiErr(ErrMethodNotAllowed, "The specified method is not allowed against an object")
}

// writeError sends err as an S3 XML error document (no body for HEAD and
// 304). If the response has already started, it aborts the connection so
// that the client sees a truncated response, not a wrong one.
func (g *Gateway) writeError(rq *request, err error) {
	var ae *APIError
	if !errors.As(err, &ae) {
		ae = fsErr(err, ErrInternal, "the object")
	}
	if ae.Status >= 500 {
		g.log.Warn("s3: request failed", "id", rq.id, "method", rq.r.Method, "uri", rq.r.RequestURI, "code", ae.Code, "err", err)
	}
	if rq.w.status != 0 {
		g.log.Warn("s3: request failed after the response started; aborting the connection", "id", rq.id, "uri", rq.r.RequestURI, "err", err)
		panic(http.ErrAbortHandler)
	}
	h := rq.w.Header()
	for _, name := range []string{"Content-Length", "Accept-Ranges", "Content-Encoding", "Content-Disposition", "Cache-Control", "Expires", "Content-Language"} {
		h.Del(name)
	}
	if ae.Status != http.StatusNotModified {
		// A 304 carries the validators, as S3 sends them.
		h.Del("Etag")
		h.Del("Last-Modified")
	}
	if ae.Code != ErrInvalidRange.Code {
		// For InvalidRange, getObject set "Content-Range: bytes */SIZE".
		h.Del("Content-Range")
	}
	for name := range h {
		if strings.HasPrefix(name, "X-Amz-Meta-") || strings.HasPrefix(strings.ToLower(name), "x-amz-meta-") || strings.HasPrefix(name, "X-Amz-Checksum-") {
			delete(h, name)
		}
	}
	if ae.Status == http.StatusNotModified || rq.r.Method == http.MethodHead {
		if ae.Status != http.StatusNotModified {
			h.Set("X-Amz-Error-Code", ae.Code)
			h.Del("Content-Type")
		}
		rq.w.WriteHeader(ae.Status)
		return
	}
	body := errorBody{Code: ae.Code, Message: ae.Message, Resource: rq.r.URL.Path, RequestID: rq.id, HostID: rq.id}
	switch ae.Code {
	case ErrNoSuchBucket.Code, ErrBucketNotEmpty.Code, ErrBucketAlreadyExists.Code, ErrBucketAlreadyOwnedByYou.Code:
		body.BucketName = rq.bucket
	case ErrNoSuchKey.Code:
		body.Key = rq.key
	}
	h.Set("Content-Type", "application/xml")
	rq.w.WriteHeader(ae.Status)
	io.WriteString(rq.w, xml.Header)
	xml.NewEncoder(rq.w).Encode(body)
}

// writeXML sends a 200 response with an XML document.
func writeXML(rq *request, v any) error {
	rq.w.Header().Set("Content-Type", "application/xml")
	rq.w.WriteHeader(http.StatusOK)
	io.WriteString(rq.w, xml.Header)
	return xml.NewEncoder(rq.w).Encode(v)
}

// owner is the requester as an S3 owner: the access key, or
// "anonymous". The gateway has no users beyond its access keys.
func (rq *request) owner() owner {
	id := rq.auth.AccessKey
	if id == "" {
		id = anonymousOwner
	}
	return owner{ID: id, DisplayName: id}
}

// bucketPath returns the bucket's directory.
func (rq *request) bucketPath() string { return "/" + rq.bucket }

// checkBucket returns NoSuchBucket unless the bucket directory exists.
func (g *Gateway) checkBucket(rq *request) error {
	fi, err := g.c.Stat(rq.ctx, rq.bucketPath())
	if err != nil {
		return fsErr(err, ErrNoSuchBucket, "bucket "+rq.bucket)
	}
	if !fi.IsDir() {
		return apiErr(ErrNoSuchBucket, "The specified bucket does not exist")
	}
	return nil
}
