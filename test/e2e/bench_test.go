package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// The benchmarks run Sluice (a real `sluice serve` process, reached through
// the client library over loopback) beside a baseline in the same run:
//
//	go test -run '^$' -bench . -benchtime 1x ./test/e2e          # data, 4 GiB
//	go test -run '^$' -bench Metadata -benchtime 20000x ./test/e2e
//
// SLUICE_BENCH_SIZE sets the sequential file size (default 4G).

// metaSystem is one place to run metadata operations.
type metaSystem struct {
	create func(i int) error
	stat   func(i int) error
	unlink func(i int) error
}

func BenchmarkMetadata(b *testing.B) {
	s := startServer(b, "")
	ctx := context.Background()
	const maxClients = 16
	var clients []*client.Client
	for range maxClients {
		clients = append(clients, s.client())
	}
	tmp := b.TempDir()
	var round atomic.Int64
	name := func(i int) string { return "f" + strconv.Itoa(i) }

	// fresh returns the operations of one system in a new, empty directory.
	fresh := func(b *testing.B, sys string, nClients int) metaSystem {
		r := round.Add(1)
		if sys == "local" {
			dir := filepath.Join(tmp, strconv.FormatInt(r, 10))
			if err := os.Mkdir(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			return metaSystem{
				create: func(i int) error {
					f, err := os.OpenFile(filepath.Join(dir, name(i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
					if err == nil {
						err = f.Close()
					}
					return err
				},
				stat:   func(i int) error { _, err := os.Stat(filepath.Join(dir, name(i))); return err },
				unlink: func(i int) error { return os.Remove(filepath.Join(dir, name(i))) },
			}
		}
		dir := fmt.Sprintf("/bench%d", r)
		if err := clients[0].Mkdir(ctx, dir, 0o755); err != nil {
			b.Fatal(err)
		}
		cl := func(i int) *client.Client { return clients[i%nClients] }
		return metaSystem{
			create: func(i int) error {
				f, err := cl(i).OpenFile(ctx, dir+"/"+name(i), client.O_CREATE|client.O_EXCL|client.O_WRONLY, 0o644)
				if err == nil {
					err = f.Close()
				}
				return err
			},
			stat:   func(i int) error { _, err := cl(i).Stat(ctx, dir+"/"+name(i)); return err },
			unlink: func(i int) error { return cl(i).Remove(ctx, dir+"/"+name(i)) },
		}
	}

	for _, op := range []string{"create", "stat", "unlink"} {
		for _, nClients := range []int{1, 16} {
			for _, sys := range []string{"local", "sluice"} {
				b.Run(fmt.Sprintf("%s/%s/clients=%d", op, sys, nClients), func(b *testing.B) {
					m := fresh(b, sys, nClients)
					fn := m.create
					if op != "create" {
						runParallel(b, 16, b.N, m.create) // setup, not timed
						fn = map[string]func(int) error{"stat": m.stat, "unlink": m.unlink}[op]
					}
					b.ReportAllocs()
					b.ResetTimer()
					runParallel(b, nClients, b.N, fn)
					b.StopTimer()
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
				})
			}
		}
	}
}

// runParallel runs fn(0..n-1) on workers goroutines and fails b on error.
func runParallel(b *testing.B, workers, n int, fn func(int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		b.Fatal(err)
	}
}

func benchSize(b *testing.B) int64 {
	if v := os.Getenv("SLUICE_BENCH_SIZE"); v != "" {
		n, err := parseSize(v)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	return 4 << 30
}

func parseSize(v string) (int64, error) {
	mult := int64(1)
	switch v[len(v)-1] {
	case 'K', 'k':
		mult = 1 << 10
	case 'M', 'm':
		mult = 1 << 20
	case 'G', 'g':
		mult = 1 << 30
	}
	if mult != 1 {
		v = v[:len(v)-1]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n * mult, err
}

const ioSize = 1 << 20

// BenchmarkSequential writes then reads one file of SLUICE_BENCH_SIZE with
// 1 MiB I/O: through Sluice (striped over 4 targets), through a raw
// loopback TCP stream (the network ceiling), and on a local file.
func BenchmarkSequential(b *testing.B) {
	size := benchSize(b)
	buf := make([]byte, ioSize)
	for i := range buf {
		buf[i] = byte(i*31 + 7)
	}

	b.Run("write/tcp", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			tcpStream(b, size, buf, true)
		}
	})
	b.Run("read/tcp", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			tcpStream(b, size, buf, false)
		}
	})

	local := filepath.Join(b.TempDir(), "seq")
	b.Run("write/local", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			f, err := os.Create(local)
			if err != nil {
				b.Fatal(err)
			}
			writeN(b, f, size, buf)
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("read/local", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			f, err := os.Open(local)
			if err != nil {
				b.Fatal(err)
			}
			readAll(b, f, size)
			f.Close()
		}
	})
	os.Remove(local)

	s := startServer(b, "")
	c := s.client()
	ctx := context.Background()
	b.Run("write/sluice", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			f, err := c.Create(ctx, "/seq")
			if err != nil {
				b.Fatal(err)
			}
			writeN(b, f, size, buf)
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read/sluice", func(b *testing.B) {
		b.SetBytes(size)
		defer serverCPU(b, s.proc.Cmd.Process.Pid)()
		for range b.N {
			f, err := c.Open(ctx, "/seq")
			if err != nil {
				b.Fatal(err)
			}
			readAll(b, f, size)
			f.Close()
		}
	})
	// Reads of 4 MiB (at least the read-ahead block: straight to the
	// targets) that start 4 KiB past a checksum block, as a model
	// loader's tensors or a reader after a header do.
	b.Run("read-unaligned/sluice", func(b *testing.B) {
		const shift = 4 << 10
		b.SetBytes(size - shift)
		defer serverCPU(b, s.proc.Cmd.Process.Pid)()
		for range b.N {
			readPieces(b, c, "/seq", size, 4<<20, shift)
		}
	})
}

