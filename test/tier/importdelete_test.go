package tier

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// TestImportDelete: `sluice tier import --delete` removes the released
// files an earlier import made of objects removed from the bucket since
// (in the directory and below, "d1.x" sorting before "d1/"), keeps a
// restored one (its bytes read back whole; dirty, as its copy is gone),
// and never touches the files of objects still there, a file written in
// the directory, or the files another import (another prefix) made below
// it even when their objects are gone; without --delete a re-run removes
// nothing; a directory the removals left empty is removed, one that keeps
// a file is not; --dry-run says what a run would import and remove and
// changes nothing. Against both real S3 backends.
func TestImportDelete(t *testing.T) {
	eachBackend(t, testImportDelete)
}

func testImportDelete(t *testing.T, be *backend) {
	ctx := context.Background()
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := newClientOpts(t, client.Options{Server: fs.addr})
	s3c := be.s3(t)
	data := map[string][]byte{}
	for i, key := range []string{"del/a", "del/d1/b", "del/d1/c", "del/d1/sub/e", "del/d1.x", "del/deep/x/y/f", "del/z", "other/o1"} {
		d := randomData(uint64(90+i), (i+1)*37<<10)
		data[key] = d
		putObject(t, s3c, key, d)
	}
	if st, err := c.TierImport(ctx, "t", "del/", "/imp", 2, nil); err != nil || st.Files != 7 {
		t.Fatalf("import: %+v, %v", st, err)
	}
	if st, err := c.TierImport(ctx, "t", "other/", "/imp/other", 2, nil); err != nil || st.Files != 1 {
		t.Fatalf("import of another prefix below it: %+v, %v", st, err)
	}
	mine := randomData(99, 10<<10)
	if err := writeSluice(ctx, c, "/imp/d1/mine", mine); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HsmRestore(ctx, "/imp/d1/c"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"del/a", "del/d1/b", "del/d1/c", "del/d1/sub/e", "del/d1.x", "del/deep/x/y/f", "other/o1"} {
		if err := s3c.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	r := fs.cli("tier", "import", "t/del/", "/imp")
	t.Logf("tier import again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != 0 || strings.Contains(r.stdout, "removed") {
		t.Fatalf("tier import again without --delete: want exit 0, nothing removed")
	}
	if _, err := c.Stat(ctx, "/imp/a"); err != nil {
		t.Fatalf("/imp/a after a re-run without --delete: %v", err)
	}

	// A dry run says what the run would do and changes nothing; a new
	// object, a new directory's, would be imported, and z, changed in the
	// bucket, would be updated (the metadata service's answer: the walk
	// alone cannot tell it from an unchanged one).
	fresh := randomData(98, 5<<10)
	putObject(t, s3c, "del/n/new", fresh)
	oldZ := len(data["del/z"])
	data["del/z"] = randomData(97, 7<<10)
	putObject(t, s3c, "del/z", data["del/z"])
	r = fs.cli("tier", "import", "t/del/", "/imp", "--delete", "--dry-run")
	t.Logf("tier import --delete --dry-run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != 0 || !strings.Contains(r.stdout, "dry run, nothing changed: would import 1 files (5.0 KiB) and 0 empty ones; 0 imported before, 0 keys skipped, 0 would fail") ||
		!strings.Contains(r.stdout, "dry run: objects changed in the bucket since they were imported: 1 files would be updated to them, 0 kept") ||
		!strings.Contains(r.stdout, "would update\t/imp/z\t7168\n") ||
		!strings.Contains(r.stdout, "dry run: objects removed from the bucket since they were imported: 5 files would be removed, 1 kept (restored)") ||
		!strings.Contains(r.stdout, "would import\t/imp/n/new\t5120\n") ||
		!strings.Contains(r.stdout, "would remove\t/imp/d1.x\n") || !strings.Contains(r.stdout, "would keep\t/imp/d1/c\t") {
		t.Fatalf("tier import --delete --dry-run: want exit 0, n/new to import, z to update, 5 files to remove, c kept")
	}
	if fi, err := c.Stat(ctx, "/imp/z"); err != nil || fi.Size() != int64(oldZ) {
		t.Fatalf("/imp/z after a dry run: %v, %v; want the old object's size", fi, err)
	}
	for _, p := range []string{"/imp/a", "/imp/d1.x", "/imp/deep/x/y/f"} {
		if _, err := c.Stat(ctx, p); err != nil {
			t.Fatalf("%s after a dry run: %v; want it there", p, err)
		}
	}
	if _, err := c.Stat(ctx, "/imp/n"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("/imp/n after a dry run: %v; want nothing made", err)
	}
	if info, err := c.HsmState(ctx, "/imp/d1/c"); err != nil || info.State != "archived" {
		t.Fatalf("/imp/d1/c after a dry run: %+v, %v; want it archived still", info, err)
	}

	r = fs.cli("tier", "import", "t/del/", "/imp", "--delete")
	t.Logf("tier import --delete: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != 0 || !strings.Contains(r.stdout, "imported 1 files (5.0 KiB) and 0 empty ones; 0 imported before, 0 keys skipped, 0 failed") ||
		!strings.Contains(r.stdout, "objects changed in the bucket since they were imported: 1 files updated to them, 0 kept") ||
		!strings.Contains(r.stdout, "objects removed from the bucket since they were imported: 5 files removed, 1 kept (restored or being restored); 4 directories they left empty removed") ||
		!strings.Contains(r.stdout, "removed\t/imp/d1/sub/\n") ||
		!strings.Contains(r.stdout, "removed\t/imp/d1.x\n") || !strings.Contains(r.stdout, "kept\t/imp/d1/c\t") {
		t.Fatalf("tier import --delete: want exit 0, z updated, a, b, e, f and d1.x removed with the directories left empty, c kept")
	}
	for _, p := range []string{"/imp/a", "/imp/d1/b", "/imp/d1/sub/e", "/imp/d1.x", "/imp/deep/x/y/f"} {
		if _, err := c.Stat(ctx, p); errs.CodeOf(err) != errs.NotFound {
			t.Fatalf("%s after --delete: %v; want not found", p, err)
		}
	}
	if info, err := c.HsmState(ctx, "/imp/d1/c"); err != nil || info.State != "dirty" {
		t.Fatalf("/imp/d1/c (restored) after --delete: %+v, %v; want dirty", info, err)
	}
	if info, err := c.HsmState(ctx, "/imp/other/o1"); err != nil || info.State != "released" {
		t.Fatalf("/imp/other/o1 (another import's) after --delete: %+v, %v; want it released, untouched", info, err)
	}
	for p, want := range map[string][]byte{"/imp/d1/c": data["del/d1/c"], "/imp/z": data["del/z"], "/imp/d1/mine": mine} {
		if got, err := readAll(ctx, c, p); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after --delete: %d bytes, %v; want its %d bytes", p, len(got), err, len(want))
		}
	}
	// d1/sub held only e, deep/x/y only f: removed with them, and deep/x
	// and deep above; d1 keeps c and mine.
	for _, d := range []string{"/imp/d1/sub", "/imp/deep/x/y", "/imp/deep/x", "/imp/deep"} {
		if _, err := c.Stat(ctx, d); errs.CodeOf(err) != errs.NotFound {
			t.Fatalf("%s, which the removals left empty: %v; want it removed", d, err)
		}
	}
	if _, err := c.Stat(ctx, "/imp/d1"); err != nil {
		t.Fatalf("/imp/d1: %v", err)
	}
	// Once more: nothing left to remove; the restored file, dirty now,
	// is the user's.
	r = fs.cli("tier", "import", "t/del/", "/imp", "--delete", "-q")
	if r.code != 0 || !strings.Contains(r.stdout, "0 files removed, 0 kept") {
		t.Fatalf("tier import --delete again: exit %d\n%s%s\nwant nothing removed or kept", r.code, r.stdout, r.stderr)
	}
}
