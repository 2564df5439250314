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

// TestImportChangedObjects: objects replaced in the bucket after an
// import read as corrupt (never as other bytes) until a re-run of the
// import; the re-run makes the files still released the new objects (size
// and bytes), keeps a restored file's bytes, counts it and makes it dirty
// (its copy is gone, so it cannot be released), leaves an
// unchanged object's file alone, and with --keep-changed changes nothing;
// a descriptor opened before the change reads the new object if it read
// nothing before, and fails with ESTALE if it read the old one; an import
// with --checksums follows a changed object as well.
// Against both real S3 backends.
func TestImportChangedObjects(t *testing.T) {
	eachBackend(t, testImportChanged)
}

func testImportChanged(t *testing.T, be *backend) {
	ctx := context.Background()
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := newClientOpts(t, client.Options{Server: fs.addr})
	s3c := be.s3(t)
	const pfx = "changed/"
	put := func(key string, d []byte) {
		t.Helper()
		putObject(t, s3c, pfx+key, d)
	}
	v1 := map[string][]byte{"a": randomData(71, 1<<20+300<<10), "b": randomData(72, 200<<10), "c": randomData(73, 100<<10)}
	for k, d := range v1 {
		put(k, d)
	}
	if st, err := c.TierImport(ctx, "t", pfx, "/imp", 2, nil); err != nil || st.Files != 3 {
		t.Fatalf("import: %+v, %v", st, err)
	}
	// c is restored: its bytes are on the targets.
	if _, err := c.HsmRestore(ctx, "/imp/c"); err != nil {
		t.Fatal(err)
	}
	if info, err := c.HsmState(ctx, "/imp/c"); err != nil || info.State != "archived" {
		t.Fatalf("/imp/c after its restore: %+v, %v", info, err)
	}
	// Readers (that restore nothing) hold a open across the change: one
	// read it before, one did not.
	rc := newClient(t, fs.addr, 0)
	held, err := rc.Open(ctx, "/imp/a")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	unread, err := rc.Open(ctx, "/imp/a")
	if err != nil {
		t.Fatal(err)
	}
	defer unread.Close()
	head := make([]byte, 64<<10)
	// Its second block alone (no read-ahead for a read that does not
	// start at the beginning).
	if _, err := held.ReadAt(head, 1<<20); err != nil || !bytes.Equal(head, v1["a"][1<<20:1<<20+len(head)]) {
		t.Fatalf("held read of /imp/a: %v", err)
	}
	a2, c2 := randomData(74, 2<<20+3), randomData(75, 50<<10)
	put("a", a2)
	put("c", c2)
	if got, err := readAll(ctx, c, "/imp/a"); errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("a replaced object before the re-run: %d bytes, %v; want a corruption error", len(got), err)
	}

	r := fs.cli("tier", "import", "t/"+pfx, "/imp")
	t.Logf("tier import again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != 0 || !strings.Contains(r.stdout, "1 imported before, 0 keys skipped, 0 failed") ||
		!strings.Contains(r.stdout, "1 files updated to them, 1 kept (restored or being restored)") {
		t.Fatalf("tier import again: want exit 0, b imported before, a updated, c kept")
	}
	fi, err := c.Stat(ctx, "/imp/a")
	if err != nil || fi.Size() != int64(len(a2)) {
		t.Fatalf("/imp/a after the re-run: %v, %v; want size %d", fi, err, len(a2))
	}
	if info, err := c.HsmState(ctx, "/imp/a"); err != nil || info.State != "released" {
		t.Fatalf("/imp/a after the re-run: %+v, %v; want released", info, err)
	}
	// A descriptor opened before that read nothing yet reads the new
	// object (before 2026-12-04: EIO until reopened); one that read the
	// old object reads what it had fetched of it (its second 1 MiB block)
	// and gets ESTALE for the rest, never bytes of both objects.
	if _, err := unread.ReadAt(head, 1<<20); err != nil || !bytes.Equal(head, a2[1<<20:1<<20+len(head)]) {
		t.Fatalf("read of /imp/a after the re-run through a descriptor opened before: %v; want the new object's bytes", err)
	}
	if _, err := held.ReadAt(head, 1<<20); err != nil || !bytes.Equal(head, v1["a"][1<<20:1<<20+len(head)]) {
		t.Fatalf("read of what a descriptor had fetched of the old object: %v; want those bytes", err)
	}
	if _, err := held.ReadAt(head, 0); errs.CodeOf(err) != errs.Stale {
		t.Fatalf("read of /imp/a after the re-run through a descriptor that read the old object: %v; want stale", err)
	}
	// c's copy in the bucket is gone: dirty, so that it is archived again
	// (to a key of its own) before anything releases it.
	if info, err := c.HsmState(ctx, "/imp/c"); err != nil || info.State != "dirty" {
		t.Fatalf("/imp/c after the re-run: %+v, %v; want dirty", info, err)
	}
	if _, err := c.HsmRelease(ctx, "/imp/c"); errs.CodeOf(err) != errs.Busy {
		t.Fatalf("release of /imp/c, whose copy was replaced: %v; want busy", err)
	}
	for p, want := range map[string][]byte{"/imp/a": a2, "/imp/b": v1["b"], "/imp/c": v1["c"]} {
		if got, err := readAll(ctx, c, p); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, %v; want %d bytes as expected", p, len(got), err, len(want))
		}
	}

	// With --keep-changed a re-run changes nothing.
	put("b", randomData(76, 10<<10))
	r = fs.cli("tier", "import", "t/"+pfx, "/imp", "--keep-changed")
	t.Logf("tier import --keep-changed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != 0 || !strings.Contains(r.stdout, "3 imported before") || strings.Contains(r.stdout, "updated to them") {
		t.Fatalf("tier import --keep-changed: want every file imported before, none updated")
	}
	if fi, err := c.Stat(ctx, "/imp/b"); err != nil || fi.Size() != int64(len(v1["b"])) {
		t.Fatalf("/imp/b after --keep-changed: %v, %v; want its old size", fi, err)
	}

	// c, dirty, is archived again (to a key of its own): a file of its
	// own now, which re-runs keep and count, without failing (before
	// 2026-12-04: "exists already", exit 1), with --checksums too.
	if info, err := c.HsmArchive(ctx, "/imp/c", ""); err != nil || info.Gen == 0 {
		t.Fatalf("archive of /imp/c again: %+v, %v", info, err)
	}
	r = fs.cli("tier", "import", "t/"+pfx, "/imp")
	t.Logf("tier import after /imp/c was archived again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != 0 || !strings.Contains(r.stdout, "1 imported before, 0 keys skipped, 0 failed") ||
		!strings.Contains(r.stdout, "0 files updated to them, 1 kept") ||
		!strings.Contains(r.stdout, "files an earlier import made that are files of their own since (written and archived again): 1 kept") {
		t.Fatalf("tier import after /imp/c was archived again: want exit 0, a imported before, b (restored by a read, changed) kept, c its own")
	}
	if st, err := c.TierImportWith(ctx, "t", pfx, "/imp", client.ImportOptions{Parallel: 1, Checksums: true}); err != nil || st.Own != 1 || st.Present != 1 || st.Changed != 1 || st.Failed != 0 {
		t.Fatalf("import --checksums after /imp/c was archived again: %+v, %v; want c its own, a imported before, b kept", st, err)
	}
	if got, err := readAll(ctx, c, "/imp/c"); err != nil || !bytes.Equal(got, v1["c"]) {
		t.Fatalf("/imp/c after the re-runs: %d bytes, %v; want its own bytes", len(got), err)
	}

	// An import with --checksums follows a changed object too.
	k1, k2 := randomData(77, 200<<10), randomData(78, 333<<10)
	for i, d := range [][]byte{k1, k2} {
		putObject(t, s3c, "chk/k", d)
		st, err := c.TierImportWith(ctx, "t", "chk/", "/chk", client.ImportOptions{Parallel: 1, Checksums: true})
		if want := (client.ImportStats{Files: 1, Bytes: int64(len(k1))}); i == 1 {
			want = client.ImportStats{Updated: 1}
			if err != nil || st != want {
				t.Fatalf("import --checksums again: %+v, %v; want %+v", st, err, want)
			}
		} else if err != nil || st != want {
			t.Fatalf("import --checksums: %+v, %v; want %+v", st, err, want)
		}
	}
	if got, err := readAll(ctx, c, "/chk/k"); err != nil || !bytes.Equal(got, k2) {
		t.Fatalf("/chk/k after the re-run with --checksums: %d bytes, %v; want the new object's %d", len(got), err, len(k2))
	}
}

