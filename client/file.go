package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pause"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/profile"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Flags for OpenFile, the same values as package os.
const (
	O_RDONLY = os.O_RDONLY
	O_WRONLY = os.O_WRONLY
	O_RDWR   = os.O_RDWR
	O_APPEND = os.O_APPEND
	O_CREATE = os.O_CREATE
	O_EXCL   = os.O_EXCL
	O_TRUNC  = os.O_TRUNC
)

// maxExtentIO bounds one chunk read or write request (reads from a
// remote target: splitAtBlocks; a merge of extents: extents).
const maxExtentIO = 8 << 20

// File is an open Sluice file. Its methods are safe for concurrent use,
// but a File, like an *os.File, is meant for one stream of I/O at a time.
//
// The io-style methods (Read, Write, ReadAt, WriteAt, Seek, Close) use the
// context the file was opened with; the ...Context variants take one.
type File struct {
	c    *Client
	name string
	ino  uint64
	// layout is where the file's chunks are, as this File last learnt it;
	// a migration (ADR 0020) replaces it: targets then answer errs.Moved
	// and the File asks again (withLayout).
	// The time it was learnt (clock) bounds its use (Options.LayoutLease,
	// withLayout).
	layout atomic.Pointer[learntLayout]
	// pinned: the layout is not the file's (a restorer's, under the data
	// ID its restore lease gives it): never asked for again (withLayout).
	pinned bool
	flag   int
	ctx    context.Context

	mu   sync.Mutex
	size int64 // what this client knows of the size
	// truncs counts this File's truncates: a size learnt from a GetAttr
	// sent before a truncate must not raise size after it.
	truncs uint64
	// writes counts this File's writes (SizeToken).
	writes uint64
	offset int64 // for Read, Write and Seek
	closed bool

	// Write-back: buf holds dirty bytes for the file range starting at
	// bufOff; full buffers are flushed asynchronously, at most
	// WritesInFlight at a time.
	buf      []byte
	bufOff   int64
	inflight sync.WaitGroup
	flushing atomic.Int32 // flushes whose size commit has not finished
	// settled is the Client's settleSeq when f last settled data it held
	// (a flush's size commit, an inline write): set before the data
	// stops counting as pending (PendingSince).
	settled atomic.Uint64
	sem     chan struct{}
	werrMu  sync.Mutex
	werr    error                           // first failed flush; guarded by werrMu
	dirty   map[dirtyChunks]map[uint32]bool // slots written since the last Sync; guarded by werrMu
	flights []*flight                       // flushes whose data is not yet on the targets; guarded by werrMu

	// commit serializes size commits (its Mutex is held while one is in
	// flight). mu guards the rest: waiters are the flushes whose size is
	// not yet committed, and cut the file's newest cut generation this
	// File knows (cut.go).
	commit struct {
		sync.Mutex
		mu      sync.Mutex
		waiters []*commitWaiter
		cut     uint64
	}

	ra     readAhead
	icache *inlineCache // guarded by mu
	// sizeFresh: size is as the open found it, and no read has reached
	// past it since: the first read that does trusts it instead of asking
	// whether the file grew (close-to-open; Seen sets it again).
	// Guarded by mu.
	sizeFresh bool
	tier      tierRead // reads of a released file (tier.go)

	// dmu guards direct: the chunks' files this File reads directly
	// (direct.go).
	dmu        sync.Mutex
	direct     map[directKey]*directFile
	directSeen map[directKey]bool // chunks read before (directMinChunk)
	// openSize is the file's size when it was (re)opened: readDirect's
	// guess of a chunk's size, read without mu (which some reads hold).
	openSize atomic.Int64

	// home is where the file's bytes live as this File last learnt it (a
	// dataHome; inline.go).
	home atomic.Uint64

	stg *stagedFile // under the absorb policy (stage.go); guarded by mu

	handle uint32 // the File's number in the profiler's records (profile.go)

	own ownChain // the file's state through the File's own changes (ownattr.go)
}

// Create creates or truncates the file at p (like os.Create).
func (c *Client) Create(ctx context.Context, p string) (*File, error) {
	return c.OpenFile(ctx, p, O_RDWR|O_CREATE|O_TRUNC, 0o666)
}

// Open opens the file at p for reading.
func (c *Client) Open(ctx context.Context, p string) (*File, error) {
	return c.OpenFile(ctx, p, O_RDONLY, 0)
}

// OpenFile opens p with os-style flags. With O_CREATE the file is created
// with perm if it does not exist (O_EXCL: it must not exist).
func (c *Client) OpenFile(ctx context.Context, p string, flag int, perm fs.FileMode) (*File, error) {
	var a *wire.Attr
	var dir uint64
	if flag&O_CREATE != 0 {
		var name string
		var err error
		dir, name, err = c.nameParent(ctx, p)
		if err != nil {
			return nil, opErr("open", p, err)
		}
		req := &wire.CreateReq{Parent: dir, Name: name, Mode: syscall.S_IFREG | permBits(perm), Cred: c.cred(), Exclusive: flag&O_EXCL != 0}
		tok := c.stagedToken()
		var r wire.EntryResp
		if err := c.metaCall(ctx, wire.OpCreate, req, &r); err == nil {
			a = &r.Attr
			// An existing file may hold data this client staged and has not
			// drained: its size counts (O_TRUNC below must cut it).
			c.overlayStagedSince(a, tok)
			// And it may have been cut by another client: its first
			// commit must not be refused for that (cut.go).
			c.cuts.learn(a.Ino, r.Cut) // 0 (new, or an older service): nothing
		} else {
			if errs.CodeOf(err) != errs.Exists || flag&O_EXCL != 0 {
				return nil, opErr("open", p, err)
			}
			// The name exists but is not a regular file: say what it is.
			if a, err = c.resolve(ctx, p, true); err != nil {
				return nil, opErr("open", p, err)
			}
		}
	} else if flag&(O_WRONLY|O_RDWR) == 0 && c.opts.ReadAhead > 0 {
		// A reader: a small file's bytes come with its attributes.
		f, _, _, err := c.OpenRead(ctx, p, "")
		return f, err
	} else {
		// A writer: the file's cut generation comes with its attributes
		// (OpResolveRead), so that its first commit is not refused for
		// a cut this client has not seen (cut.go).
		tok := c.stagedToken()
		r, err := c.resolveRead(ctx, p, "", true)
		if err != nil {
			return nil, opErr("open", p, err)
		}
		c.overlayStagedSince(&r.Attr, tok)
		a = &r.Attr
		c.cuts.learn(r.Attr.Ino, r.Cut) // 0 (an older service): nothing
	}
	switch a.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
	case syscall.S_IFDIR:
		return nil, opErr("open", p, errs.ErrIsDir)
	default:
		return nil, opErr("open", p, errs.New(errs.Invalid, "client: %s is not a regular file", p))
	}
	f := &File{
		c: c, name: p, ino: a.Ino, flag: flag, ctx: ctx,
		size: int64(a.Size), sem: make(chan struct{}, c.opts.WritesInFlight),
		dirty: make(map[dirtyChunks]map[uint32]bool),
	}
	f.setLayout(a.Layout)
	f.openSize.Store(int64(a.Size))
	f.home.Store(uint64(homeOf(a)))
	if flag&O_WRONLY == 0 {
		c.noteRead(a.Ino, a.Atime)
	}
	if flag&O_TRUNC != 0 && flag&(O_WRONLY|O_RDWR) != 0 && a.Size > 0 {
		if err := f.Truncate(ctx, 0); err != nil {
			return nil, err
		}
	}
	if err := c.stageOpen(ctx, f, dir, true); err != nil {
		return nil, err
	}
	f.recordOpen()
	return f, nil
}

