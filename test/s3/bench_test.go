package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// BenchmarkS3 measures PUT and GET of 4 KiB and 1 MiB objects through
// the gateway (Go net/http with SigV4 signing, UNSIGNED-PAYLOAD as SDKs
// use over TLS) beside the client library doing the same work (create,
// write, close; open, read, close) on the same server in the same run,
// with 1, 8 and 16 clients, and for objects that fit inline the client
// library's PutFile (one request, durable before it returns, as a PUT):
//
//	go test -run '^$' -bench S3 -benchtime 2s ./test/s3
//
// Both read the data 256 KiB at a time, as awscli and boto3 (s3transfer)
// do: with io.Copy's 8 KiB reads the benchmark's own HTTP client, one
// read system call per 8 KiB, would weigh more than the gateway.
//
// Besides ops/s it reports cpu-us/op: the CPU time of the server process
// and of the benchmark's process (the HTTP clients or the library) per
// operation, which a busy machine disturbs less than the throughput; and
// srv-cpu-us/op, the server process's alone (on a machine whose clients
// run elsewhere, what the gateway costs the storage node).
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
			for _, clients := range []int{1, 8, 16} {
				vias := []string{"s3", "client"}
				if op == "PUT" && int64(size) <= fc.InlineMax() {
					vias = append(vias, "putfile") // client.PutFile, one request
				}
				for _, via := range vias {
					name := fmt.Sprintf("%s/%s/%dclients/%s", op, sizeName(size), clients, via)
					b.Run(name, func(b *testing.B) {
						var seq atomic.Int64
						do := func() error {
							i := seq.Add(1)
							switch {
							case op == "PUT" && via == "s3":
								req := c.newRequest("PUT", fmt.Sprintf("/bench/put-%d/%d", size, i%1000), nil, bytes.NewReader(data))
								c.sign(req, "UNSIGNED-PAYLOAD", time.Now())
								return send(c.hc, req)
							case op == "GET" && via == "s3":
								req := c.newRequest("GET", fmt.Sprintf("/bench/get-%d/%d", size, i%objects), nil, nil)
								c.sign(req, "UNSIGNED-PAYLOAD", time.Now())
								return send(c.hc, req)
							case op == "PUT" && via == "putfile":
								_, err := fc.PutFile(ctx, fmt.Sprintf("/bench/pput-%d-%d", size, i%1000), data, 0o644, client.PutOptions{Sync: true})
								return err
							case op == "PUT":
								return proctest.WriteFile(ctx, fc, fmt.Sprintf("/bench/cput-%d-%d", size, i%1000), data)
							default:
								f, err := fc.Open(ctx, fmt.Sprintf("/bench/get-%d/%d", size, i%objects))
								if err != nil {
									return err
								}
								err = drain(f)
								f.Close()
								return err
							}
						}
						b.SetBytes(int64(size))
						b.ReportAllocs()
						b.ResetTimer()
						cpu0, cpuOK := cpuTime(g.procs[0].Cmd.Process.Pid)
						srv0, srvOK := proctest.CPUTime(g.procs[0].Cmd.Process.Pid)
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
						if cpu1, ok := cpuTime(g.procs[0].Cmd.Process.Pid); ok && cpuOK {
							b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(per*clients), "cpu-us/op")
						}
						if srv1, ok := proctest.CPUTime(g.procs[0].Cmd.Process.Pid); ok && srvOK {
							b.ReportMetric(float64((srv1-srv0).Microseconds())/float64(per*clients), "srv-cpu-us/op")
						}
					})
				}
			}
		}
	}
}

// drainBufs are the buffers of drain.
var drainBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// drain reads r to its end 256 KiB at a time and drops the data.
func drain(r io.Reader) error {
	bp := drainBufs.Get().(*[]byte)
	defer drainBufs.Put(bp)
	for {
		_, err := r.Read(*bp)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// send does a request, reads the response body with drain and fails on a
// non-2xx status.
func send(hc *http.Client, req *http.Request) error {
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := drain(resp.Body); err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s", req.Method, req.URL.Path, resp.Status)
	}
	return nil
}

// cpuTime returns the CPU time (user and system) used so far by this
// process and by process pid (false where there is none).
func cpuTime(pid int) (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	d, ok := proctest.CPUTime(pid)
	return time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) + d, ok
}

