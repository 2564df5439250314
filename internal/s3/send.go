package s3

import (
	"context"
	"io"
	"sync"

	"github.com/sluice-fs/sluice/client"
)

// A GET sends its range in blocks read from the targets ahead of the
// response: while one block goes to the client the next ones are read,
// so reading and sending overlap instead of adding up.
const (
	// sendBlock is the size of one read. A range of at most one block is
	// read at once and sent with one write: smaller blocks overlap better
	// but cost more CPU per byte (256 KiB blocks cost a 1 MiB GET about a
	// third more CPU than one read, measured with 16 clients).
	sendBlock = 1 << 20
	// sendAhead bounds the blocks of one response read or waiting to be
	// sent (sendAhead*sendBlock bytes of buffers per GET).
	sendAhead = 2
	// smallSend: a range up to this size is read into a buffer of its
	// size, not a pooled block (which the GC empties every cycle).
	smallSend = 32 << 10
)

var sendBufs = sync.Pool{New: func() any { b := make([]byte, sendBlock); return &b }}

// sendBlockRead is one block of a range: read by its own goroutine, which
// closes done when n and err are final.
type sendBlockRead struct {
	buf  *[]byte
	want int // bytes asked for
	n    int
	err  error
	done chan struct{}
}

// sendRange writes length bytes of f at off to w. It returns the bytes
// written: fewer than length, with a nil error, if the file ended first.
// Every read it started has finished when it returns.
func sendRange(ctx context.Context, w io.Writer, f *client.File, off, length int64) (int64, error) {
	if length <= sendBlock {
		// One read, through the File's caches: a small file's bytes
		// came with the open.
		var buf []byte
		if length <= smallSend {
			buf = make([]byte, length)
		} else {
			bp := sendBufs.Get().(*[]byte)
			defer sendBufs.Put(bp)
			buf = (*bp)[:length]
		}
		n, err := f.ReadAtContext(ctx, buf, off)
		if err != nil && err != io.EOF {
			return 0, err
		}
		k, err := w.Write(buf[:n])
		return int64(k), err
	}
	rctx, cancel := context.WithCancel(ctx)
	var queue []*sendBlockRead
	defer func() {
		cancel()
		for _, b := range queue {
			<-b.done
			sendBufs.Put(b.buf)
		}
	}()
	next, end := off, off+length
	var sent int64
	for len(queue) > 0 || next < end {
		for len(queue) < sendAhead && next < end {
			b := &sendBlockRead{buf: sendBufs.Get().(*[]byte), want: int(min(sendBlock, end-next)), done: make(chan struct{})}
			go func(at int64) {
				defer close(b.done)
				b.n, b.err = f.ReadAtParallel(rctx, (*b.buf)[:b.want], at)
			}(next)
			queue = append(queue, b)
			next += int64(b.want)
		}
		b := queue[0]
		<-b.done
		queue = queue[1:]
		err := b.err
		if err == io.EOF {
			err = nil
		}
		if err == nil && b.n > 0 {
			var n int
			n, err = w.Write((*b.buf)[:b.n])
			sent += int64(n)
		}
		short := b.n < b.want
		sendBufs.Put(b.buf)
		if err != nil || short {
			return sent, err // short: the file ended (it shrank)
		}
	}
	return sent, nil
}