// Name returns the path the file was opened with.
func (f *File) Name() string { return f.name }

// Ino returns the file's inode number.
func (f *File) Ino() uint64 { return f.ino }

// Layout returns the file's layout.
func (f *File) Layout() Layout { return layoutFrom(f.lay()) }

// lay returns the file's layout as this File knows it.
func (f *File) lay() placement.Layout { return f.layout.Load().Layout }

// learntLayout is a layout and when a File learnt it (clock).
type learntLayout struct {
	placement.Layout
	at int64
}

// setLayout takes l as the file's layout, learnt from the metadata
// service now.
func (f *File) setLayout(l placement.Layout) { f.setLayoutAt(l, clock()) }

// setLayoutAt takes l as the file's layout, learnt from a request sent at
// at (clock).
func (f *File) setLayoutAt(l placement.Layout, at int64) {
	f.layout.Store(&learntLayout{l, at})
}

// DefaultLayoutLease is the default of Options.LayoutLease.
const DefaultLayoutLease = time.Minute

// clockBase and clock give a monotonic time in nanoseconds (layout
// leases).
var clockBase = time.Now()

func clock() int64 { return int64(time.Since(clockBase)) }

// fetchLayout asks the metadata service for the file's layout and
// returns it with the time its request went out (clock). A file found
// released is restored first when write is set (its bytes are in the
// tier only); a read gets errNowReleased.
func (f *File) fetchLayout(ctx context.Context, write bool) (l placement.Layout, at int64, err error) {
	at = clock()
	l, released, err := f.c.layoutOf(ctx, f.ino)
	if err != nil || !released {
		return l, at, err
	}
	if !write {
		return l, at, errNowReleased
	}
	if err := f.c.restore(ctx, f.ino); err != nil {
		return l, at, err
	}
	at = clock()
	l, _, err = f.c.layoutOf(ctx, f.ino)
	return l, at, err
}

// dirtyChunks names the chunks of one chain under one data ID: a File
// whose layout changed may have written under the old one.
type dirtyChunks struct {
	chain placement.ChainID
	data  uint64
}

// withLayout runs fn with the file's layout. When a target answers that
// the chunks moved (a migration or a release froze or removed them), it
// asks the metadata service for the layout and runs fn again: at once with
// a new layout, after a pause while the layout is still the old one (a
// migration or a release has not committed or given up yet), until ctx
// ends. A file found released (ADR 0023) is restored first when write is
// set (its bytes are in the tier only); a read gets errNowReleased.
//
// A layout older than the lease (Options.LayoutLease) is asked for again
// before fn runs: the targets forget a removed chunk's fence a grace
// after the removal (ADR 0023, addendum), and a request under the layout
// that named the chunk would then write a chunk nobody reads, or read a
// hole.
func (f *File) withLayout(ctx context.Context, write bool, fn func(l placement.Layout) error) error {
	wait := 5 * time.Millisecond
	if !f.pinned && clock()-f.layout.Load().at > int64(f.c.opts.LayoutLease) {
		l, at, err := f.fetchLayout(ctx, write)
		if err != nil {
			return err
		}
		f.setLayoutAt(l, at)
	}
	for {
		l := f.lay()
		err := fn(l)
		if errs.CodeOf(err) != errs.Moved {
			return err
		}
		if err := f.awaitMoved(ctx, write, l, err, &wait); err != nil {
			return err
		}
	}
}

// awaitMoved is what a request under layout l that was answered moved
// (the error moved) waits for before it goes again: the file's layout,
// learnt again, names other chunks (the migration committed), or, if it
// still names l's, a pause (the migration may have been aborted and the
// chunks thawed, or still run). It returns the layout's error, or moved
// if ctx ends first. wait is the pause, which grows.
func (f *File) awaitMoved(ctx context.Context, write bool, l placement.Layout, moved error, wait *time.Duration) error {
	nl, at, lerr := f.fetchLayout(ctx, write)
	switch {
	case lerr != nil:
		// The layout's error, not Moved's: its code is the answer (the
		// file gone, the tier unreachable).
		return lerr
	case sameChunks(nl, l):
		f.setLayoutAt(l, at)
		if pause.For(ctx, *wait) != nil {
			return moved
		}
		*wait = min(2**wait, 200*time.Millisecond)
		return nil
	}
	f.setLayoutAt(nl, at)
	return nil
}

// errNowReleased: a read found that the file was released since the File
// learnt its layout (readChunks then reads from the tier).
var errNowReleased = errs.New(errs.Moved, "client: the file was released to the object tier")

// sameChunks reports whether two layouts name the same chunks.
func sameChunks(a, b placement.Layout) bool {
	return a.Data == b.Data && a.StripeSize == b.StripeSize && slices.Equal(a.Chains, b.Chains) && slices.Equal(a.Comps, b.Comps)
}

func (f *File) writable() bool { return f.flag&(O_WRONLY|O_RDWR) != 0 }

// Write writes at the file offset (at the end with O_APPEND).
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	off := f.offset
	if f.flag&O_APPEND != 0 {
		off = max(f.size, f.bufEndLocked())
	}
	f.mu.Unlock()
	n, err := f.WriteAtContext(f.ctx, p, off)
	f.mu.Lock()
	f.offset = off + int64(n)
	f.mu.Unlock()
	return n, err
}

// WriteAt writes p at off.
func (f *File) WriteAt(p []byte, off int64) (int, error) { return f.WriteAtContext(f.ctx, p, off) }

func (f *File) bufEndLocked() int64 { return f.bufOff + int64(len(f.buf)) }

// WriteAtContext writes p at off through the write-back buffer.
func (f *File) WriteAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	return f.recorded(ctx, profile.OpWrite, off, len(p), func(ctx context.Context) (int, error) { return f.writeAt(ctx, p, off) })
}

