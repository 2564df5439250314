package tier

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/sluice-fs/sluice/client"
)

// TestTruncateAfterRestore: a released file is read by two clients (each
// read starts a restore in the background) and at once rewritten with
// O_TRUNC by one of them, again and again; afterwards the file must hold
// only the new bytes on the targets: grown with a truncate it reads zeros
// past them (not the restored bytes), and archived again, its release
// (which compares the chunks with the copy) goes through. Two races lost
// that (2026-12-02): a cut to 0 decided while the file was released (no
// chunk cut) landed after the restore committed, leaving the restored
// chunks whole past the new size; and a File opened while the file was
// released cut the chunks of the data ID it had opened with, not the one
// the restore moved the file to, which for a file imported from a bucket
// had no fences to refuse the cut. Files released after an archive and
// files imported from the bucket's listing, both.
func TestTruncateAfterRestore(t *testing.T) {
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "trunc/")
	c1 := restoringClient(t, fs.addr, 0)
	c2 := restoringClient(t, fs.addr, 0)
	s3c := be.s3(t)
	ctx := context.Background()
	if err := c1.MkdirAll(ctx, "/z", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []struct {
		name   string
		rounds int
	}{{"archived", 30}, {"imported", 30}} {
		for k := range mode.rounds {
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("%s, round %d: %s", mode.name, k, fmt.Sprintf(format, args...))
			}
			b := randomData(uint64(k), 2<<20+k)
			c1.Remove(ctx, "/z/f")
			if mode.name == "archived" {
				if err := writeSluice(ctx, c1, "/z/f", b); err != nil {
					fail("%v", err)
				}
				if _, err := c1.HsmArchive(ctx, "/z/f", ""); err != nil {
					fail("archive: %v", err)
				}
				if _, err := c1.HsmRelease(ctx, "/z/f"); err != nil {
					fail("release: %v", err)
				}
			} else {
				pfx := fmt.Sprintf("imp-%d/", k)
				if _, err := s3c.PutObject(ctx, bucket, "trunc/"+pfx+"f", bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
					fail("put: %v", err)
				}
				if st, err := c1.TierImport(ctx, "t", pfx, "/z", 1, nil); err != nil || st.Files != 1 {
					fail("import: %+v, %v", st, err)
				}
			}
			for _, c := range []*client.Client{c1, c2} {
				if got, err := readAllSluice(ctx, c, "/z/f"); err != nil || !bytes.Equal(got, b) {
					fail("read %d bytes, %v", len(got), err)
				}
			}
			nb := randomData(uint64(k)+1000, 200<<10)
			f, err := c2.OpenFile(ctx, "/z/f", client.O_RDWR|client.O_TRUNC, 0)
			if err != nil {
				fail("open with O_TRUNC: %v", err)
			}
			if _, err := f.WriteAt(nb, 0); err != nil {
				fail("write: %v", err)
			}
			if err := f.Close(); err != nil {
				fail("close: %v", err)
			}
			if got, err := readAllSluice(ctx, c1, "/z/f"); err != nil || !bytes.Equal(got, nb) {
				fail("read after the rewrite: %d bytes, %v", len(got), err)
			}
			// Grown again, the file must read zeros past the rewrite,
			// never the restored bytes a missed cut would have left.
			if err := c1.Truncate(ctx, "/z/f", 1<<20); err != nil {
				fail("grow: %v", err)
			}
			want := append(bytes.Clone(nb), make([]byte, 1<<20-len(nb))...)
			if got, err := readAllSluice(ctx, c2, "/z/f"); err != nil || !bytes.Equal(got, want) {
				fail("read after growing it: %d bytes, %v, first difference at %d", len(got), err, firstDiff(got, want))
			}
			if _, err := c1.HsmArchive(ctx, "/z/f", ""); err != nil {
				fail("archive after the rewrite: %v", err)
			}
			if _, err := c1.HsmRelease(ctx, "/z/f"); err != nil {
				fail("release after the rewrite: %v", err)
			}
		}
	}
}
