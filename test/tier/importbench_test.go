package tier

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sluice-fs/sluice/client"
)

// BenchmarkImport measures `sluice tier import` (through the client
// library: listing, one read of every object for its checksums, a create,
// a record and a rename per object, 8 at once) beside, in the same run
// against the same backend, the floor of what it must do (reading every
// object whole with a plain S3 client, 8 at once) and the listing alone. Objects of 1 MiB and of
// 64 KiB; each round imports into a new directory.
//
//	go test -run '^$' -bench Import -benchtime 3x ./test/tier
//
// SLUICE_TIER_BENCH_OBJECTS sets the number of objects of each size
// (default 256).
func BenchmarkImport(b *testing.B) {
	ctx := context.Background()
	be := benchBackend(b)
	fs := startFS(b)
	addBackend(b, fs, be, "")
	c := newClientOpts(b, client.Options{Server: fs.addr})
	s3c := be.s3(b)
	n := envInt("SLUICE_TIER_BENCH_OBJECTS", 256)
	for _, size := range []int{64 << 10, 1 << 20} {
		prefix := fmt.Sprintf("lake%d/", size)
		data := randomData(uint64(size), size)
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("%sd%02d/obj-%05d", prefix, i%16, i)
			if _, err := s3c.PutObject(ctx, bucket, keys[i], bytes.NewReader(data), int64(size), minio.PutObjectOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			var importT, getT, listT time.Duration
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
				start = time.Now()
				if err := parallelEach(keys, 8, func(k string) error { return getWhole(ctx, s3c, k, size) }); err != nil {
					b.Fatal(err)
				}
				getT += time.Since(start)
				start = time.Now()
				st, err := c.TierImport(ctx, "t", prefix, fmt.Sprintf("/imp%d-%d", size, i), 8, nil)
				if err != nil || st.Files != n {
					b.Fatalf("import: %+v, %v", st, err)
				}
				importT += time.Since(start)
			}
			b.ReportMetric(float64(n*b.N)/importT.Seconds(), "import-objects/s")
			b.ReportMetric(float64(n*b.N)/getT.Seconds(), "get-objects/s")
			b.ReportMetric(getT.Seconds()/importT.Seconds(), "import/get")
			b.ReportMetric(float64(n*b.N)/listT.Seconds(), "list-objects/s")
		})
	}
}

func getWhole(ctx context.Context, c *minio.Client, key string, size int) error {
	return rangedGet(ctx, c, key, int64(size), int64(size), 1)
}