func (f *File) writeAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, opErr("write", f.name, errs.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, opErr("write", f.name, fs.ErrClosed)
	}
	if !f.writable() {
		return 0, opErr("write", f.name, errs.New(errs.Permission, "client: file not open for writing"))
	}
	if err := f.writeErr(); err != nil {
		return 0, opErr("write", f.name, err)
	}
	if dataHome(f.home.Load()).released() {
		// The metadata service refuses writes to a released file:
		// restore it first (ADR 0016).
		if err := f.restoreBeforeWriteLocked(ctx, &wire.Attr{}); err != nil {
			return 0, opErr("write", f.name, err)
		}
	}
	f.dropCaches()
	f.writes++
	if f.stg != nil {
		n, err := f.stg.write(ctx, f.ino, p, off, f.size)
		f.size = max(f.size, off+int64(n))
		return n, opErr("write", f.name, err)
	}
	written := 0
	for len(p) > 0 {
		if len(f.buf) > 0 && off != f.bufEndLocked() {
			f.flushLocked(ctx)
		}
		if f.buf == nil {
			f.buf = wire.GetBuf(f.c.opts.WriteBuffer)[:0]
			f.bufOff = off
		}
		n := min(len(p), cap(f.buf)-len(f.buf))
		f.buf = append(f.buf, p[:n]...)
		p, off, written = p[n:], off+int64(n), written+n
		if len(f.buf) == cap(f.buf) {
			f.flushLocked(ctx)
		}
	}
	f.size = max(f.size, off)
	return written, nil
}

func (f *File) writeErr() error {
	f.werrMu.Lock()
	defer f.werrMu.Unlock()
	return f.werr
}

// setWriteErr records the first failed flush's error, which the next
// Write, Sync or Close reports.
func (f *File) setWriteErr(err error) {
	f.werrMu.Lock()
	if f.werr == nil {
		f.werr = err
	}
	f.werrMu.Unlock()
}

// A flight is a background flush of the file range [off, end) until its
// size is committed: done is closed then (or when it failed). landed is
// closed once its data first reached the targets; while it stays there
// (not being written again after a refused commit, cut.go) a later flush
// that covers the whole range may take its place instead of waiting for
// its commit (superseded).
type flight struct {
	off, end int64
	done     chan struct{}
	landed   chan struct{}
	// Guarded by werrMu: onTargets says the data is on the targets and not
	// being written again; superseded that a later flush covering the whole
	// range went ahead, so this one is never written again.
	onTargets, superseded bool
}

// A wait is what a new flush waits for of an earlier flight: its data to
// land (cover: the new flush covers its whole range), else its end.
type wait struct {
	fl    *flight
	cover bool
}

// startFlight registers a flush of [off, end) and returns the flights it
// overlaps, which must land before it is sent: two flushes of the same
// bytes in flight at once could reach a target in either order, and the
// older data would then replace the newer.
func (f *File) startFlight(off, end int64) (*flight, []wait) {
	f.werrMu.Lock()
	defer f.werrMu.Unlock()
	var before []wait
	for _, o := range f.flights {
		if o.off < end && off < o.end {
			before = append(before, wait{fl: o, cover: off <= o.off && o.end <= end})
		}
	}
	fl := &flight{off: off, end: end, done: make(chan struct{}), landed: make(chan struct{})}
	f.flights = append(f.flights, fl)
	return fl, before
}

// waitFlights waits for what a new flush must wait for of the earlier
// flights ws: the data of one it covers whole to land (it then supersedes
// it: that one's data is never written again), the end of any other.
func (f *File) waitFlights(ws []wait) {
	for _, w := range ws {
		if w.cover {
			<-w.fl.landed
			f.werrMu.Lock()
			ok := w.fl.onTargets
			if ok {
				w.fl.superseded = true
			}
			f.werrMu.Unlock()
			if ok {
				continue
			}
		}
		<-w.fl.done // each earlier flight holds its own slot, so it finishes
	}
}

// setLanded records that fl's data is on the targets.
func (f *File) setLanded(fl *flight) {
	f.werrMu.Lock()
	defer f.werrMu.Unlock()
	fl.onTargets = true
	select {
	case <-fl.landed:
	default:
		close(fl.landed)
	}
}

// rewriting reports whether fl's data, whose commit a cut refused, is to
// be written again: not if a later flush superseded it. Then fl counts as
// not on the targets until setLanded, so no later flush supersedes it
// meanwhile.
func (f *File) rewriting(fl *flight) bool {
	f.werrMu.Lock()
	defer f.werrMu.Unlock()
	if fl.superseded {
		return false
	}
	fl.onTargets = false
	return true
}

// endFlight marks fl as ended (committed, or failed).
func (f *File) endFlight(fl *flight) {
	f.werrMu.Lock()
	defer f.werrMu.Unlock()
	for i, o := range f.flights {
		if o == fl {
			f.flights = append(f.flights[:i], f.flights[i+1:]...)
			break
		}
	}
	select {
	case <-fl.landed:
	default:
		close(fl.landed)
	}
	close(fl.done)
}

// flushLocked hands the write buffer to a background flush. f.mu is held.
// Flushes of disjoint ranges run in parallel; a flush that overlaps one
// still in flight waits for it first, so the targets apply overlapping
// writes in the order the application made them.
func (f *File) flushLocked(ctx context.Context) {
	if len(f.buf) == 0 {
		return
	}
	buf, off := f.buf, f.bufOff
	f.buf = nil
	f.sem <- struct{}{} // released by the flush once its data is sent
	f.inflight.Add(1)
	f.flushing.Add(1) // until the size is committed too
	fl, before := f.startFlight(off, off+int64(len(buf)))
	// The flush outlives the call that started it; its errors are
	// reported by the next Write, Sync or Close.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.c.opts.FlushTimeout)
	go func() {
		defer cancel()
		defer f.inflight.Done()
		defer f.endFlushing()
		f.waitFlights(before)
		err := f.writeCommitted(fctx, fl, off, buf, func() { <-f.sem })
		f.endFlight(fl)
		wire.PutBuf(buf)
		if err != nil {
			f.setWriteErr(err)
		}
	}()
}

// writeCommitted writes data at off and commits the size it reaches,
// under the cut generation the File knew before the data went: when a
// truncate by another client cut the file since (the commit is refused),
// it waits for that cut to end and writes the data again (cut.go), unless
// a later flush of the whole range superseded it. sent, if not nil, runs
// once when the data first reached the targets, before the commit: the
// flush frees its slot for the next flush there. The caller's flight fl
// stays registered until it returns, so no later overlapping write can
// land between a first write of data and its rewrite (a later flush of
// the whole range goes ahead once the data landed, and then none is
// written again).
func (f *File) writeCommitted(ctx context.Context, fl *flight, off int64, data []byte, sent func()) error {
	for {
		cut := f.cutKnown()
		chunked, err := f.writeData(ctx, off, data)
		if sent != nil {
			sent()
			sent = nil
		}
		// (Inline writes recorded the size with the data.)
		if err != nil || !chunked {
			return err
		}
		f.setLanded(fl)
		if err = f.commitSize(ctx, off+int64(len(data)), cut); !errors.Is(err, errCutRefused) {
			return err
		}
		if !f.rewriting(fl) {
			return nil // the later flush's data and commit stand for it
		}
		if err = f.awaitCut(ctx); err != nil {
			return err
		}
	}
}