// BenchmarkReadLayouts reads a file of one stripe (one chain) with 4 or
// 16 MiB stripes, as a model directory is laid out: in 1 MiB reads from 0
// (through the client's read-ahead window, whose blocks are the stripe)
// and in 4 MiB reads that start 4 KiB past a checksum block (a model
// loader's tensors). It reports the server's CPU per pass beside the
// rate: whole cached blocks go out unread (ADR 0030) only in ranges of at
// most 8 MiB that start and end on blocks, which the client cuts its
// reads into (splitAtBlocks).
func BenchmarkReadLayouts(b *testing.B) {
	size := benchSize(b)
	s := startServer(b, "")
	c := s.client()
	ctx := context.Background()
	buf := make([]byte, ioSize)
	for i := range buf {
		buf[i] = byte(i*31 + 7)
	}
	for _, stripe := range []int64{4 << 20, 16 << 20} {
		dir := fmt.Sprintf("/stripe%d", stripe>>20)
		if err := c.Mkdir(ctx, dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := c.SetLayout(ctx, dir, client.Layout{StripeCount: 1, StripeSize: stripe}); err != nil {
			b.Fatal(err)
		}
		f, err := c.Create(ctx, dir+"/f")
		if err != nil {
			b.Fatal(err)
		}
		writeN(b, f, size, buf)
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		for _, r := range []struct {
			name     string
			n, start int64
		}{{"1MiB-from-0", 1 << 20, 0}, {"4MiB-at-4KiB", 4 << 20, 4 << 10}} {
			b.Run(fmt.Sprintf("stripe%dMiB/%s", stripe>>20, r.name), func(b *testing.B) {
				b.SetBytes(size - r.start)
				defer serverCPU(b, s.proc.Cmd.Process.Pid)()
				for range b.N {
					readPieces(b, c, dir+"/f", size, r.n, r.start)
				}
			})
		}
	}
}

// writeN writes size bytes to w in writes of buf.
func writeN(b *testing.B, w io.Writer, size int64, buf []byte) {
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := w.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// readPieces opens path and reads it in reads of n bytes from start on.
func readPieces(b *testing.B, c *client.Client, path string, size, n, start int64) {
	f, err := c.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	p := make([]byte, n)
	for off := start; off < size; off += n {
		if _, err := f.ReadAt(p, off); err != nil && !(err == io.EOF && off+n > size) {
			b.Fatal(err)
		}
	}
}

// serverCPU returns a function that reports the CPU time process pid
// used per operation since serverCPU was called.
func serverCPU(b *testing.B, pid int) func() {
	t0, _ := proctest.CPUTime(pid)
	return func() {
		t1, _ := proctest.CPUTime(pid)
		b.ReportMetric(float64((t1-t0).Milliseconds())/float64(b.N), "server-cpu-ms/op")
	}
}

func readAll(b *testing.B, r io.Reader, size int64) {
	buf := make([]byte, ioSize)
	var total int64
	for {
		n, err := r.Read(buf)
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if total != size {
		b.Fatalf("read %d bytes, want %d", total, size)
	}
}

// tcpStream moves size bytes over a loopback TCP connection in 1 MiB
// writes: from this goroutine to a sink (write) or from a source (read).
func tcpStream(b *testing.B, size int64, buf []byte, write bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		if write {
			_, err = io.CopyBuffer(io.Discard, conn, make([]byte, ioSize))
		} else {
			for off := int64(0); off < size && err == nil; off += ioSize {
				_, err = conn.Write(buf)
			}
		}
		done <- err
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	if write {
		for off := int64(0); off < size; off += ioSize {
			if _, err := conn.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		conn.Close()
	} else {
		readAll(b, conn, size)
		conn.Close()
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