// BenchmarkS3List measures ListObjectsV2 of a bucket of 5,000 objects
// written through the gateway (a flat bucket, and the same number of keys
// below 50 prefixes of 100), whole listings of 1,000-key pages, beside the
// client library listing the same directory with attributes
// (ReadDirPage with plus, 1,024 entries a page) in the same run:
//
//	go test -run '^$' -bench S3List -benchtime 20x ./test/s3
//
// It reports keys/s and the server's CPU per key. SLUICE_LIST_KEYS sets
// the number of keys.
func BenchmarkS3List(b *testing.B) {
	g := startGateway(b)
	fc := g.client()
	ctx := context.Background()
	c := newS3Client(g.endpoint)
	keys := 5000
	if v, err := strconv.Atoi(os.Getenv("SLUICE_LIST_KEYS")); err == nil && v > 0 {
		keys = v
	}
	for _, bucket := range []string{"flat", "nested"} {
		if resp, body := c.do(b, "PUT", "/"+bucket, nil, nil, nil); resp.StatusCode != 200 {
			b.Fatalf("create bucket: %s", body)
		}
		var wg sync.WaitGroup
		var failed atomic.Value
		for w := range 16 {
			wg.Go(func() {
				for i := w; i < keys; i += 16 {
					key := fmt.Sprintf("k%05d", i)
					if bucket == "nested" {
						key = fmt.Sprintf("p%02d/k%05d", i%50, i)
					}
					req := c.newRequest("PUT", "/"+bucket+"/"+key, nil, bytes.NewReader([]byte(key)))
					c.sign(req, "UNSIGNED-PAYLOAD", time.Now())
					if err := send(c.hc, req); err != nil {
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
	}
	report := func(b *testing.B, listed int, start time.Time, cpu0 time.Duration, cpuOK bool) {
		b.ReportMetric(float64(listed)/time.Since(start).Seconds(), "keys/s")
		if cpu1, ok := proctest.CPUTime(g.procs[0].Cmd.Process.Pid); ok && cpuOK {
			b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(listed), "server-cpu-us/key")
		}
	}
	for _, bucket := range []string{"flat", "nested"} {
		b.Run(bucket+"/s3", func(b *testing.B) {
			cpu0, cpuOK := proctest.CPUTime(g.procs[0].Cmd.Process.Pid)
			start, listed := time.Now(), 0
			for range b.N {
				q := url.Values{}
				n := 0
				for {
					r := c.list(b, bucket, q)
					n += len(r.Contents)
					if !r.IsTruncated {
						break
					}
					q.Set("continuation-token", r.NextContinuationToken)
				}
				if n != keys {
					b.Fatalf("listed %d keys, want %d", n, keys)
				}
				listed += n
			}
			report(b, listed, start, cpu0, cpuOK)
		})
		b.Run(bucket+"/client", func(b *testing.B) {
			cpu0, cpuOK := proctest.CPUTime(g.procs[0].Cmd.Process.Pid)
			start, listed := time.Now(), 0
			for range b.N {
				dirs := []string{"/" + bucket}
				n := 0
				for len(dirs) > 0 {
					d := dirs[0]
					dirs = dirs[1:]
					fi, err := fc.Stat(ctx, d)
					if err != nil {
						b.Fatal(err)
					}
					for cursor := ""; ; {
						page, err := fc.ReadDirPage(ctx, fi.Attr().Ino, cursor, 1024, true)
						if err != nil {
							b.Fatal(err)
						}
						for _, e := range page.Entries {
							switch {
							case e.Mode&syscall.S_IFMT == syscall.S_IFDIR && !strings.HasPrefix(e.Name, "."):
								dirs = append(dirs, d+"/"+e.Name)
							case e.Mode&syscall.S_IFMT == syscall.S_IFREG:
								n++
							}
						}
						if page.EOF || len(page.Entries) == 0 {
							break
						}
						cursor = page.Cursor
					}
				}
				if n != keys {
					b.Fatalf("listed %d files, want %d", n, keys)
				}
				listed += n
			}
			report(b, listed, start, cpu0, cpuOK)
		})
	}
}