// commitSize records in the metadata that the file's data reaches end,
// written while cut was the newest cut generation the File knew (errCutRefused
// when a cut has begun since: the data must be written again).
// Concurrent flushes coalesce: one commit is in flight per file, and it
// carries the largest end of the flushes waiting under the File's newest
// generation; a flush that such a commit covered returns at once. Ends
// are never remembered past their commit, so a truncate in between cannot
// be undone by an old, larger end.
func (f *File) commitSize(ctx context.Context, end int64, cut uint64) error {
	_, err := f.commitWith(end, cut, func(c wire.CommitWriteReq, r *wire.CommitResp) error {
		return f.c.metaCall(ctx, wire.OpCommitWrite, &c, r)
	})
	return err
}

// A commitWaiter is a flush waiting for its size commit: the end its data
// reaches, and the cut generation known before the data was written.
type commitWaiter struct {
	end    int64
	cut    uint64
	done   bool // a commit covered it
	failed bool // its own commit failed: a later commit carries its end, under its generation only
}

// commitWith commits the size for a flush whose data reaches end, written
// under cut generation cut, through call, with the ends of other flushes
// waiting under the same generation, and returns the attributes after it
// (zero when another flush's commit covered this one).
func (f *File) commitWith(end int64, cut uint64, call func(wire.CommitWriteReq, *wire.CommitResp) error) (wire.Attr, error) {
	w := &commitWaiter{end: end, cut: cut}
	f.commit.mu.Lock()
	f.commit.waiters = append(f.commit.waiters, w)
	f.commit.mu.Unlock()

	f.commit.Lock() // one commit in flight
	defer f.commit.Unlock()
	for {
		f.commit.mu.Lock()
		if w.done {
			f.commit.mu.Unlock()
			return wire.Attr{}, nil
		}
		gen := max(f.commit.cut, f.c.cuts.get(f.ino))
		f.commit.cut = gen
		if w.cut != gen {
			// A cut began after this flush's data was written.
			f.dropWaiterLocked(w)
			f.commit.mu.Unlock()
			return wire.Attr{}, errCutRefused
		}
		// A failed flush of an older generation drops out (cut since:
		// its data may be gone); those under gen go in this commit.
		f.commit.waiters = slices.DeleteFunc(f.commit.waiters, func(o *commitWaiter) bool {
			return o.failed && o.cut != gen
		})
		var want int64
		var batch []*commitWaiter
		for _, o := range f.commit.waiters {
			if o.cut == gen {
				want = max(want, o.end)
				batch = append(batch, o)
			}
		}
		f.commit.mu.Unlock()
		r, err := f.sendCommit(want, gen, call)
		f.commit.mu.Lock()
		switch {
		case err != nil:
			// The flushes waiting send their own commits, which carry
			// this end too (the data is on the targets; the error is
			// the flush's all the same).
			w.failed = true
			f.commit.mu.Unlock()
			return wire.Attr{}, err
		case r.Refused:
			f.learnCutLocked(r.Cut)
			f.commit.mu.Unlock()
			continue // this flush, and the batch, learn it above
		}
		for _, o := range batch {
			o.done = true
		}
		f.commit.waiters = slices.DeleteFunc(f.commit.waiters, func(o *commitWaiter) bool { return o.done })
		f.commit.mu.Unlock()
		return r.Attr, nil
	}
}

// dropWaiterLocked removes w from the waiting flushes. f.commit.mu is held.
func (f *File) dropWaiterLocked(w *commitWaiter) {
	if i := slices.Index(f.commit.waiters, w); i >= 0 {
		f.commit.waiters = slices.Delete(f.commit.waiters, i, i+1)
	}
}

// sendCommit sends, through call, the commit of the file's size up to
// want under cut generation cut, and records the outcome in the
// own-change chain. f.commit is held.
func (f *File) sendCommit(want int64, cut uint64, call func(wire.CommitWriteReq, *wire.CommitResp) error) (wire.CommitResp, error) {
	var r wire.CommitResp
	ifMtime, ifSize := f.own.ifState()
	cutIf := !f.c.noCutGen.Load()
	err := call(wire.CommitWriteReq{Ino: f.ino, End: uint64(want), Mtime: time.Now().UnixNano(), IfMtime: ifMtime, IfSize: ifSize, CutIf: cutIf, Cut: cut}, &r)
	switch {
	case err == nil && cutIf && !r.Known:
		// A service from before 2026-12-05: the commit applied, without
		// the condition.
		f.c.noCutGen.Store(true)
		f.own.answer(ifMtime, &r.Attr)
	case err == nil && r.Refused:
		f.own.brk() // another client cut the file
	case err == nil:
		f.own.answer(ifMtime, &r.Attr)
	case errs.CodeOf(err) == errs.NotSupported:
		// nothing was applied
	default:
		f.own.brk() // it may have been applied
	}
	return r, err
}

// cutChunks truncates each chunk of the file to its length in a file of
// size bytes (creating missing ones), on every slot at once.
func (f *File) cutChunks(ctx context.Context, size int64) error {
	return f.withLayout(ctx, true, func(l placement.Layout) error { return f.cutChunksIn(ctx, l, size) })
}

// errCutFrozen: a chunk the cut truncates is frozen for a migration
// (errs.Moved). A truncate does not hold its cut while it waits for the
// migration, which may stay frozen for longer than a cut may be held
// (wire.CutTimeout): it ends the cut, waits a while (awaitMoved) and
// begins the round again, as often as it takes (Truncate).
var errCutFrozen = errs.New(errs.Busy, "client: the file's chunks are frozen for a migration")

// cutChunksHeld is cutChunks under a held cut: a frozen chunk answers
// errCutFrozen at once, with the layout it was frozen under.
func (f *File) cutChunksHeld(ctx context.Context, size int64) (placement.Layout, error) {
	var frozen placement.Layout
	err := f.withLayout(ctx, true, func(l placement.Layout) error {
		err := f.cutChunksIn(ctx, l, size)
		if errs.CodeOf(err) == errs.Moved {
			frozen = l
			return errCutFrozen
		}
		return err
	})
	return frozen, err
}

