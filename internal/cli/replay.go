package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/profile"
)

// replayStream is one recorded stream (an open file of a client): its
// reads and writes in order.
type replayStream struct {
	ino   uint64
	start int64
	ops   []profile.Record
	write bool
	bytes int64
}

// replayPlan picks the streams a replay runs: the recorded streams in the
// order they started, until they move limit bytes, with the bytes each
// file must hold (its span) for them.
func replayPlan(batches []profile.Batch, limit int64) ([]*replayStream, map[uint64]int64) {
	type key struct {
		client string
		handle uint32
	}
	streams := map[key]*replayStream{}
	span := map[uint64]int64{}
	for _, b := range batches {
		for _, r := range b.Records {
			switch r.Op {
			case profile.OpOpen:
				span[r.Ino] = max(span[r.Ino], r.Len)
				continue
			case profile.OpRead, profile.OpWrite:
			default:
				continue
			}
			if r.Flags&profile.FlagError != 0 || r.Len <= 0 || r.Off < 0 {
				continue
			}
			k := key{b.Client, r.Handle}
			s := streams[k]
			if s == nil {
				s = &replayStream{ino: r.Ino, start: r.Start}
				streams[k] = s
			}
			s.start = min(s.start, r.Start)
			s.ops = append(s.ops, r)
			n := r.Len
			if r.Op == profile.OpRead {
				n = max(r.N, 0)
			} else {
				s.write = true
			}
			s.bytes += n
			span[r.Ino] = max(span[r.Ino], r.Off+n)
		}
	}
	all := make([]*replayStream, 0, len(streams))
	for _, s := range streams {
		slices.SortStableFunc(s.ops, func(a, b profile.Record) int { return cmp.Compare(a.Start, b.Start) })
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b *replayStream) int { return cmp.Compare(a.start, b.start) })
	var out []*replayStream
	var moved, files int64
	need := map[uint64]int64{}
	for _, s := range all {
		if moved >= limit {
			break
		}
		if _, ok := need[s.ino]; !ok {
			if files+span[s.ino] > 2*limit {
				continue // a file too large to copy for the replay
			}
			files += span[s.ino]
			need[s.ino] = span[s.ino]
		}
		out = append(out, s)
		moved += s.bytes
	}
	return out, need
}

// replayCheck replays the recorded workload on scratch files laid out and
// read as from and to say, alternately twice each, and returns what each
// delivered.
func (e *Env) replayCheck(ctx context.Context, batches []profile.Batch, rep profile.Report, from, to CheckConfig, o AdviseOptions) (*CheckResult, error) {
	if o.CheckBytes <= 0 {
		o.CheckBytes = 256 << 20
	}
	if o.Scratch == "" {
		o.Scratch = "/.sluice-advise-check"
	}
	streams, files := replayPlan(batches, o.CheckBytes)
	if len(streams) == 0 {
		return nil, errs.New(errs.Invalid, "advise --check: the recording has no reads or writes to replay")
	}
	workers := int(math.Round(rep.DataInFlight))
	workers = min(max(workers, 1), 64)
	if err := e.Client.MkdirAll(ctx, o.Scratch, 0o700); err != nil {
		return nil, err
	}
	defer e.Client.RemoveAll(context.WithoutCancel(ctx), o.Scratch)
	res := &CheckResult{From: from, To: to, Streams: len(streams), Files: len(files), Workers: workers}
	for _, s := range streams {
		res.Bytes += s.bytes
	}
	var dirs [2]string
	var opens [2]replayOpen
	for i, cfg := range []CheckConfig{from, to} {
		dirs[i] = fmt.Sprintf("%s/%d", o.Scratch, i)
		if i == 1 && to.Layout == from.Layout {
			dirs[1] = dirs[0] // the same copies, read differently
		} else {
			if err := e.Client.Mkdir(ctx, dirs[i], 0o700); err != nil {
				return nil, err
			}
			if err := e.Client.SetLayout(ctx, dirs[i], clientLayout(cfg.Layout)); err != nil {
				return nil, err
			}
			if err := e.Client.SetPool(ctx, dirs[i], cfg.Layout.Pool); err != nil {
				return nil, err
			}
			if err := e.replayFiles(ctx, dirs[i], files); err != nil {
				return nil, err
			}
		}
		c := e.Client
		if cfg.ReadAhead != 0 {
			opts := e.Client.Options()
			opts.ReadAhead = int(cfg.ReadAhead)
			var err error
			if c, err = client.New(ctx, opts); err != nil {
				return nil, err
			}
			defer c.Close()
		}
		opens[i] = libraryOpen(ctx, c)
		if cfg.Mount {
			mp, unmount, err := e.mountOwn(ctx, c.Options(), cfg.WritebackCache)
			if err != nil {
				return nil, fmt.Errorf("advise --check: %w", err)
			}
			defer unmount()
			opens[i] = mountOpen(mp)
		}
	}
	var mbps [2]float64
	for round := range 4 {
		i := round % 2
		r, err := replayRun(opens[i], dirs[i], streams, workers)
		if err != nil {
			return nil, err
		}
		mbps[i] += r / 2
	}
	res.FromMBps, res.ToMBps = mbps[0], mbps[1]
	res.Measured = res.ToMBps / res.FromMBps
	return res, nil
}

