package cabi

import (
	"context"
	"io"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// ReadReq is one read of a batch: len(Buf) bytes of Path at Off. Buf is
// the caller's memory; ReadBatch writes into it and nowhere else.
type ReadReq struct {
	Path string
	Off  int64
	Buf  []byte

	N   int   // bytes read: fewer than len(Buf) only at the end of the file
	Err error // this item's error
}

// WriteReq is one file of a write batch: Path is created (or truncated)
// and holds Data afterwards.
type WriteReq struct {
	Path string
	Data []byte

	Err error
}

// each runs fn(i) for i in [0, n) with at most inflight at once and
// returns when all have returned.
func each(n, inflight int, fn func(i int)) {
	if inflight <= 0 {
		inflight = DefaultInflight
	}
	var g errgroup.Group
	g.SetLimit(inflight)
	for i := range n {
		g.Go(func() error { fn(i); return nil })
	}
	g.Wait()
}

// failures counts the items that failed and returns the first one's error.
func failures[T any](items []T, errOf func(*T) error) (int, error) {
	n, first := 0, error(nil)
	for i := range items {
		if err := errOf(&items[i]); err != nil {
			if n == 0 {
				first = err
			}
			n++
		}
	}
	return n, first
}

// ReadBatch reads every request, at most inflight at once (default
// DefaultInflight), each straight into its buffer. Requests for the same
// path share one open. It returns the number of requests that failed and
// the first failure's error; each request has its own result. All reads
// have finished when it returns.
func (l *Lib) ReadBatch(h int64, reqs []ReadReq, inflight int) (int, error) {
	cn, err := l.conn(h)
	if err != nil {
		return 0, err
	}
	type opened struct {
		once sync.Once
		f    *client.File
		err  error
	}
	files := make(map[string]*opened, len(reqs))
	for _, r := range reqs {
		if files[r.Path] == nil {
			files[r.Path] = new(opened)
		}
	}
	each(len(reqs), inflight, func(i int) {
		r := &reqs[i]
		r.Err = cn.do("read", r.Path, int64(len(r.Buf)), func(ctx context.Context) error {
			o := files[r.Path]
			o.once.Do(func() { o.f, o.err = cn.c.Open(ctx, r.Path) })
			if o.err != nil {
				return o.err
			}
			var err error
			r.N, err = o.f.ReadAtParallel(ctx, r.Buf, r.Off)
			if err == io.EOF {
				err = nil
			}
			return err
		})
	})
	for _, o := range files {
		if o.f != nil {
			o.f.Release(context.Background(), false) // read-only: nothing to send
		}
	}
	return failures(reqs, func(r *ReadReq) error { return r.Err })
}

// WriteBatch writes every request's file (create or truncate, write, and
// with sync make durable, then close; a new file that fits inline in one
// request), at most inflight at once. It
// returns the number that failed and the first failure's error.
func (l *Lib) WriteBatch(h int64, reqs []WriteReq, inflight int, sync bool) (int, error) {
	cn, err := l.conn(h)
	if err != nil {
		return 0, err
	}
	each(len(reqs), inflight, func(i int) {
		r := &reqs[i]
		r.Err = cn.do("write", r.Path, int64(len(r.Data)), func(ctx context.Context) error {
			if int64(len(r.Data)) <= cn.c.InlineMax() {
				// A new small file: one request (client.PutFile). An
				// existing one is truncated and rewritten below, keeping
				// its inode, mode and owner.
				_, err := cn.c.PutFile(ctx, r.Path, r.Data, 0o666, client.PutOptions{NoReplace: true, Sync: sync})
				switch errs.CodeOf(err) {
				case errs.OK:
					return nil
				case errs.Exists, errs.TooBig, errs.NotSupported:
				default:
					return err
				}
			}
			f, err := cn.c.OpenFile(ctx, r.Path, client.O_WRONLY|client.O_CREATE|client.O_TRUNC, 0o666)
			if err != nil {
				return err
			}
			if _, err := f.WriteAtContext(ctx, r.Data, 0); err != nil {
				f.Release(ctx, false)
				return err
			}
			return f.Release(ctx, sync)
		})
	})
	return failures(reqs, func(r *WriteReq) error { return r.Err })
}