// cutChunksIn is cutChunks under layout l.
func (f *File) cutChunksIn(ctx context.Context, l placement.Layout, size int64) error {
	g, gctx := errgroup.WithContext(ctx)
	data := l.DataID(f.ino)
	for slot, ch := range l.Chains {
		csize := uint64(l.ChunkSize(slot, size))
		g.Go(func() error {
			_, err := f.c.chunkCall(gctx, chunkReq{chain: ch, write: true, op: wire.OpChunkTruncate,
				msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
					return &wire.ChunkTruncateReq{ChunkRef: wire.ChunkRef{Target: t, ChainRef: ref, Ino: data, Slot: uint32(slot)}, Size: csize, Qos: f.c.qos}
				}})
			return err
		})
	}
	return g.Wait()
}

// extents returns the chunk I/Os for a file range: the layout's extents,
// with consecutive pieces of one chunk merged up to maxExtentIO.
func extents(l placement.Layout, off, n int64) []placement.Extent {
	ext := l.Split(off, n)
	out := ext[:0]
	for _, e := range ext {
		if k := len(out) - 1; k >= 0 && out[k].Slot == e.Slot &&
			out[k].ChunkOff+out[k].Len == e.ChunkOff && out[k].FileOff+out[k].Len == e.FileOff &&
			out[k].Len+e.Len <= maxExtentIO {
			out[k].Len += e.Len
			continue
		}
		out = append(out, e)
	}
	return out
}

// unreadMinBlocks is the least number of whole checksum blocks between an
// extent's partial edge blocks for which splitAtBlocks splits it.
const unreadMinBlocks = 4

// splitAtBlocks splits each extent whose chunk range starts or ends inside
// a checksum block (64 KiB), around at least unreadMinBlocks whole blocks,
// into its partial edge blocks and the whole blocks between, and cuts
// whole blocks longer than maxExtentIO into pieces of that size. A target
// sends a cached range unread only when it starts on a block, ends on one
// (or at the chunk's end) and spans at most 8 MiB (chunk.Store's batch),
// and reads, checks and copies any other range whole (ADR 0030): split,
// only the edges (less than two blocks) are copied, at the price of up to
// two more small requests, read in parallel with the rest.
func splitAtBlocks(ext []placement.Extent) []placement.Extent {
	const b = checksum.BlockSize
	var out []placement.Extent
	for i, e := range ext {
		start, end := e.ChunkOff, e.ChunkOff+e.Len
		mid0, mid1 := (start+b-1)/b*b, end/b*b
		edges := start != mid0 || end != mid1
		if (edges && mid1-mid0 < unreadMinBlocks*b) || (!edges && e.Len <= maxExtentIO) {
			if out != nil {
				out = append(out, e)
			}
			continue
		}
		if out == nil {
			out = append(make([]placement.Extent, 0, len(ext)+2), ext[:i]...)
		}
		piece := func(from, to int64) {
			if to > from {
				out = append(out, placement.Extent{Slot: e.Slot, Chain: e.Chain, FileOff: e.FileOff + from - start, ChunkOff: from, Len: to - from})
			}
		}
		piece(start, mid0)
		for at := mid0; at < mid1; at += maxExtentIO {
			piece(at, min(at+maxExtentIO, mid1))
		}
		piece(mid1, end)
	}
	if out == nil {
		return ext
	}
	return out
}

// writeChunks sends data for the file range at off to the targets, all
// extents in parallel.
func (f *File) writeChunks(ctx context.Context, off int64, data []byte) error {
	return f.withLayout(ctx, true, func(l placement.Layout) error {
		g, ctx := errgroup.WithContext(ctx)
		g.SetLimit(32)
		id := l.DataID(f.ino)
		for _, e := range extents(l, off, int64(len(data))) {
			piece := data[e.FileOff-off : e.FileOff-off+e.Len]
			g.Go(func() error {
				_, err := f.c.chunkCall(ctx, chunkReq{chain: e.Chain, write: true, op: wire.OpChunkWrite, data: [][]byte{piece},
					msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
						return &wire.ChunkWriteReq{ChunkRef: wire.ChunkRef{Target: t, ChainRef: ref, Ino: id, Slot: uint32(e.Slot)}, Off: uint64(e.ChunkOff), Qos: f.c.qos}
					}})
				if err != nil {
					return fmt.Errorf("write %s at %d (chain %d, slot %d): %w", f.name, e.FileOff, e.Chain, e.Slot, err)
				}
				f.werrMu.Lock()
				k := dirtyChunks{e.Chain, id}
				slots := f.dirty[k]
				if slots == nil {
					slots = make(map[uint32]bool)
					f.dirty[k] = slots
				}
				slots[uint32(e.Slot)] = true
				f.werrMu.Unlock()
				return nil
			})
		}
		return g.Wait()
	})
}

// waitFlushesLocked sends the buffer and waits for every flush in flight.
// f.mu is held (flushes never take it).
func (f *File) waitFlushesLocked(ctx context.Context) error {
	if f.stg != nil {
		return f.stg.seal(ctx, f.size) // durable in the staging area
	}
	f.flushLocked(ctx)
	f.inflight.Wait()
	return f.writeErr()
}

// Sync makes everything written so far durable on the targets and the
// file's size durable in the metadata.
func (f *File) Sync() error { return f.SyncContext(f.ctx) }

// SyncContext is Sync with a context.
func (f *File) SyncContext(ctx context.Context) error {
	_, err := f.recorded(ctx, profile.OpSync, 0, 0, func(ctx context.Context) (int, error) { return 0, f.sync(ctx) })
	return err
}

func (f *File) sync(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return opErr("sync", f.name, fs.ErrClosed)
	}
	return opErr("sync", f.name, f.syncLocked(ctx))
}

func (f *File) syncLocked(ctx context.Context) error {
	if err := f.waitFlushesLocked(ctx); err != nil {
		return err
	}
	if f.stg != nil {
		return nil // staged: the drainer syncs it on the targets
	}
	f.werrMu.Lock()
	dirty := f.dirty
	f.dirty = make(map[dirtyChunks]map[uint32]bool)
	f.werrMu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	for k, slots := range dirty {
		var list []uint32
		for s := range slots {
			list = append(list, s)
		}
		// Chunks a migration moved away sync as done: the migrator
		// synced their copies before it committed.
		g.Go(func() error {
			_, err := f.c.chunkCall(gctx, chunkReq{chain: k.chain, write: true, op: wire.OpChunkSync,
				msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
					return &wire.ChunkSyncReq{ChunkSetReq: wire.ChunkSetReq{Target: t, ChainRef: ref, Ino: k.data, Slots: list}, Qos: f.c.qos}
				}})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		// Keep the slots dirty so that a retried Sync syncs them again.
		f.werrMu.Lock()
		for t, slots := range dirty {
			for s := range slots {
				if f.dirty[t] == nil {
					f.dirty[t] = make(map[uint32]bool)
				}
				f.dirty[t][s] = true
			}
		}
		f.werrMu.Unlock()
		return err
	}
	// The size commits (and the create) may wait for the metadata
	// service's sync window: make them durable too.
	return f.c.SyncMeta(ctx)
}

// Close flushes and syncs the file's data and releases it. The data is
// durable when Close returns nil.
func (f *File) Close() error {
	_, err := f.recorded(f.ctx, profile.OpClose, 0, 0, func(context.Context) (int, error) { return 0, f.close() })
	return err
}

func (f *File) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return opErr("close", f.name, fs.ErrClosed)
	}
	var err error
	if f.writable() {
		err = f.syncLocked(f.ctx)
	}
	f.closed = true
	f.dropCaches()
	f.closeDirect()
	return opErr("close", f.name, err)
}

