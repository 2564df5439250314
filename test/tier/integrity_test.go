package tier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/sluice-fs/sluice/internal/errs"
)

// TestReplacedObject: an object changed behind Sluice's back is never
// served as the file's bytes. Replaced by another object (other metadata),
// the read fails as corruption; replaced with forged metadata (the same
// generation and SHA-256) and one flipped byte, the block's CRC32C fails
// it. Restoring the right bytes makes the file readable again.
func TestReplacedObject(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := newClient(t, fs.addr, 0)
	data := randomData(9, 3<<20+5)
	if err := writeSluice(ctx, c, "/f", data); err != nil {
		t.Fatal(err)
	}
	fs.mustCLI("hsm", "archive", "/f")
	fs.mustCLI("hsm", "release", "/f")
	s3c := be.s3(t)
	info, err := s3c.StatObject(ctx, bucket, "f", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{}
	for k, v := range info.Metadata {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-amz-meta-") && len(v) > 0 {
			meta[strings.TrimPrefix(lk, "x-amz-meta-")] = v[0]
		}
	}
	if meta["sluice-gen"] == "" {
		t.Fatalf("object metadata: %v", info.Metadata)
	}
	put := func(b []byte, m map[string]string) {
		t.Helper()
		if _, err := s3c.PutObject(ctx, bucket, "f", bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{UserMetadata: m}); err != nil {
			t.Fatal(err)
		}
	}
	read := func() error {
		t.Helper()
		sum, _, err := readSum(ctx, newClient(t, fs.addr, 0), "/f")
		if err == nil && sum != sha256.Sum256(data) {
			t.Fatal("a read returned wrong bytes")
		}
		return err
	}
	put(randomData(10, len(data)), nil)
	if err := read(); errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("read of a replaced object: %v; want corruption", err)
	}
	bad := bytes.Clone(data)
	bad[2<<20+100] ^= 0x40
	put(bad, meta)
	if err := read(); errs.CodeOf(err) != errs.Corruption || !strings.Contains(err.Error(), "block 2") {
		t.Fatalf("read of a forged object: %v; want corruption of block 2", err)
	}
	if r := fs.cli("hsm", "restore", "/f"); r.code == 0 || !strings.Contains(r.stderr, "CRC32C") {
		t.Fatalf("restore of a forged object: %d %q", r.code, r.stderr)
	}
	put(data, meta)
	if err := read(); err != nil {
		t.Fatalf("read after the right bytes are back: %v", err)
	}
	fs.mustCLI("hsm", "restore", "/f")
	if err := read(); err != nil {
		t.Fatalf("read after restore: %v", err)
	}
}