// TestReleaseChecksCopy: a release heads the file's copy in the bucket
// before it frees the file's bytes, and refuses (EBUSY) when the object
// was removed or replaced outside Sluice since the archive (or the
// import): the file keeps its bytes, reads back whole and becomes dirty;
// archived again, it goes to a key of its own (the other object is left
// alone) and is released. Against both real S3 backends.
func TestReleaseChecksCopy(t *testing.T) {
	eachBackend(t, testReleaseChecksCopy)
}

func testReleaseChecksCopy(t *testing.T, be *backend) {
	ctx := context.Background()
	fs := startFS(t)
	addBackend(t, fs, be, "rel/")
	c := newClientOpts(t, client.Options{Server: fs.addr})
	s3c := be.s3(t)
	files := map[string][]byte{"/r/kept": randomData(81, 2<<20+5), "/r/replaced": randomData(82, 300<<10), "/r/removed": randomData(83, 1<<20)}
	if err := c.MkdirAll(ctx, "/r", 0o755); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for p, d := range files {
		if err := writeSluice(ctx, c, p, d); err != nil {
			t.Fatal(err)
		}
		info, err := c.HsmArchive(ctx, p, "")
		if err != nil {
			t.Fatal(err)
		}
		keys[p] = "rel/" + info.Key
	}
	// An imported object, restored, then replaced in the bucket.
	imported := randomData(84, 500<<10)
	putObject(t, s3c, "rel/src/imp", imported)
	if st, err := c.TierImport(ctx, "t", "src/", "/r/i", 1, nil); err != nil || st.Files != 1 {
		t.Fatalf("import: %+v, %v", st, err)
	}
	if _, err := c.HsmRestore(ctx, "/r/i/imp"); err != nil {
		t.Fatal(err)
	}
	files["/r/i/imp"] = imported
	keys["/r/i/imp"] = "rel/src/imp"

	other := randomData(85, 300<<10)
	for _, p := range []string{"/r/replaced", "/r/i/imp"} {
		putObject(t, s3c, keys[p], other)
	}
	if err := s3c.RemoveObject(ctx, bucket, keys["/r/removed"], minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/r/replaced", "/r/removed", "/r/i/imp"} {
		_, err := c.HsmRelease(ctx, p)
		if errs.CodeOf(err) != errs.Busy || !strings.Contains(err.Error(), "not released") {
			t.Fatalf("release of %s, whose copy is gone: %v; want busy", p, err)
		}
		// Dirty: archived again before a release is tried again.
		if info, err := c.HsmState(ctx, p); err != nil || info.State != "dirty" {
			t.Fatalf("%s after the refused release: %+v, %v; want dirty", p, info, err)
		}
	}
	// Archived again (beside the other object: a key of its own), it is
	// released.
	info, err := c.HsmArchive(ctx, "/r/replaced", "")
	if err != nil || info.State != "archived" || "rel/"+info.Key == keys["/r/replaced"] {
		t.Fatalf("archive of /r/replaced again: %+v, %v; want archived under another key", info, err)
	}
	if info, err := c.HsmRelease(ctx, "/r/replaced"); err != nil || info.State != "released" {
		t.Fatalf("release of /r/replaced archived again: %+v, %v", info, err)
	}
	if got, err := getObject(ctx, s3c, keys["/r/replaced"]); err != nil || !bytes.Equal(got, other) {
		t.Fatalf("the object written over the first copy: %d bytes, %v; want it untouched", len(got), err)
	}
	if info, err := c.HsmRelease(ctx, "/r/kept"); err != nil || info.State != "released" {
		t.Fatalf("release of /r/kept: %+v, %v", info, err)
	}
	for p, want := range files {
		if got, err := readAll(ctx, c, p); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, %v; want its %d bytes", p, len(got), err, len(want))
		}
	}
}

// getObject reads object key of the tier's bucket with a plain S3 client.
func getObject(ctx context.Context, s3c *minio.Client, key string) ([]byte, error) {
	o, err := s3c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer o.Close()
	return io.ReadAll(o)
}
