package tier_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/tier"
	"github.com/sluice-fs/sluice/internal/wire"
)

// testStore is the conformance suite every Store passes.
func testStore(t *testing.T, s tier.Store) {
	ctx := context.Background()
	if err := s.Check(ctx); err != nil {
		t.Fatalf("check: %v", err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 100_000)
	meta := map[string]string{tier.MetaGen: "00000000000000ab", tier.MetaIno: "42"}
	if err := s.Put(ctx, "dir/obj", bytes.NewReader(data), int64(len(data)), meta); err != nil {
		t.Fatalf("put: %v", err)
	}
	info, got, err := s.Head(ctx, "dir/obj")
	if err != nil || info.Size != int64(len(data)) || info.ETag == "" || got[tier.MetaGen] != meta[tier.MetaGen] || tier.MetaInode(got) != 42 {
		t.Fatalf("head: %+v %v %v", info, got, err)
	}
	// The ETag a listing gives is the one Head gives.
	var listed tier.ObjectInfo
	if err := s.List(ctx, "dir/", func(o tier.ObjectInfo) error { listed = o; return nil }); err != nil || listed.ETag != info.ETag {
		t.Fatalf("listed %+v, %v; head's ETag %q", listed, err, info.ETag)
	}
	buf := make([]byte, 1000)
	got, err = s.GetRange(ctx, "dir/obj", 12345, buf, "")
	if err != nil || !bytes.Equal(buf, data[12345:13345]) || got[tier.MetaGen] != meta[tier.MetaGen] {
		t.Fatalf("get range: %v %v", got, err)
	}
	// A range past the end is an error, never short data.
	if _, err := s.GetRange(ctx, "dir/obj", int64(len(data))-10, buf, ""); err == nil {
		t.Fatal("range past the end succeeded")
	}
	if _, err := s.GetRange(ctx, "dir/none", 0, buf, ""); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("get of a missing object: %v", err)
	}
	if _, _, err := s.Head(ctx, "dir/none"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("head of a missing object: %v", err)
	}
	if err := s.Delete(ctx, "dir/obj"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "dir/obj"); err != nil {
		t.Fatalf("delete of a missing object: %v", err)
	}
	if _, _, err := s.Head(ctx, "dir/obj"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("head after delete: %v", err)
	}
}

func TestMemStore(t *testing.T) {
	t.Parallel()
	testStore(t, tier.NewMemStore())
}

// TestS3Store runs the suite over a real S3 server, versitygw (installed
// by .ci/run), through the minio-go Store; then checks that refused
// credentials and a dead endpoint get their classes.
func TestS3Store(t *testing.T) {
	gw, err := exec.LookPath("versitygw")
	if err != nil {
		if home, _ := os.UserHomeDir(); home != "" {
			if p := filepath.Join(home, "go", "bin", "versitygw"); fileExists(p) {
				gw = p
			}
		}
	}
	if gw == "" {
		proctest.SkipMissing(t, "versitygw is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(gw, "--access", "store-test-key", "--secret", "store-test-secret", "--port", addr, "posix", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw not listening: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mc, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4("store-test-key", "store-test-secret", ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(context.Background(), "bkt", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	b := wire.TierBackend{Name: "v", Endpoint: "http://" + addr, Bucket: "bkt", Prefix: "p/", AccessKey: "store-test-key", SecretKey: "store-test-secret"}
	s, err := tier.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, s)
	ctx := context.Background()
	bad := b
	bad.SecretKey = "wrong"
	s, _ = tier.Open(bad)
	if err := s.Check(ctx); errs.CodeOf(err) != errs.Permission {
		t.Errorf("wrong secret: %v", err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	s, _ = tier.Open(b)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Check(cctx); errs.CodeOf(err) != errs.Unavailable {
		t.Errorf("dead endpoint: %v", err)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
