package tier

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Store is one backend's bucket (under its prefix). Implementations are
// safe for concurrent use. Errors carry an errs class: NotFound for a
// missing object, Permission for refused credentials, Unavailable for a
// backend that cannot be reached.
type Store interface {
	// Put writes the object key (below the prefix) of size bytes from r,
	// with the user metadata meta (names without "x-amz-meta-").
	Put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) error
	// GetRange reads len(dst) bytes of object key at off into dst, and
	// returns the object's user metadata. A shorter object is an error.
	// With etag set, the read is pinned to that ETag (If-Match): an
	// object whose ETag is another fails with errs.Corruption.
	GetRange(ctx context.Context, key string, off int64, dst []byte, etag string) (map[string]string, error)
	// Head returns the object as a listing shows it (size, mtime, ETag)
	// and its user metadata.
	Head(ctx context.Context, key string) (ObjectInfo, map[string]string, error)
	// Delete removes the object; removing a missing one is no error.
	Delete(ctx context.Context, key string) error
	// Check says whether the bucket can be reached with the credentials.
	Check(ctx context.Context) error
	// List calls fn for each object whose key (below the prefix) starts
	// with prefix, in key order, until fn returns an error (returned).
	List(ctx context.Context, prefix string, fn func(o ObjectInfo) error) error
}

// ObjectInfo is an object as List sees it.
type ObjectInfo struct {
	Key      string // below the backend's prefix
	Size     int64
	Modified time.Time
	ETag     string // without quotes; "" if the backend gave none
}

// Open returns the Store of backend b. It connects lazily: Check says
// whether the backend works.
func Open(b wire.TierBackend) (Store, error) {
	u, err := url.Parse(b.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errs.New(errs.Invalid, "tier: backend %q: endpoint %q is not an http(s)://host[:port] URL", b.Name, b.Endpoint)
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(b.AccessKey, b.SecretKey, ""),
		Secure:       u.Scheme == "https",
		Region:       b.Region,
		BucketLookup: minio.BucketLookupPath,
		Transport:    tr,
		MaxRetries:   3,
	})
	if err != nil {
		return nil, errs.New(errs.Invalid, "tier: backend %q: %v", b.Name, err)
	}
	return &s3Store{name: b.Name, bucket: b.Bucket, prefix: b.Prefix, c: c, core: &minio.Core{Client: c}}, nil
}

type s3Store struct {
	name, bucket, prefix string
	c                    *minio.Client
	core                 *minio.Core
}

// metaHeader is the prefix of user metadata in S3 headers.
const metaHeader = "X-Amz-Meta-"

func (s *s3Store) Put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) error {
	_, err := s.c.PutObject(ctx, s.bucket, s.prefix+key, r, size, minio.PutObjectOptions{
		UserMetadata: meta, PartSize: 16 << 20, NumThreads: 4, DisableContentSha256: true,
		ContentType: "application/octet-stream",
	})
	return s.err("put", key, err)
}

func (s *s3Store) GetRange(ctx context.Context, key string, off int64, dst []byte, etag string) (map[string]string, error) {
	var opts minio.GetObjectOptions
	if len(dst) == 0 {
		return nil, errs.New(errs.Invalid, "tier: empty ranged read of %s", key)
	}
	if err := opts.SetRange(off, off+int64(len(dst))-1); err != nil {
		return nil, s.err("get", key, err)
	}
	if etag != "" {
		if err := opts.SetMatchETag(etag); err != nil {
			return nil, s.err("get", key, err)
		}
	}
	body, info, hdr, err := s.core.GetObject(ctx, s.bucket, s.prefix+key, opts)
	if err != nil {
		if etag != "" && minio.ToErrorResponse(err).StatusCode == http.StatusPreconditionFailed {
			return nil, errs.Wrap(errs.Corruption, err, "tier: backend %q: object %s is not the one imported (ETag %q): it was replaced in the bucket", s.name, s.prefix+key, etag)
		}
		return nil, s.err("get", key, err)
	}
	defer body.Close()
	if n, err := io.ReadFull(body, dst); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, shortBody(s.name, s.prefix+key, off, n, len(dst), info.Size)
		}
		return nil, s.err("get", key, err)
	}
	return userMeta(hdr), nil
}

// shortBody classifies a ranged GET of want bytes whose body ended after
// got: a response that announced want bytes (sent) was cut (the backend
// or the connection went away: unavailable, try again); one that
// announced fewer came from an object shorter than the archived one
// (corruption).
func shortBody(backend, key string, off int64, got, want int, sent int64) error {
	if sent == int64(want) {
		return errs.New(errs.Unavailable, "tier: backend %q: object %s: the response broke after %d of %d bytes at %d", backend, key, got, want, off)
	}
	return errs.New(errs.Corruption, "tier: backend %q: object %s returned %d of %d bytes at %d", backend, key, got, want, off)
}

func (s *s3Store) Head(ctx context.Context, key string) (ObjectInfo, map[string]string, error) {
	info, err := s.c.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return ObjectInfo{}, nil, s.err("head", key, err)
	}
	return ObjectInfo{Key: key, Size: info.Size, Modified: info.LastModified, ETag: strings.Trim(info.ETag, `"`)}, userMeta(info.Metadata), nil
}

