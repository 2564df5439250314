package wire

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSendFileReplies: replies whose data is a range of a file
// (Response.DataFile) reach the client byte for byte over TCP, mixed on one
// connection with small replies and replies with data in memory; a range
// past the file's end is made up with zeros so the frames stay intact;
// every file is released once. In process, handlers are not offered it.
func TestSendFileReplies(t *testing.T) { transports(t, testSendFileReplies) }

func testSendFileReplies(t *testing.T, local bool) {
	content := make([]byte, 3<<20)
	r := rand.New(rand.NewPCG(7, 8))
	for i := range content {
		content[i] = byte(r.Uint32())
	}
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	var opened, released, viaFile atomic.Int64
	_, addr := startEchoOn(t, local, func(s *Server) {
		s.Handle(OpChunkRead, func(ctx context.Context, req *Request) (Response, error) {
			var m ChunkReadReq
			if err := Unmarshal(req.Body, &m); err != nil {
				return Response{}, err
			}
			if !req.SendFile {
				buf := make([]byte, m.Len)
				f, err := os.Open(path)
				if err != nil {
					return Response{}, err
				}
				n, _ := f.ReadAt(buf, int64(m.Off))
				f.Close()
				clear(buf[n:])
				return Response{Msg: &ChunkReadResp{ChunkLen: uint64(len(content))}, Data: buf}, nil
			}
			f, err := os.Open(path)
			if err != nil {
				return Response{}, err
			}
			opened.Add(1)
			viaFile.Add(1)
			return Response{
				Msg:      &ChunkReadResp{ChunkLen: uint64(len(content))},
				DataFile: &FileRange{F: f, Off: int64(m.Off), N: int(m.Len)},
				Release:  func() { released.Add(1); f.Close() },
			}, nil
		})
	})
	c := dial(t, addr)
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	fail := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for range 50 {
				if r.IntN(3) == 0 { // a small frame in between
					var a Attr
					if _, err := c.Call(context.Background(), OpLookup, &NameReq{Parent: 1, Name: "x"}, nil, &a, nil); err != nil || a.Ino != 2 {
						fail(err)
						return
					}
					continue
				}
				off := r.IntN(len(content) + 1<<20) // some past the end
				n := 1 + r.IntN(1<<20)
				want := make([]byte, n)
				if off < len(content) {
					copy(want, content[off:])
				}
				got := make([]byte, n)
				var resp ChunkReadResp
				k, err := c.Call(context.Background(), OpChunkRead, &ChunkReadReq{Off: uint64(off), Len: uint32(n)}, nil, &resp, got)
				if err != nil {
					fail(err)
					return
				}
				if k != n || !bytes.Equal(got, want) || resp.ChunkLen != uint64(len(content)) {
					fail(fmt.Errorf("read of %d at %d: got %d bytes, equal %v", n, off, k, bytes.Equal(got[:k], want[:k])))
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	if local && viaFile.Load() != 0 {
		t.Fatalf("in process, %d handlers were offered sendfile", viaFile.Load())
	}
	if !local && viaFile.Load() == 0 {
		t.Fatal("over TCP no handler was offered sendfile")
	}
	c.Close()
	// The writer releases a reply's file after sending it, maybe just
	// after the client read it.
	for i := 0; i < 500 && opened.Load() != released.Load(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if opened.Load() != released.Load() {
		t.Fatalf("%d files opened for replies, %d released", opened.Load(), released.Load())
	}
}
