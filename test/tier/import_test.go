package tier

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// TestImport imports an existing bucket's objects (written by a plain S3
// client) as released files, against each real S3 backend: files appear
// with the objects' sizes, read back byte for byte and restore; an
// existing file is not replaced; removing, rewriting and archiving the
// files again never deletes or changes the imported objects; an object
// replaced in the bucket afterwards reads as corrupt, never as its new
// bytes.
func TestImport(t *testing.T) {
	for _, start := range []func(testing.TB) *backend{startSluiceBackend, startVersity} {
		be := start(t)
		t.Run(be.name, func(t *testing.T) { testImport(t, be) })
	}
}

func testImport(t *testing.T, be *backend) {
	ctx := context.Background()
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := newClientOpts(t, client.Options{Server: fs.addr}) // restores on read
	s3c := be.s3(t)
	objects := map[string][]byte{
		"datasets/a.bin":     randomData(31, 3<<20+5),
		"datasets/sub/b.bin": randomData(32, 1<<20),
		"datasets/c.bin":     randomData(33, 200<<10),
		"datasets/empty":     {},
		"datasets/dir/":      {}, // a "folder" marker: skipped
		"datasets/exists":    randomData(34, 1000),
		"other/x":            randomData(35, 10), // outside the prefix
	}
	for k, d := range objects {
		if _, err := s3c.PutObject(ctx, bucket, k, bytes.NewReader(d), int64(len(d)), minio.PutObjectOptions{}); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	mine := randomData(36, 500)
	if err := c.MkdirAll(ctx, "/imp", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeSluice(ctx, c, "/imp/exists", mine); err != nil {
		t.Fatal(err)
	}

	r := fs.cli("tier", "import", "t/datasets/", "/imp")
	t.Logf("tier import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code == 0 || !strings.Contains(r.stdout, "imported 3 files (") || !strings.Contains(r.stdout, "and 1 empty ones; 0 imported before, 1 keys skipped, 1 failed") {
		t.Fatalf("tier import: want 3 files, 1 empty, 1 skipped, 1 failed (the existing file) and a failure exit")
	}
	// A second run picks up only a new object.
	objects["datasets/new.bin"] = randomData(38, 70000)
	if _, err := s3c.PutObject(ctx, bucket, "datasets/new.bin", bytes.NewReader(objects["datasets/new.bin"]), 70000, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	r = fs.cli("tier", "import", "t", "/imp", "--prefix", "datasets/")
	t.Logf("tier import again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if !strings.Contains(r.stdout, "imported 1 files (") || !strings.Contains(r.stdout, "and 0 empty ones; 4 imported before, 1 keys skipped, 1 failed") {
		t.Fatalf("tier import again: want 1 new file, 4 imported before, 1 skipped, 1 failed")
	}
	if got, err := readAll(ctx, c, "/imp/exists"); err != nil || !bytes.Equal(got, mine) {
		t.Fatalf("the existing file was changed by the import: %v", err)
	}
	if _, err := c.Stat(ctx, "/imp/x"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("a key outside the prefix was imported: %v", err)
	}
	for _, p := range []string{"/imp/a.bin", "/imp/sub/b.bin", "/imp/c.bin"} {
		info, err := c.HsmState(ctx, p)
		if err != nil || info.State != "released" {
			t.Fatalf("%s: state %+v, %v; want released", p, info, err)
		}
		fi, err := c.Stat(ctx, p)
		if err != nil || fi.Size() != int64(len(objects["datasets"+strings.TrimPrefix(p, "/imp")])) {
			t.Fatalf("%s: stat %v, %v", p, fi, err)
		}
	}
	if fi, err := c.Stat(ctx, "/imp/empty"); err != nil || fi.Size() != 0 {
		t.Fatalf("/imp/empty: %v, %v", fi, err)
	}
	if fs.chunkBytes() > 64<<10 {
		t.Fatalf("the import wrote %d bytes of chunks; it must copy nothing", fs.chunkBytes())
	}

	// Reads: byte for byte, and the first read restores.
	for p, k := range map[string]string{"/imp/a.bin": "datasets/a.bin", "/imp/sub/b.bin": "datasets/sub/b.bin", "/imp/new.bin": "datasets/new.bin"} {
		got, err := readAll(ctx, c, p)
		if err != nil || !bytes.Equal(got, objects[k]) {
			t.Fatalf("%s: read %d bytes (%v), want the object's %d", p, len(got), err, len(objects[k]))
		}
		waitFor(t, p+" restored", func() bool {
			info, err := c.HsmState(ctx, p)
			return err == nil && info.State == "archived"
		})
	}
	// Rewrite b (dirty), archive it again (to its own key), remove a,
	// collect: the imported objects stay as they were.
	if err := writeSluice(ctx, c, "/imp/sub/b.bin", []byte("new")); err != nil {
		t.Fatal(err)
	}
	fs.mustCLI("hsm", "archive", "/imp/sub/b.bin")
	if err := c.Remove(ctx, "/imp/a.bin"); err != nil {
		t.Fatal(err)
	}
	fs.mustCLI("hsm", "remove", "/imp/sub/b.bin")
	fs.mustCLI("tier", "gc")
	for _, k := range []string{"datasets/a.bin", "datasets/sub/b.bin"} {
		obj, err := s3c.GetObject(ctx, bucket, k, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(obj)
		if err != nil || !bytes.Equal(got, objects[k]) {
			t.Fatalf("imported object %s was changed or deleted: %d bytes, %v", k, len(got), err)
		}
	}

	// An imported object replaced in the bucket (same size) reads as
	// corrupt through Sluice.
	other := randomData(37, len(objects["datasets/c.bin"]))
	if _, err := s3c.PutObject(ctx, bucket, "datasets/c.bin", bytes.NewReader(other), int64(len(other)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(ctx, c, "/imp/c.bin")
	if errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("read of a replaced imported object: %d bytes, %v; want a corruption error", len(got), err)
	}
}