func (s *s3Store) List(ctx context.Context, prefix string, fn func(o ObjectInfo) error) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing goroutine when fn fails
	for o := range s.c.ListObjects(lctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if o.Err != nil {
			return s.err("list", prefix, o.Err)
		}
		if err := fn(ObjectInfo{Key: strings.TrimPrefix(o.Key, s.prefix), Size: o.Size, Modified: o.LastModified, ETag: strings.Trim(o.ETag, `"`)}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (s *s3Store) Delete(ctx context.Context, key string) error {
	err := s.c.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{})
	if errs.CodeOf(s.err("delete", key, err)) == errs.NotFound {
		return nil
	}
	return s.err("delete", key, err)
}

func (s *s3Store) Check(ctx context.Context) error {
	ok, err := s.c.BucketExists(ctx, s.bucket)
	if err != nil {
		return s.err("check bucket", "", err)
	}
	if !ok {
		return errs.New(errs.NotFound, "tier: backend %q: bucket %q does not exist", s.name, s.bucket)
	}
	return nil
}

// err gives an S3 client error its class. Secrets never appear in it:
// minio-go's errors name the request, not the credentials.
func (s *s3Store) err(op, key string, err error) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf("tier: backend %q: %s %s", s.name, op, s.prefix+key)
	if key == "" {
		what = fmt.Sprintf("tier: backend %q: %s %q", s.name, op, s.bucket)
	}
	r := minio.ToErrorResponse(err)
	switch r.Code {
	case minio.NoSuchKey, "NotFound":
		return errs.Wrap(errs.NotFound, err, "%s", what)
	case minio.NoSuchBucket:
		return errs.Wrap(errs.NotFound, err, "%s: bucket %q does not exist", what, s.bucket)
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken":
		return errs.Wrap(errs.Permission, err, "%s: credentials refused", what)
	}
	if r.StatusCode == http.StatusForbidden {
		return errs.Wrap(errs.Permission, err, "%s: credentials refused", what)
	}
	if r.StatusCode == http.StatusNotFound {
		return errs.Wrap(errs.NotFound, err, "%s", what)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return errs.Wrap(errs.Unavailable, err, "%s: backend did not answer in time", what)
	}
	var ne net.Error
	if errors.As(err, &ne) || r.StatusCode >= 500 || errs.CodeOf(err) == errs.Unavailable {
		return errs.Wrap(errs.Unavailable, err, "%s: backend unreachable", what)
	}
	if r.StatusCode == 0 || r.StatusCode == http.StatusBadRequest {
		return errs.Wrap(errs.Invalid, err, "%s", what)
	}
	return errs.Wrap(errs.Internal, err, "%s", what)
}

func userMeta(h http.Header) map[string]string {
	m := make(map[string]string)
	for k, v := range h {
		if len(v) > 0 && len(k) > len(metaHeader) && strings.EqualFold(k[:len(metaHeader)], metaHeader) {
			m[strings.ToLower(k[len(metaHeader):])] = v[0]
		}
	}
	return m
}

// MemStore is a Store in memory, for tests of code above the Store.
type MemStore struct {
	mu      sync.Mutex
	objects map[string]memObject
}

type memObject struct {
	data []byte
	meta map[string]string
}

// NewMemStore returns an empty in-memory Store.
func NewMemStore() *MemStore { return &MemStore{objects: make(map[string]memObject)} }

func (m *MemStore) Put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) error {
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r, size))
	if err != nil {
		return err
	}
	if n != size {
		return errs.New(errs.Invalid, "tier: put %s: %d of %d bytes", key, n, size)
	}
	mm := make(map[string]string, len(meta))
	for k, v := range meta {
		mm[strings.ToLower(k)] = v
	}
	m.mu.Lock()
	m.objects[key] = memObject{buf.Bytes(), mm}
	m.mu.Unlock()
	return nil
}

func (m *MemStore) GetRange(ctx context.Context, key string, off int64, dst []byte, etag string) (map[string]string, error) {
	m.mu.Lock()
	o, ok := m.objects[key]
	m.mu.Unlock()
	switch {
	case !ok:
		return nil, errs.New(errs.NotFound, "tier: no object %s", key)
	case etag != "" && etag != memETag(o.data):
		return nil, errs.New(errs.Corruption, "tier: object %s is not the one with ETag %q", key, etag)
	case off < 0 || off+int64(len(dst)) > int64(len(o.data)):
		return nil, errs.New(errs.Corruption, "tier: object %s has %d bytes, read of %d at %d", key, len(o.data), len(dst), off)
	}
	copy(dst, o.data[off:])
	return o.meta, nil
}

func (m *MemStore) Head(ctx context.Context, key string) (ObjectInfo, map[string]string, error) {
	m.mu.Lock()
	o, ok := m.objects[key]
	m.mu.Unlock()
	if !ok {
		return ObjectInfo{}, nil, errs.New(errs.NotFound, "tier: no object %s", key)
	}
	return ObjectInfo{Key: key, Size: int64(len(o.data)), ETag: memETag(o.data)}, o.meta, nil
}

func (m *MemStore) Delete(ctx context.Context, key string) error {
	m.mu.Lock()
	delete(m.objects, key)
	m.mu.Unlock()
	return nil
}

func (m *MemStore) Check(ctx context.Context) error { return nil }

func (m *MemStore) List(ctx context.Context, prefix string, fn func(o ObjectInfo) error) error {
	ks := m.Keys()
	slices.Sort(ks)
	for _, k := range ks {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		m.mu.Lock()
		o, ok := m.objects[k]
		m.mu.Unlock()
		if !ok {
			continue
		}
		if err := fn(ObjectInfo{Key: k, Size: int64(len(o.data)), Modified: time.Unix(0, 0), ETag: memETag(o.data)}); err != nil {
			return err
		}
	}
	return nil
}

// memETag is a MemStore object's ETag: the MD5 of its bytes, as S3 gives
// for objects put in one part.
func memETag(data []byte) string {
	sum := md5.Sum(data)
	return hex.EncodeToString(sum[:])
}

// Keys returns the keys of the objects held.
func (m *MemStore) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ks []string
	for k := range m.objects {
		ks = append(ks, k)
	}
	return ks
}
