package fuse

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// TestMountS3Random: the mount of a `sluice serve --mount --s3` and its S3
// gateway take turns changing a few objects of one bucket, which are files
// of one directory: PUTs (small, around the inline limit, multi-block),
// DELETEs, and through the mount rewrites, overwrites, appends and
// truncates. A PUT or DELETE that returned and a close through the mount
// are what the other side must see at its next GET or open, byte for byte
// (close-to-open; a name the mount's kernel still caches may take the
// change feed's round trip: pollSettle). The seed is logged;
// SLUICE_MOUNTS3_SEED replays it and SLUICE_MOUNTS3_TURNS runs more turns
// (default 120).
func TestMountS3Random(t *testing.T) {
	requireFUSE(t)
	rt := newRandomTurns(t, "MOUNTS3", 120, 31)
	turns, rng := rt.turns, rt.rng
	const key, secret = "AKIAMOUNTS3TEST", "mounts3-test-secret-key"
	s3addr := freePort(t)
	_, mnt, _, _ := startServeMount(t, "--s3", s3addr, "--s3-access-key", key, "--s3-secret-key", secret)
	c, err := minio.New(s3addr, &minio.Options{Creds: credentials.NewStaticV4(key, secret, ""), BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
	must(t, err)
	ctx := context.Background()
	const bucket = "bkt"
	must(t, c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}))
	dir := filepath.Join(mnt, bucket)
	model := map[string][]byte{}
	names := []string{"a", "b", "c", "d"}
	size := func() int { return rt.size(1200 << 10) } // past a 1 MiB block too
	fill := rt.bytes
	existing := func() (string, bool) { return oneOf(rng, names, model) }
	fail := func(turn int, format string, args ...any) { t.Helper(); rt.fail(t, turn, format, args...) }
	get := func(n string) ([]byte, error) {
		o, err := c.GetObject(ctx, bucket, n, minio.GetObjectOptions{})
		if err != nil {
			return nil, err
		}
		defer o.Close()
		return io.ReadAll(o)
	}
	for turn := range turns {
		var changed string // bytes changed: both sides must read them at once
		namesChanged := false
		switch k := rng.IntN(12); {
		case k < 4: // PUT
			n := names[rng.IntN(len(names))]
			b := fill(size())
			if _, err := c.PutObject(ctx, bucket, n, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
				fail(turn, "PUT %s (%d bytes): %v", n, len(b), err)
			}
			if _, had := model[n]; !had {
				namesChanged = true
			}
			model[n], changed = b, n
		case k < 5: // DELETE
			n, ok := existing()
			if !ok {
				continue
			}
			if err := c.RemoveObject(ctx, bucket, n, minio.RemoveObjectOptions{}); err != nil {
				fail(turn, "DELETE %s: %v", n, err)
			}
			delete(model, n)
			namesChanged = true
		case k < 7: // a whole file through the mount
			n := names[rng.IntN(len(names))]
			b := fill(size())
			must(t, os.WriteFile(filepath.Join(dir, n), b, 0o644))
			if _, had := model[n]; !had {
				namesChanged = true
			}
			model[n], changed = b, n
		case k < 9: // overwrite or append through the mount
			n, ok := existing()
			if !ok {
				continue
			}
			old := model[n]
			off := len(old)
			if rng.IntN(2) == 0 {
				off = rng.IntN(len(old) + 1)
			}
			b := fill(1 + rng.IntN(70<<10))
			f, err := os.OpenFile(filepath.Join(dir, n), os.O_RDWR, 0)
			must(t, err)
			if _, err := f.WriteAt(b, int64(off)); err != nil {
				fail(turn, "write %s at %d: %v", n, off, err)
			}
			must(t, f.Close())
			if end := off + len(b); end > len(old) {
				old = append(old, make([]byte, end-len(old))...)
			}
			copy(old[off:], b)
			model[n], changed = old, n
		case k < 10: // truncate through the mount
			n, ok := existing()
			if !ok {
				continue
			}
			sz := rng.IntN(len(model[n]) + 1)
			must(t, os.Truncate(filepath.Join(dir, n), int64(sz)))
			model[n], changed = model[n][:sz], n
		default: // reads that fill caches: a GET and a read through the mount
			n, ok := existing()
			if !ok {
				continue
			}
			if b, err := get(n); err != nil || !bytes.Equal(b, model[n]) {
				fail(turn, "GET %s: %d bytes, %v; want %d", n, len(b), err, len(model[n]))
			}
			if b, err := os.ReadFile(filepath.Join(dir, n)); err != nil || !bytes.Equal(b, model[n]) {
				fail(turn, "read of %s through the mount: %d bytes, %v; want %d", n, len(b), err, len(model[n]))
			}
		}
		if changed != "" {
			if b, err := get(changed); err != nil || !bytes.Equal(b, model[changed]) {
				fail(turn, "GET %s after its change: %d bytes, %v; want %d, first difference at %d", changed, len(b), err, len(model[changed]), firstDiff(b, model[changed]))
			}
			b, err := os.ReadFile(filepath.Join(dir, changed))
			if namesChanged && errors.Is(err, fs.ErrNotExist) {
				err = pollSettle(dir, model) // a new name: the kernel may still cache its absence
				b = model[changed]
			}
			if err != nil || !bytes.Equal(b, model[changed]) {
				fail(turn, "read of %s through the mount after its change: %d bytes, %v; want %d, first difference at %d", changed, len(b), err, len(model[changed]), firstDiff(b, model[changed]))
			}
		}
		if namesChanged {
			if err := pollSettle(dir, model); err != nil {
				fail(turn, "the mount after a change of names: %v", err)
			}
			for n := range model {
				if _, err := c.StatObject(ctx, bucket, n, minio.StatObjectOptions{}); err != nil {
					fail(turn, "HEAD %s: %v", n, err)
				}
			}
		}
	}
}