// replayFiles writes the replay's copies of the files in dir.
func (e *Env) replayFiles(ctx context.Context, dir string, files map[uint64]int64) error {
	buf := make([]byte, 4<<20)
	fillRandom(buf, 7)
	var g errgroup.Group
	g.SetLimit(4)
	for ino, size := range files {
		g.Go(func() error { return writeSized(ctx, e.Client, fmt.Sprintf("%s/%d", dir, ino), size, buf) })
	}
	return g.Wait()
}

func writeSized(ctx context.Context, c *client.Client, p string, size int64, buf []byte) error {
	f, err := c.Create(ctx, p)
	if err != nil {
		return err
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf[:min(int64(len(buf)), size-off)], off); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// replayFile is a file a replay reads and writes: a client.File, or an
// os.File of a mount.
type replayFile interface {
	ReadAt(b []byte, off int64) (int, error)
	WriteAt(b []byte, off int64) (int, error)
	Close() error
}

// replayOpen opens a file of the file system (a path in it) for a replay,
// for writing too if write.
type replayOpen func(path string, write bool) (replayFile, error)

// libraryOpen opens files through c.
func libraryOpen(ctx context.Context, c *client.Client) replayOpen {
	return func(p string, write bool) (replayFile, error) {
		flag := client.O_RDONLY
		if write {
			flag = client.O_RDWR
		}
		return c.OpenFile(ctx, p, flag, 0)
	}
}

// mountOpen opens files through the mount on mp.
func mountOpen(mp string) replayOpen {
	return func(p string, write bool) (replayFile, error) {
		flag := os.O_RDONLY
		if write {
			flag = os.O_RDWR
		}
		return os.OpenFile(filepath.Join(mp, p), flag, 0)
	}
}

// replayRun replays streams on the copies in dir, opened with open,
// workers at a time, and returns the MB/s they moved.
func replayRun(open replayOpen, dir string, streams []*replayStream, workers int) (float64, error) {
	work := make(chan *replayStream)
	var moved atomic.Int64
	var g errgroup.Group
	start := time.Now()
	for range workers {
		// Each worker replays whole streams with its own buffer and goes
		// on past a failure; the first failure is the run's.
		g.Go(func() error {
			var buf []byte
			var first error
			fail := func(err error) {
				if first == nil {
					first = err
				}
			}
			for s := range work {
				f, err := open(fmt.Sprintf("%s/%d", dir, s.ino), s.write)
				if err != nil {
					fail(err)
					continue
				}
				for _, r := range s.ops {
					if int64(cap(buf)) < r.Len {
						buf = make([]byte, r.Len)
					}
					b := buf[:r.Len]
					var n int
					if r.Op == profile.OpWrite {
						n, err = f.WriteAt(b, r.Off)
					} else {
						n, err = f.ReadAt(b, r.Off)
						if err == io.EOF {
							err = nil
						}
					}
					moved.Add(int64(n))
					if err != nil {
						fail(err)
						break
					}
				}
				if err := f.Close(); err != nil {
					fail(err)
				}
			}
			return first
		})
	}
	for _, s := range streams {
		work <- s
	}
	close(work)
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return float64(moved.Load()) / time.Since(start).Seconds() / 1e6, nil
}
