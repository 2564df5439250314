package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// BenchmarkS3 measures PUT and GET of 4 KiB and 1 MiB objects through
// the gateway (Go net/http with SigV4 signing, UNSIGNED-PAYLOAD as SDKs
// use over TLS) beside the client library doing the same work (create,
// write, close; open, read, close) on the same server in the same run:
//
//	go test -run '^$' -bench S3 -benchtime 2s ./test/s3
func BenchmarkS3(b *testing.B) {
	g := startGateway(b)
	fc := g.client()
	ctx := context.Background()
	c := newS3Client(g.endpoint)
	if resp, body := c.do(b, "PUT", "/bench", nil, nil, nil); resp.StatusCode != 200 {
		b.Fatalf("create bucket: %s", body)
	}
	const objects = 64
	for _, size := range []int{4 << 10, 1 << 20} {
		data := bytes.Repeat([]byte("s"), size)
		// Objects for the GETs, written once.
		for i := range objects {
			c.do(b, "PUT", fmt.Sprintf("/bench/get-%d/%d", size, i), nil, nil, data)
		}
		for _, op := range []string{"PUT", "GET"} {
			for _, clients := range []int{1, 16} {
				for _, via := range []string{"s3", "client"} {
					name := fmt.Sprintf("%s/%s/%dclients/%s", op, sizeName(size), clients, via)
					b.Run(name, func(b *testing.B) {
						var seq atomic.Int64
						do := func() error {
							i := seq.Add(1)
							switch {
							case op == "PUT" && via == "s3":
								req := c.newRequest("PUT", fmt.Sprintf("/bench/put-%d/%d", size, i%1000), nil, bytes.NewReader(data))
								c.sign(req, "UNSIGNED-PAYLOAD", time.Now())
								return send(c.hc, req, io.Discard)
							case op == "GET" && via == "s3":
								req := c.newRequest("GET", fmt.Sprintf("/bench/get-%d/%d", size, i%objects), nil, nil)
								c.sign(req, "UNSIGNED-PAYLOAD", time.Now())
								return send(c.hc, req, io.Discard)
							case op == "PUT":
								return proctest.WriteFile(ctx, fc, fmt.Sprintf("/bench/cput-%d-%d", size, i%1000), data)
							default:
								f, err := fc.Open(ctx, fmt.Sprintf("/bench/get-%d/%d", size, i%objects))
								if err != nil {
									return err
								}
								_, err = io.Copy(io.Discard, f)
								f.Close()
								return err
							}
						}
						b.SetBytes(int64(size))
						b.ReportAllocs()
						b.ResetTimer()
						start := time.Now()
						var wg sync.WaitGroup
						var failed atomic.Value
						per := (b.N + clients - 1) / clients
						for range clients {
							wg.Go(func() {
								for range per {
									if err := do(); err != nil {
										failed.Store(err)
										return
									}
								}
							})
						}
						wg.Wait()
						if err, _ := failed.Load().(error); err != nil {
							b.Fatal(err)
						}
						b.ReportMetric(float64(per*clients)/time.Since(start).Seconds(), "ops/s")
					})
				}
			}
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// send does a request and fails on a non-2xx status.
func send(hc *http.Client, req *http.Request, w io.Writer) error {
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s", req.Method, req.URL.Path, resp.Status)
	}
	return nil
}