// Read reads from the file offset.
func (f *File) Read(p []byte) (int, error) {
	f.mu.Lock()
	off := f.offset
	f.mu.Unlock()
	n, err := f.ReadAtContext(f.ctx, p, off)
	f.mu.Lock()
	f.offset = off + int64(n)
	f.mu.Unlock()
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// ReadAt reads len(p) bytes at off (io.ReaderAt).
func (f *File) ReadAt(p []byte, off int64) (int, error) { return f.ReadAtContext(f.ctx, p, off) }

// Seek sets the offset for the next Read or Write (io.Seeker).
func (f *File) Seek(offset int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.offset
	case io.SeekEnd:
		offset += max(f.size, f.bufEndLocked())
	default:
		return 0, opErr("seek", f.name, errs.ErrInvalid)
	}
	if offset < 0 {
		return 0, opErr("seek", f.name, errs.ErrInvalid)
	}
	f.offset = offset
	return offset, nil
}

// ReadAtContext reads len(p) bytes at off. It returns io.EOF with n <
// len(p) at the end of the file. Holes read as zeros.
func (f *File) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	return f.recorded(ctx, profile.OpRead, off, len(p), func(ctx context.Context) (int, error) { return f.readAt(ctx, p, off) })
}

func (f *File) readAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, opErr("read", f.name, errs.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, opErr("read", f.name, fs.ErrClosed)
	}
	if f.flag&O_WRONLY != 0 {
		return 0, opErr("read", f.name, errs.New(errs.Permission, "client: file not open for reading"))
	}
	if len(f.buf) > 0 || len(f.sem) > 0 {
		// Reads see this file's own writes: send them first.
		if err := f.waitFlushesLocked(ctx); err != nil {
			return 0, opErr("read", f.name, err)
		}
	}
	if err := f.awaitStagedLocked(ctx); err != nil {
		return 0, opErr("read", f.name, err)
	}
	fresh := false
	if f.icache == nil && f.c.opts.ReadAhead > 0 && !dataHome(f.home.Load()).allChunks() {
		// The file has inline bytes: fetch them all for this read and
		// the ones that follow (the inline read-ahead).
		if err := f.fillInlineCache(ctx); err != nil {
			return 0, opErr("read", f.name, err)
		}
		fresh = true
	} else if f.icache != nil && f.icache.fresh && off+int64(len(p)) > f.size {
		// Filled at open (close-to-open): the first read to reach the
		// end trusts that size; later ones ask again.
		f.icache.fresh, fresh = false, true
	}
	if f.sizeFresh && off+int64(len(p)) > f.size {
		f.sizeFresh, fresh = false, true
	}
	if off+int64(len(p)) > f.size && !fresh {
		// The file may have grown through another client.
		var a wire.Attr
		if err := f.c.metaCall(ctx, wire.OpGetAttr, &wire.InoReq{Ino: f.ino}, &a); err != nil {
			return 0, opErr("read", f.name, err)
		}
		f.learn(&a)
		f.size = max(f.size, int64(a.Size))
	}
	if off >= f.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), f.size-off))
	var err error
	if f.icache.covers(off, n) {
		f.icache.read(p[:n], off)
	} else if f.c.opts.ReadAhead > 0 && f.ra.sequential(off) && !dataHome(f.home.Load()).released() && int64(n) < raBlockSize(f) {
		// The window copies every byte once more: a released file's
		// reads have the tier's own read-ahead of whole segments
		// (tierRead), and a read of at least a window block goes
		// straight into the caller's buffer, with its chunks read in
		// parallel (a restore of 8 shards read 4 MiB at a time, cold:
		// 0.60-0.79 of the local directory's speed through the window,
		// 0.86-0.90 without).
		err = f.ra.read(ctx, f, p[:n], off)
	} else {
		f.ra.drop()
		err = f.readData(ctx, off, p[:n])
	}
	f.ra.last = off + int64(n)
	if err != nil {
		return 0, opErr("read", f.name, err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readChunks reads the file range at off into dst from the targets, all
// extents in parallel; bytes the chunks do not have read as zeros.
func (f *File) readChunks(ctx context.Context, off int64, dst []byte) error {
	if dataHome(f.home.Load()).released() {
		return f.readReleased(ctx, off, dst)
	}
	for try := 0; ; try++ {
		var short atomic.Bool
		err := f.readTargets(ctx, off, dst, &short)
		now := err == errNowReleased
		if !now && (err != nil || !short.Load()) {
			return err
		}
		// A chunk shorter than the range: a hole, or the file was
		// released since this File learnt its attributes (its chunks
		// frozen, maybe removed: errNowReleased).
		var a wire.Attr
		if err := f.c.metaCall(ctx, wire.OpGetAttr, &wire.InoReq{Ino: f.ino}, &a); err != nil {
			return err
		}
		f.learn(&a)
		f.learnLayout(&a)
		switch {
		case a.Flags&wire.AttrReleased != 0:
			return f.readReleased(ctx, off, dst)
		case !now:
			return nil
		case try > 0:
			return errs.New(errs.Unavailable, "client: %s was released and restored while it was read; read again", f.name)
		}
		// Restored again meanwhile: read its new chunks.
	}
}

// learnLayout takes the layout in attributes a, if they carry one, as the
// file's (a restore or a cut of a released file to 0 moves it to another
// data ID: ADR 0023).
func (f *File) learnLayout(a *wire.Attr) {
	if a.Layout.StripeSize != 0 && len(a.Layout.Chains) > 0 {
		f.setLayout(a.Layout)
	}
}

// readTargets is readChunks from the targets; short says that a chunk
// held fewer bytes than its extent asked for.
func (f *File) readTargets(ctx context.Context, off int64, dst []byte, short *atomic.Bool) error {
	return f.withLayout(ctx, false, func(l placement.Layout) error {
		id := l.DataID(f.ino)
		ext := extents(l, off, int64(len(dst)))
		if f.c.remoteTargets.Load() {
			ext = splitAtBlocks(ext)
		}
		read := func(ctx context.Context, e placement.Extent) error {
			piece := dst[e.FileOff-off : e.FileOff-off+e.Len]
			paced := false
			if f.c.opts.DirectRead && e.Chain < placement.FirstReplicatedChain {
				got, ok, p := f.readDirect(ctx, placement.TargetID(e.Chain), id, uint32(e.Slot), e.ChunkOff, piece, l.ChunkSize(e.Slot, f.openSize.Load()))
				if ok {
					if got < len(piece) {
						short.Store(true)
					}
					clear(piece[got:])
					return nil
				}
				paced = p
			}
			var resp wire.ChunkReadResp
			got, err := f.c.chunkCall(ctx, chunkReq{chain: e.Chain, op: wire.OpChunkRead, resp: &resp, into: piece, paced: paced,
				msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
					return &wire.ChunkReadReq{ChunkRef: wire.ChunkRef{Target: t, ChainRef: ref, Ino: id, Slot: uint32(e.Slot)}, Off: uint64(e.ChunkOff), Len: uint32(e.Len), Qos: f.c.qos}
				}})
			if err != nil {
				return fmt.Errorf("read %s at %d (chain %d, slot %d): %w", f.name, e.FileOff, e.Chain, e.Slot, err)
			}
			if got < len(piece) {
				short.Store(true)
			}
			clear(piece[got:])
			return nil
		}
		if len(ext) == 1 {
			return read(ctx, ext[0])
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(32)
		for _, e := range ext {
			g.Go(func() error { return read(gctx, e) })
		}
		return g.Wait()
	})
}

// Truncate changes the file's size. Shrinking cuts the chunks on the
// targets first, then records the size, so bytes past the new end can never
// reappear when the file grows again.
func (f *File) Truncate(ctx context.Context, size int64) error {
	if size < 0 {
		return opErr("truncate", f.name, errs.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.readySizeLocked(ctx, "truncate"); err != nil {
		return err
	}
	// The chunks are cut under a cut of the file (cut.go): other
	// clients' writes commit before it or are written again after it.
	// The size change applies only if the file is still as the cut found
	// it (wire.SetIfAt): else (errs.Busy) a client without cut
	// generations committed a write in between, maybe past the new size
	// into chunks already cut, or a restore finished; look and cut again.
	// Against such writers that keep committing, the last round sets the
	// size whatever happened since the cut, then cuts again, so that
	// nothing past the new size survives (a write of such a client racing
	// that round may lose its bytes; docs/design.md, Consistency model).
	var err error
	frozenWait := 5 * time.Millisecond // the pause before chunks a migration froze are cut again
	for try := 0; try < truncateTries; {
		err = f.truncateOnce(ctx, size, try == truncateTries-1, &frozenWait)
		if err == errCutFrozen {
			continue // a migration froze the chunks; not a round lost to a writer
		}
		if err == nil || errs.CodeOf(err) != errs.Busy {
			break
		}
		try++
	}
	if err != nil {
		return opErr("truncate", f.name, err)
	}
	f.size = size
	f.truncs++
	return nil
}

// truncateTries bounds Truncate's rounds against a file other clients
// keep changing (each round is a GetAttr, a cut and a size change; the
// last one a second cut too).
const truncateTries = 8

// truncateOnce is one round of Truncate: the attributes, a restore where
// one is needed, the cut; with last, the size change applies whatever
// changed since the cut, and the chunks are cut again after it.
// frozenWait is as in cutLocked. f.mu is held.
func (f *File) truncateOnce(ctx context.Context, size int64, last bool, frozenWait *time.Duration) error {
	var a wire.Attr
	if err := f.c.metaCall(ctx, wire.OpGetAttr, &wire.InoReq{Ino: f.ino}, &a); err != nil {
		return err
	}
	f.learn(&a)
	// A released file cut to 0 needs none of its bytes: the metadata
	// service takes the cut without a restore unless a restore runs
	// (errs.Busy); then, and for any other size, restore first (ADR 0016).
	released := a.Flags&wire.AttrReleased != 0
	if released && size > 0 {
		if err := f.restoreBeforeWriteLocked(ctx, &a); err != nil {
			return err
		}
		released = false
	}
	err := f.cutLocked(ctx, &a, size, last, frozenWait)
	if err != nil && released && errs.CodeOf(err) == errs.Busy {
		if err = f.restoreBeforeWriteLocked(ctx, &a); err == nil {
			err = f.cutLocked(ctx, &a, size, last, frozenWait)
		}
	}
	return err
}

// cutLocked cuts the file, whose attributes are a, to size: its chunks
// first (a chunk of a failed restore of a released file too), then its
// size in the metadata, which answers with the attributes after it into a.
// The chunks are cut under a cut of the file (cut.go), which holds other
// clients' size commits off until the size is set, so that no write they
// acknowledge lies in the bytes cut. Unless last, the size change applies
// only if the file is still as a (or the cut's answer) says
// (wire.SetIfAt; else errs.Busy): a client without cut generations may
// have committed a write in between. With last, the size applies
// whatever changed, and the chunks are cut again after it, so that
// nothing past the new size survives. frozenWait is the Truncate's pause
// before it cuts again chunks a migration froze (errCutFrozen), which
// grows from round to round.
func (f *File) cutLocked(ctx context.Context, a *wire.Attr, size int64, last bool, frozenWait *time.Duration) error {
	// A file without chunks has nothing on the targets to cut; a released
	// one cut to 0 moves to a fresh data ID (its chunks are frozen, maybe
	// gone: ADR 0023), which the answer's layout names.
	chunked := func() bool {
		return a.Flags&wire.AttrChunks != 0 && a.Flags&wire.AttrReleased == 0 && len(f.lay().Chains) > 0
	}
	cut := chunked() && size < int64(a.Size)
	outer := ctx   // without the held cut's deadline
	var gen uint64 // the cut's generation, when held
	if cut && !f.c.noCutGen.Load() {
		// The held section counts from the request, not its answer: the
		// service counts wire.CutHold from when it got the request, and
		// an answer delayed on the way must not leave the chunk truncates
		// a section that ends after the take-over.
		asked := time.Now()
		r, err := f.beginCut(ctx)
		switch {
		case errs.CodeOf(err) == errs.NotSupported:
			f.c.noCutGen.Store(true) // a service from before 2026-12-05
		case err != nil:
			return err
		default:
			gen = r.Cut
			*a = r.Attr // the file as the cut holds it
			f.learn(a)
			cut = chunked() && size < int64(a.Size)
			// The cut's chunk truncates must all be answered before the
			// service may take the cut over (wire.CutHold).
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, asked.Add(wire.CutTimeout))
			defer cancel()
		}
	}
	held := gen != 0
	fail := func(err error) error {
		if held {
			ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			f.endCut(ectx, gen) // else the service ends it after wire.CutHold
		}
		return err
	}
	// cutAll cuts the chunks. Under a held cut, a chunk frozen for a
	// migration ends the cut: cutAll then waits outside it (awaitMoved:
	// the migration's new layout, or a pause) and says moved, with nil
	// (cut again) or the error to return.
	cutAll := func() (moved bool, err error) {
		if !held {
			return false, f.cutChunks(ctx, size)
		}
		frozen, err := f.cutChunksHeld(ctx, size)
		if err != errCutFrozen {
			return false, err
		}
		fail(err)
		if err := f.awaitMoved(outer, true, frozen, errCutFrozen, frozenWait); err != nil {
			if err == errCutFrozen {
				err = outer.Err() // it ended while waiting
			}
			return true, err
		}
		return true, nil
	}
	if cut {
		moved, err := cutAll()
		switch {
		case moved && err == nil:
			// The cut ended: Truncate begins the round again.
			return errCutFrozen
		case moved:
			return err
		case err != nil:
			return fail(err)
		}
	}
	now := time.Now().UnixNano()
	req := &wire.SetAttrReq{Ino: f.ino, Valid: wire.SetSize | wire.SetMtime | wire.SetCtime, Size: uint64(size), Mtime: now, Ctime: now}
	if !last {
		req.Valid |= wire.SetIfAt
		req.AtMtime, req.AtSize = a.Mtime, a.Size
		if held {
			req.Valid |= wire.SetIfCut // the size change ends the cut
			req.Cut = gen
		}
	}
	if a.Flags&wire.AttrReleased != 0 {
		// No chunk was cut: the change must not land on a file whose
		// restore finished meanwhile, whose chunks hold its bytes
		// (errs.Busy; Truncate restores, learns the layout and cuts).
		req.Valid |= wire.SetIfReleased
	}
	if err := f.sendSizeLocked(ctx, req, a); err != nil {
		return fail(err)
	}
	switch {
	case last && chunked():
		// A write committed between the cut and the size change (by a
		// client without cut generations) may have left bytes past size:
		// cut them, still under the cut.
		moved, err := cutAll()
		switch {
		case moved && err == nil:
			// The size is set and the cut ended: cut the new chunks.
			return f.cutChunks(outer, size)
		case moved:
			return err
		case err != nil:
			return fail(err)
		}
		if held {
			f.endCut(ctx, gen) // errs.Busy: taken over; the size is set all the same
		}
	case last && held:
		f.endCut(ctx, gen)
	case held:
		f.learnCut(gen + 1)
	}
	return nil
}

// sendSizeLocked sends req, a change of the file's size, with the
// own-change chain's If fields, and learns the attributes after it,
// which it leaves in a. f.mu is held.
func (f *File) sendSizeLocked(ctx context.Context, req *wire.SetAttrReq, a *wire.Attr) error {
	ifMtime, ifSize := f.own.ifState()
	req.IfMtime, req.IfSize = ifMtime, ifSize
	if err := f.c.metaCall(ctx, wire.OpSetAttr, req, a); err != nil {
		f.own.brk() // it may have been applied
		return err
	}
	f.learn(a)
	f.learnLayout(a)
	f.own.answer(ifMtime, a)
	return nil
}

// Stat returns the file's attributes, including data this client has
// written but not yet flushed.
func (f *File) Stat() (*FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var a wire.Attr
	tok := f.c.stagedToken()
	if err := f.c.metaCall(f.ctx, wire.OpGetAttr, &wire.InoReq{Ino: f.ino}, &a); err != nil {
		return nil, opErr("stat", f.name, err)
	}
	f.c.overlayStagedSince(&a, tok) // this client's staged writes count, as in Client.Stat
	attr := attrFrom(&a)
	attr.Size = max(attr.Size, f.size)
	return &FileInfo{name: f.name, attr: attr}, nil
}

// readAhead keeps a window of blocks ahead of a sequential reader, each
// read from the targets in the background. It is guarded by File.mu.
type readAhead struct {
	last   int64 // end of the previous read
	blocks []*raBlock
}

type raBlock struct {
	off  int64
	buf  []byte
	err  error
	done chan struct{}
}

// sequential reports whether a read at off continues the previous one.
func (r *readAhead) sequential(off int64) bool {
	if len(r.blocks) > 0 {
		return off >= r.blocks[0].off && off <= r.blocks[len(r.blocks)-1].off+int64(len(r.blocks[len(r.blocks)-1].buf))
	}
	return off == r.last && off > 0
}

func (r *readAhead) drop() {
	for _, b := range r.blocks {
		go func() { <-b.done; wire.PutBuf(b.buf) }()
	}
	r.blocks = nil
}

// raBlockSize is the size of the read-ahead window's blocks for f.
func raBlockSize(f *File) int64 {
	return max(int64(f.c.opts.ReadAhead)/4, int64(f.lay().StripeSize))
}

// read serves dst at off from the window, extending it as the reader moves.
func (r *readAhead) read(ctx context.Context, f *File, dst []byte, off int64) error {
	window := int64(f.c.opts.ReadAhead)
	blockSize := raBlockSize(f)
	// Drop blocks entirely before off.
	for len(r.blocks) > 0 && r.blocks[0].off+int64(len(r.blocks[0].buf)) <= off {
		b := r.blocks[0]
		r.blocks = r.blocks[1:]
		go func() { <-b.done; wire.PutBuf(b.buf) }()
	}
	if len(r.blocks) == 0 {
		// The window starts on a checksum block: a target reads, verifies
		// and sends whole blocks more cheaply than a range cut inside
		// them (a block read in part is read again whole to be verified;
		// cached whole blocks go out unread, wire.ReadFlagUnverified).
		r.blocks = append(r.blocks, r.start(f, off-off%checksum.BlockSize, blockSize))
	}
	// Keep the window full.
	for {
		lastb := r.blocks[len(r.blocks)-1]
		next := lastb.off + int64(len(lastb.buf))
		if next >= f.size || next-off >= window {
			break
		}
		r.blocks = append(r.blocks, r.start(f, next, blockSize))
	}
	for len(dst) > 0 {
		var b *raBlock
		for _, c := range r.blocks {
			if off >= c.off && off < c.off+int64(len(c.buf)) {
				b = c
				break
			}
		}
		if b == nil {
			return f.readData(ctx, off, dst)
		}
		select {
		case <-b.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if b.err != nil {
			err := b.err
			r.drop()
			return err
		}
		n := copy(dst, b.buf[off-b.off:])
		dst, off = dst[n:], off+int64(n)
	}
	return nil
}

func (r *readAhead) start(f *File, off, size int64) *raBlock {
	size = min(size, f.size-off)
	b := &raBlock{off: off, buf: wire.GetBuf(int(size)), done: make(chan struct{})}
	ctx := context.WithoutCancel(f.ctx)
	go func() {
		defer close(b.done)
		b.err = f.readData(ctx, off, b.buf)
	}()
	return b
}

var _ interface {
	io.ReaderAt
	io.WriterAt
	io.ReadWriteSeeker
	io.Closer
} = (*File)(nil)
