package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluice-fs/sluice/client"
)

// BenchmarkSmallFiles writes (create, write, close: durable), reads (open,
// read all, close) and removes small files through the client library on
// two servers in the same run, one keeping files up to 16 KiB inline in
// the metadata (the default) and one with --inline-max 0 (every file in
// chunks, as before inline data; 64 KiB files are in chunks on both), beside a local directory (write with
// fsync, so that all three make the file durable before going on):
//
//	go test -run '^$' -bench SmallFiles -benchtime 3000x ./test/e2e
func BenchmarkSmallFiles(b *testing.B) {
	ctx := context.Background()
	const maxClients = 16
	servers := map[string][]*client.Client{}
	for _, sys := range []struct{ name, inline string }{{"inline", "16KiB"}, {"chunks", "0"}} {
		s := startServer(b, "", "--inline-max", sys.inline)
		for range maxClients {
			servers[sys.name] = append(servers[sys.name], s.client())
		}
	}
	tmp := b.TempDir()
	var round atomic.Int64
	for _, size := range []int{4 << 10, 16 << 10, 64 << 10} {
		data := bytes.Repeat([]byte("d"), size)
		for _, op := range []string{"write", "read", "unlink"} {
			for _, nClients := range []int{1, maxClients} {
				for _, sys := range []string{"local", "inline", "chunks"} {
					b.Run(fmt.Sprintf("%dKiB/%s/clients=%d/%s", size>>10, op, nClients, sys), func(b *testing.B) {
						r := strconv.FormatInt(round.Add(1), 10)
						var write, read, unlink func(i int) error
						if sys == "local" {
							dir := filepath.Join(tmp, r)
							if err := os.Mkdir(dir, 0o755); err != nil {
								b.Fatal(err)
							}
							p := func(i int) string { return filepath.Join(dir, strconv.Itoa(i)) }
							write = func(i int) error {
								f, err := os.Create(p(i))
								if err != nil {
									return err
								}
								_, err = f.Write(data)
								if err == nil {
									err = f.Sync()
								}
								return errorsJoin(err, f.Close())
							}
							read = func(i int) error {
								got, err := os.ReadFile(p(i))
								if err == nil && len(got) != size {
									err = fmt.Errorf("read %d bytes, want %d", len(got), size)
								}
								return err
							}
							unlink = func(i int) error { return os.Remove(p(i)) }
						} else {
							cs := servers[sys]
							dir := "/small" + r
							if err := cs[0].Mkdir(ctx, dir, 0o755); err != nil {
								b.Fatal(err)
							}
							p := func(i int) string { return dir + "/" + strconv.Itoa(i) }
							cl := func(i int) *client.Client { return cs[i%nClients] }
							write = func(i int) error {
								f, err := cl(i).Create(ctx, p(i))
								if err != nil {
									return err
								}
								_, err = f.Write(data)
								return errorsJoin(err, f.Close())
							}
							read = func(i int) error {
								f, err := cl(i).Open(ctx, p(i))
								if err != nil {
									return err
								}
								n, err := io.Copy(io.Discard, f)
								if err == nil && n != int64(size) {
									err = fmt.Errorf("read %d bytes, want %d", n, size)
								}
								return errorsJoin(err, f.Close())
							}
							unlink = func(i int) error { return cl(i).Remove(ctx, p(i)) }
						}
						fn := write
						if op != "write" {
							runParallel(b, maxClients, b.N, write) // setup, not timed
							fn = map[string]func(int) error{"read": read, "unlink": unlink}[op]
						}
						b.SetBytes(int64(size))
						b.ResetTimer()
						runParallel(b, nClients, b.N, fn)
						b.StopTimer()
						b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "files/s")
					})
				}
			}
		}
	}
}
