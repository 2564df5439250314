package s3

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Bucket configurations (versioning, tagging, CORS, lifecycle) are extended
// attributes of the bucket's directory, one per configuration. Every
// request that depends on one (each PUT of a versioned bucket, each
// cross-origin request) would pay a round trip to read it, so a gateway
// caches what it read for Options.BucketConfigTTL. Its own changes apply at
// once; another gateway's are seen within the TTL (S3 also asks clients to
// wait after changing versioning before relying on it).

// Extended attributes of bucket configurations.
const (
	// xattrVersioning: "Enabled" or "Suspended"; absent if versioning
	// was never enabled.
	xattrVersioning = "user.s3.versioning"
)

// cachedAttr is one bucket attribute as read at a time.
type cachedAttr struct {
	val     []byte // nil: absent
	fetched time.Time
}

// configCache caches bucket attributes by bucket and name.
type configCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[[2]string]cachedAttr // guarded by mu
}

// maxCachedAttrs bounds the cache; past it, the cache starts over.
const maxCachedAttrs = 16384

func newConfigCache(ttl time.Duration) *configCache {
	return &configCache{ttl: ttl, m: make(map[[2]string]cachedAttr)}
}

func (c *configCache) get(bucket, name string, now time.Time) (cachedAttr, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[[2]string{bucket, name}]
	if !ok || now.Sub(a.fetched) >= c.ttl || now.Before(a.fetched) {
		return cachedAttr{}, false
	}
	return a, true
}

func (c *configCache) put(bucket, name string, val []byte, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedAttrs {
		clear(c.m)
	}
	c.m[[2]string{bucket, name}] = cachedAttr{val: val, fetched: now}
}

// forget drops everything cached about a bucket (it was created or
// deleted).
func (c *configCache) forget(bucket string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k[0] == bucket {
			delete(c.m, k)
		}
	}
}

// bucketAttr returns a bucket attribute (nil if absent), from the cache if
// it is fresh. A missing bucket is NoSuchBucket.
func (g *Gateway) bucketAttr(ctx context.Context, bucket, name string) ([]byte, error) {
	now := g.now()
	if a, ok := g.configs.get(bucket, name, now); ok {
		return a.val, nil
	}
	v, err := g.c.GetXattr(ctx, "/"+bucket, name)
	switch {
	case err == nil:
	case errs.CodeOf(err) == errs.NoData:
		v = nil
	default:
		return nil, fsErr(err, ErrNoSuchBucket, "bucket "+bucket)
	}
	g.configs.put(bucket, name, v, now)
	return v, nil
}

// setBucketAttr records a bucket attribute; nil removes it.
func (g *Gateway) setBucketAttr(ctx context.Context, bucket, name string, val []byte) error {
	var err error
	if val == nil {
		err = g.c.RemoveXattr(ctx, "/"+bucket, name)
		if errs.CodeOf(err) == errs.NoData {
			err = nil
		}
	} else {
		err = g.c.SetXattr(ctx, "/"+bucket, name, val)
	}
	if err != nil {
		g.configs.forget(bucket)
		return fsErr(err, ErrNoSuchBucket, "bucket "+bucket)
	}
	g.configs.put(bucket, name, val, g.now())
	return nil
}
