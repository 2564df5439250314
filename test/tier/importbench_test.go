package tier

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sluice-fs/sluice/client"
)

// BenchmarkImport measures `sluice tier import` through the client
// library, 8 requests at once, both ways: from the listing alone (the
// default: a directory's files made in batches, OpTierImport; one object
// at a time against a server without it, such as an older SLUICE_BINARY)
// and with --checksums (one read of every object, then a create, a record
// and a rename per object), beside, in the same run
// against the same backend, the listing alone and reading every object
// whole with a plain S3 client, 8 at once. Each round imports into new
// directories; a file of each import is read back and compared. Each
// round also runs the listing import again over its directory, plainly and
// with --delete (nothing gone: the cost of the walk and the merge).
//
//	go test -run '^$' -bench Import -benchtime 3x ./test/tier
//
// SLUICE_TIER_BENCH_OBJECTS sets the number of objects of each size
// (default 256), SLUICE_TIER_BENCH_IMPORT_KIB the sizes in KiB (default
// "64,1024"); SLUICE_TIER_BENCH_LISTING_ONLY=1 skips the checksum import
// and the GETs (for a run over many objects).
func BenchmarkImport(b *testing.B) {
	ctx := context.Background()
	be := benchBackend(b)
	fs := startFS(b)
	addBackend(b, fs, be, "")
	c := newClientOpts(b, client.Options{Server: fs.addr, TierNoRestoreOnRead: true})
	s3c := be.s3(b)
	n := envInt("SLUICE_TIER_BENCH_OBJECTS", 256)
	listingOnly := os.Getenv("SLUICE_TIER_BENCH_LISTING_ONLY") != ""
	var sizes []int
	for _, f := range strings.Split(cmp.Or(os.Getenv("SLUICE_TIER_BENCH_IMPORT_KIB"), "64,1024"), ",") {
		kib, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || kib < 1 {
			b.Fatalf("SLUICE_TIER_BENCH_IMPORT_KIB=%q: want sizes in KiB, like 64,1024", os.Getenv("SLUICE_TIER_BENCH_IMPORT_KIB"))
		}
		sizes = append(sizes, kib<<10)
	}
	for _, size := range sizes {
		prefix := fmt.Sprintf("lake%d/", size)
		data := randomData(uint64(size), size)
		keys := make([]string, n)
		dirs := max(16, n/1000)
		for i := range keys {
			keys[i] = fmt.Sprintf("%sd%03d/obj-%07d", prefix, i%dirs, i)
		}
		start := time.Now()
		if err := parallelEach(keys, 16, func(k string) error {
			_, err := s3c.PutObject(ctx, bucket, k, bytes.NewReader(data), int64(size), minio.PutObjectOptions{})
			return err
		}); err != nil {
			b.Fatal(err)
		}
		b.Logf("%d objects of %d KiB put in %v", n, size>>10, time.Since(start).Round(time.Millisecond))
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			var importT, checkedT, getT, listT, rerunT, deleteT time.Duration
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				listed := 0
				for o := range s3c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
					if o.Err != nil {
						b.Fatal(o.Err)
					}
					listed++
				}
				if listed != n {
					b.Fatalf("listed %d objects, want %d", listed, n)
				}
				listT += time.Since(start)
				imp := func(dir string, checksums bool) time.Duration {
					start := time.Now()
					st, err := c.TierImportWith(ctx, "t", prefix, dir, client.ImportOptions{Parallel: 8, Checksums: checksums})
					if err != nil || st.Files != n {
						b.Fatalf("import (checksums %v): %+v, %v", checksums, st, err)
					}
					d := time.Since(start)
					p := path.Join(dir, strings.TrimPrefix(keys[n/2], prefix))
					if got, err := readAll(ctx, c, p); err != nil || !bytes.Equal(got, data) {
						b.Fatalf("%s: read %d bytes, %v; want the object's %d", p, len(got), err, len(data))
					}
					return d
				}
				importT += imp(fmt.Sprintf("/imp%d-%d", size, i), false)
				// Re-runs, every object there: plain, and with --delete
				// (the walk of the directory merged with the listing).
				rerun := func(del bool) time.Duration {
					start := time.Now()
					st, err := c.TierImportWith(ctx, "t", prefix, fmt.Sprintf("/imp%d-%d", size, i), client.ImportOptions{Parallel: 8, Delete: del})
					if err != nil || st.Present != n || st.Removed+st.Orphaned != 0 {
						b.Fatalf("re-run (delete %v): %+v, %v", del, st, err)
					}
					return time.Since(start)
				}
				rerunT += rerun(false)
				deleteT += rerun(true)
				if listingOnly {
					continue
				}
				start = time.Now()
				if err := parallelEach(keys, 8, func(k string) error { return getWhole(ctx, s3c, k, size) }); err != nil {
					b.Fatal(err)
				}
				getT += time.Since(start)
				checkedT += imp(fmt.Sprintf("/chk%d-%d", size, i), true)
			}
			b.ReportMetric(float64(n*b.N)/importT.Seconds(), "import-objects/s")
			b.ReportMetric(float64(n*b.N)/listT.Seconds(), "list-objects/s")
			b.ReportMetric(listT.Seconds()/importT.Seconds(), "import/list")
			b.ReportMetric(float64(n*b.N)/rerunT.Seconds(), "rerun-objects/s")
			b.ReportMetric(float64(n*b.N)/deleteT.Seconds(), "rerun-delete-objects/s")
			b.ReportMetric(rerunT.Seconds()/deleteT.Seconds(), "delete/rerun")
			if !listingOnly {
				b.ReportMetric(float64(n*b.N)/checkedT.Seconds(), "checksums-objects/s")
				b.ReportMetric(float64(n*b.N)/getT.Seconds(), "get-objects/s")
				b.ReportMetric(getT.Seconds()/checkedT.Seconds(), "checksums/get")
			}
		})
	}
}

func getWhole(ctx context.Context, c *minio.Client, key string, size int) error {
	return rangedGet(ctx, c, key, int64(size), int64(size), 1)
}
