package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/profile"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Inline data (ADR 0009): a regular file's first bytes may live in the
// metadata service instead of chunks. A file without chunks keeps all its
// bytes inline while they fit in the service's InlineMax; before the first
// chunk write a client freezes the inline part (OpSetChunks), and from
// then on bytes [0, InlineLen) are inline and the rest in chunks. InlineLen
// only shrinks after the freeze, so a File may act on an InlineLen it
// learnt earlier: the service writes inline only what is still below the
// boundary and says how much, and reads say where the boundary is now.

// dataHome is where a file's bytes live: bit 63 says it has chunks (the
// inline part is frozen), the low 32 bits are the inline length.
type dataHome uint64

const (
	homeChunks dataHome = 1 << 63
	// homeReleased: the file is released to the object tier (tier.go).
	homeReleased dataHome = 1 << 62
)

func homeOf(a *wire.Attr) dataHome {
	h := dataHome(a.InlineLen)
	if a.Flags&wire.AttrChunks != 0 {
		h |= homeChunks
	}
	if a.Flags&wire.AttrReleased != 0 {
		h |= homeReleased
	}
	return h
}

func (h dataHome) released() bool { return h&homeReleased != 0 }

func (h dataHome) chunks() bool     { return h&homeChunks != 0 }
func (h dataHome) inlineLen() int64 { return int64(uint32(h)) }

// allChunks: every byte is in chunks.
func (h dataHome) allChunks() bool { return h.chunks() && h.inlineLen() == 0 }

// learn records where the file's bytes live from attributes the metadata
// service returned. Replies may arrive out of order, so it never forgets
// the freeze and, once frozen, keeps the smallest inline length seen:
// after the freeze the length only shrinks, so the smallest is the newest.
//
// A File that saw its file released and now learns that it is not (a
// restore committed) learns the layout too: the restore moved the file to
// the data ID its chunks were written under, and the File's layout names
// the one before, whose chunks a file imported from a bucket never had
// (no fences there to turn a stale write or cut away: ADR 0023).
func (f *File) learn(a *wire.Attr) {
	if a.Flags&wire.AttrReleased == 0 && dataHome(f.home.Load()).released() {
		f.learnLayout(a)
	}
	f.learnHome(homeOf(a))
}

// learnHome is learn of a home already decoded (an InodeAttr's).
func (f *File) learnHome(h dataHome) {
	for {
		old := dataHome(f.home.Load())
		next := h
		switch {
		case old.chunks() && !h.chunks():
			return // a reply from before the freeze
		case old.chunks() && h.chunks():
			next = homeChunks | h&homeReleased | dataHome(min(old.inlineLen(), h.inlineLen()))
		}
		if next == old || f.home.CompareAndSwap(uint64(old), uint64(next)) {
			return
		}
	}
}

// inlineMax is the most bytes a file without chunks may keep inline.
func (c *Client) inlineMax() int64 {
	if c.opts.InlineMax < 0 {
		return 0
	}
	c.mu.Lock()
	m := int64(c.info.InlineMax)
	c.mu.Unlock()
	if c.opts.InlineMax > 0 {
		m = min(m, int64(c.opts.InlineMax))
	}
	return m
}

// writeData writes data at off where its bytes live: inline bytes through
// the metadata service, the rest to the chunks on the targets. It reports
// whether it wrote chunks (whose size must then be committed).
func (f *File) writeData(ctx context.Context, off int64, data []byte) (chunked bool, err error) {
	for len(data) > 0 {
		h := dataHome(f.home.Load())
		end := off + int64(len(data))
		var n int
		switch {
		case h.chunks() && off >= h.inlineLen():
			return true, f.writeChunks(ctx, off, data)
		case h.chunks():
			n, err = f.writeInline(ctx, off, data[:min(int64(len(data)), h.inlineLen()-off)])
		case end <= f.c.inlineMax():
			n, err = f.writeInline(ctx, off, data)
			if errs.CodeOf(err) == errs.TooBig {
				// The service keeps less inline than this client
				// thought: freeze and go on with chunks.
				n, err = 0, f.setChunks(ctx)
			}
		default:
			err = f.setChunks(ctx)
		}
		if err != nil {
			return chunked, err
		}
		data, off = data[n:], off+int64(n)
	}
	return chunked, nil
}

// writeInline sends one inline write and returns how many of its bytes
// the service took (fewer when the inline part ends before p does).
func (f *File) writeInline(ctx context.Context, off int64, p []byte) (int, error) {
	var r wire.WriteInlineResp
	ifMtime, ifSize := f.own.ifState()
	err := f.c.metaCall(ctx, wire.OpWriteInline, &wire.WriteInlineReq{Ino: f.ino, Off: uint64(off), Data: p, Mtime: time.Now().UnixNano(), IfMtime: ifMtime, IfSize: ifSize}, &r)
	if err != nil {
		f.own.brk() // it may have been applied
		return 0, err
	}
	f.learn(&r.Attr)
	f.own.answer(ifMtime, &r.Attr)
	if int(r.Written) > len(p) {
		return 0, errs.New(errs.Protocol, "client: the metadata service took %d bytes of a %d-byte inline write", r.Written, len(p))
	}
	return int(r.Written), nil
}

// FlushAttr sends the File's buffered data and then the attribute change
// ch (mode, owner, group, times: no size), as FlushContext followed by
// Client.SetAttrIno would, and returns the file's attributes after the
// change. When what is buffered is the file's only write in flight and
// lands in its inline bytes, both go in one metadata request and one
// transaction (OpWriteInlineAttr): the close of a small file whose times,
// owner and mode a program restored before closing it (tar -x). When the
// buffer goes to chunks, the change goes with its size commit instead
// (OpCommitWriteAttr), once the chunks are written.
func (f *File) FlushAttr(ctx context.Context, ch AttrChange) (InodeAttr, error) {
	var a InodeAttr
	one := false
	_, err := f.recorded(ctx, profile.OpSync, 0, 0, func(ctx context.Context) (int, error) {
		var err error
		a, one, err = f.flushAttr(ctx, ch)
		return 0, err
	})
	if err != nil || one {
		return a, err
	}
	return f.c.SetAttrIno(ctx, f.ino, ch)
}

// flushAttr flushes the File and reports whether ch went with the data.
func (f *File) flushAttr(ctx context.Context, ch AttrChange) (InodeAttr, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return InodeAttr{}, false, opErr("flush", f.name, fs.ErrClosed)
	}
	h := dataHome(f.home.Load())
	// ch may go with the buffer's last request: inline bytes, or the size
	// commit after its chunks.
	together := f.stg == nil && len(f.buf) > 0 && !h.released() && ch.Valid&^(AttrMode|AttrUid|AttrGid|AttrAtime|AttrMtime) == 0
	inline := !h.chunks() && f.bufEndLocked() <= f.c.inlineMax()
	if together && inline && f.flushing.Load() == 0 && !f.c.noWriteInlineAttr.Load() && f.writeErr() == nil {
		// Nothing else in flight, and f.mu keeps new writes out: the
		// buffer is the file's last change, sent here and now.
		a, err := f.writeInlineAttr(ctx, f.bufOff, f.buf, ch)
		switch errs.CodeOf(err) {
		case errs.NotSupported:
			f.c.noWriteInlineAttr.Store(true) // a service from before 2026-12-01
		case errs.TooBig:
			// The file has chunks now, or the service keeps less
			// inline than this client thought: nothing was changed.
		default:
			f.settle()
			wire.PutBuf(f.buf)
			f.buf = nil
			if err != nil {
				f.setWriteErr(err)
				return InodeAttr{}, false, opErr("flush", f.name, err)
			}
			return a, true, nil
		}
	}
	if together && !inline && !f.c.noCommitWriteAttr.Load() {
		a, one, err := f.flushCommitAttrLocked(ctx, ch)
		return a, one, opErr("flush", f.name, err)
	}
	return InodeAttr{}, false, opErr("flush", f.name, f.waitFlushesLocked(ctx))
}

// flushCommitAttrLocked sends the write buffer, which goes (at least in
// part) to chunks, after every other flush has ended, and then its size
// commit and ch in one request. It reports whether ch went with it (not
// when the buffer landed inline after all, or the service is older: the
// caller then sends ch alone). f.mu is held, so no other flush starts.
func (f *File) flushCommitAttrLocked(ctx context.Context, ch AttrChange) (InodeAttr, bool, error) {
	buf, off := f.buf, f.bufOff
	f.buf = nil
	end := off + int64(len(buf))
	f.inflight.Wait() // the other flushes, with their size commits
	if err := f.writeErr(); err != nil {
		wire.PutBuf(buf)
		return InodeAttr{}, false, err
	}
	f.flushing.Add(1) // until the size is committed too
	defer f.endFlushing()
	fl, _ := f.startFlight(off, end) // none in flight to wait for
	defer f.endFlight(fl)
	defer wire.PutBuf(buf)
	for {
		cut := f.cutKnown()
		chunked, err := f.writeData(ctx, off, buf)
		if err != nil {
			f.setWriteErr(err)
			return InodeAttr{}, false, err
		}
		if !chunked {
			return InodeAttr{}, false, nil // inline after all: its size is recorded
		}
		a, one, err := f.commitSizeAttr(ctx, end, cut, ch)
		if errors.Is(err, errCutRefused) {
			// Another client's truncate cut the file since the data
			// went: write it again once the cut has ended (cut.go).
			if err = f.awaitCut(ctx); err == nil {
				continue
			}
		}
		if err != nil {
			f.setWriteErr(err)
		}
		return a, one, err
	}
}

// commitSizeAttr records in the metadata that the file's data reaches end
// (written under cut generation cut) and makes change ch, in one request
// (OpCommitWriteAttr), within commitSize's rules. Against an older service
// it commits the size alone and reports that ch was not sent.
func (f *File) commitSizeAttr(ctx context.Context, end int64, cut uint64, ch AttrChange) (InodeAttr, bool, error) {
	attr := attrChangeReq(ctx, f.ino, ch)
	sent := false
	a, err := f.commitWith(end, cut, func(c wire.CommitWriteReq, r *wire.CommitResp) error {
		sent = true
		return f.c.metaCall(ctx, wire.OpCommitWriteAttr, &wire.CommitWriteAttrReq{Commit: c, Attr: *attr}, r)
	})
	if errs.CodeOf(err) == errs.NotSupported {
		f.c.noCommitWriteAttr.Store(true) // a service from before 2026-12-02: nothing was changed
		return InodeAttr{}, false, f.commitSize(ctx, end, cut)
	}
	if err != nil {
		return InodeAttr{}, false, err
	}
	if !sent {
		return InodeAttr{}, false, nil // another flush's commit covered it: ch is still to send
	}
	f.learn(&a)
	f.c.overlayStaged(&a)
	return inodeAttr(&a), true, nil
}

// writeInlineAttr sends one OpWriteInlineAttr: all of p at off, then ch.
func (f *File) writeInlineAttr(ctx context.Context, off int64, p []byte, ch AttrChange) (InodeAttr, error) {
	var r wire.WriteInlineResp
	ifMtime, ifSize := f.own.ifState()
	req := &wire.WriteInlineAttrReq{
		Write: wire.WriteInlineReq{Ino: f.ino, Off: uint64(off), Data: p, Mtime: time.Now().UnixNano(), IfMtime: ifMtime, IfSize: ifSize},
		Attr:  *attrChangeReq(ctx, f.ino, ch),
	}
	err := f.c.metaCall(ctx, wire.OpWriteInlineAttr, req, &r)
	if err != nil {
		if c := errs.CodeOf(err); c != errs.NotSupported && c != errs.TooBig {
			f.own.brk() // it may have been applied
		}
		return InodeAttr{}, err
	}
	if int(r.Written) != len(p) {
		f.own.brk()
		return InodeAttr{}, errs.New(errs.Protocol, "client: the metadata service took %d bytes of a %d-byte inline write", r.Written, len(p))
	}
	f.learn(&r.Attr)
	f.own.answer(ifMtime, &r.Attr)
	f.c.overlayStaged(&r.Attr)
	return inodeAttr(&r.Attr), nil
}

// setChunks freezes the file's inline part before its first chunk write.
func (f *File) setChunks(ctx context.Context) error {
	var a wire.Attr
	if err := f.c.metaCall(ctx, wire.OpSetChunks, &wire.InoReq{Ino: f.ino}, &a); err != nil {
		return err
	}
	f.learn(&a)
	if !dataHome(f.home.Load()).chunks() {
		return errs.New(errs.Protocol, "client: the metadata service did not mark inode %d as having chunks", f.ino)
	}
	return nil
}

// readData reads the file range at off into dst from where its bytes
// live; bytes nobody wrote read as zeros.
func (f *File) readData(ctx context.Context, off int64, dst []byte) error {
	h := dataHome(f.home.Load())
	if h.chunks() && off >= h.inlineLen() {
		return f.readChunks(ctx, off, dst)
	}
	var r wire.ReadInlineResp
	n := min(len(dst), 1<<30)
	if err := f.c.metaCall(ctx, wire.OpReadInline, &wire.ReadInlineReq{Ino: f.ino, Off: uint64(off), Len: uint32(n)}, &r); err != nil {
		return err
	}
	f.learn(&r.Attr)
	if len(r.Data) > len(dst) {
		return errs.New(errs.Protocol, "client: the metadata service returned %d inline bytes for a %d-byte read", len(r.Data), len(dst))
	}
	k := copy(dst, r.Data)
	rest := dst[k:]
	if len(rest) == 0 {
		return nil
	}
	if r.Attr.Flags&wire.AttrChunks != 0 && off+int64(k) >= int64(r.Attr.InlineLen) {
		return f.readChunks(ctx, off+int64(k), rest)
	}
	clear(rest) // past the inline bytes of a file without chunks: a hole
	return nil
}

// inlineCache holds a file's inline bytes as one ReadInline returned them,
// for the reads through the File that follow: the read-ahead of a file
// with inline bytes (a small file is read with one request however small
// the reads). Like the read-ahead window it is dropped by the File's
// writes and truncates; it serves only bytes below the size the file had
// when it was filled, so growth by another client is read afresh.
type inlineCache struct {
	data  []byte // the file's bytes [0, len(data))
	end   int64  // the file's size when filled
	mtime int64  // and its modification time (Seen)
	// chunks: bytes from len(data) on live in chunks (not served here);
	// else they are zeros up to end.
	chunks bool
	// fresh: filled when the file was opened, and no read has yet relied
	// on the size it had then to find the end.
	fresh bool
}

// covers reports whether the cache can serve n bytes at off.
func (c *inlineCache) covers(off int64, n int) bool {
	if c == nil {
		return false
	}
	end := off + int64(n)
	if c.chunks {
		return end <= int64(len(c.data))
	}
	return end <= c.end
}

func (c *inlineCache) read(dst []byte, off int64) {
	k := 0
	if off < int64(len(c.data)) {
		k = copy(dst, c.data[off:])
	}
	clear(dst[k:])
}

// fillInlineCache reads all the file's inline bytes into f.icache and
// learns its size from the same reply. f.mu is held.
func (f *File) fillInlineCache(ctx context.Context) error {
	var r wire.ReadInlineResp
	if err := f.c.metaCall(ctx, wire.OpReadInline, &wire.ReadInlineReq{Ino: f.ino, Len: maxInlineRead}, &r); err != nil {
		return err
	}
	f.learn(&r.Attr)
	if len(r.Data) != int(r.Attr.InlineLen) {
		return errs.New(errs.Protocol, "client: the metadata service returned %d inline bytes of %d", len(r.Data), r.Attr.InlineLen)
	}
	f.size = max(f.size, int64(r.Attr.Size))
	f.icache = newInlineCache(&r.Attr, r.Data)
	return nil
}

// newInlineCache makes the inline cache from a reply that carried all of
// a file's inline bytes, or returns nil if every byte is in chunks.
func newInlineCache(a *wire.Attr, data []byte) *inlineCache {
	if a.Flags&wire.AttrChunks != 0 && a.InlineLen == 0 {
		return nil
	}
	return &inlineCache{data: data, end: int64(a.Size), mtime: a.Mtime, chunks: a.Flags&wire.AttrChunks != 0}
}

// OpenRead opens the regular file at p for reading, like Open, with one
// request to the metadata service that also returns the file's inline
// bytes (a small file is then read without another request) and, if xattr
// is not empty, the value of that extended attribute (nil if the file has
// none). It returns the attributes the file was opened with.
func (c *Client) OpenRead(ctx context.Context, p, xattr string) (*File, InodeAttr, []byte, error) {
	return c.openRead(ctx, p, xattr, true)
}

// OpenReadNoFollow is OpenRead of p itself: if p is a symbolic link, it
// fails as for any file that is not regular (errs.Invalid).
func (c *Client) OpenReadNoFollow(ctx context.Context, p, xattr string) (*File, InodeAttr, []byte, error) {
	return c.openRead(ctx, p, xattr, false)
}

// resolveRead resolves p with OpResolveRead: its attributes with a
// regular file's inline bytes, its cut generation, and extended
// attribute xattr if named.
func (c *Client) resolveRead(ctx context.Context, p, xattr string, follow bool) (wire.ResolveReadResp, error) {
	var r wire.ResolveReadResp
	err := c.lookupPath(ctx, p, follow, func(q string) (uint64, error) {
		err := c.metaCall(ctx, wire.OpResolveRead, &wire.ResolveReq{Path: clean(q), Follow: follow, Xattr: xattr}, &r)
		return r.Attr.Ino, err
	})
	return r, err
}

func (c *Client) openRead(ctx context.Context, p, xattr string, follow bool) (*File, InodeAttr, []byte, error) {
	r, err := c.resolveRead(ctx, p, xattr, follow)
	if err != nil {
		return nil, InodeAttr{}, nil, opErr("open", p, err)
	}
	a := inodeAttr(&r.Attr)
	switch {
	case a.IsDir():
		return nil, InodeAttr{}, nil, opErr("open", p, errs.ErrIsDir)
	case !a.IsRegular():
		return nil, InodeAttr{}, nil, opErr("open", p, errs.New(errs.Invalid, "client: %s is not a regular file", p))
	}
	f, err := c.OpenInode(ctx, a, O_RDONLY)
	if err != nil {
		return nil, InodeAttr{}, nil, err
	}
	f.name = p
	if len(r.Data) != int(r.Attr.InlineLen) {
		return nil, InodeAttr{}, nil, opErr("open", p, errs.New(errs.Protocol, "client: the metadata service returned %d inline bytes of %d", len(r.Data), r.Attr.InlineLen))
	}
	f.Prime(ctx, Opened{attr: r.Attr, data: r.Data, hsm: r.Hsm}, SizeToken{})
	f.ctx = ctx
	var x []byte
	if r.HasXattr {
		x = r.Xattr
		if x == nil {
			x = []byte{}
		}
	}
	return f, a, x, nil
}

// Opened is what an open learnt beside the attributes (OpenAttrIno): the
// file's inline bytes and, for a released file, where its copy is. Prime
// hands them to the File the open reads through.
type Opened struct {
	attr wire.Attr
	data []byte
	hsm  *wire.HsmRecord
	// feedEpoch and feedCursor: the change feed's position before the
	// attributes were read (zeros if unknown).
	feedEpoch, feedCursor uint64
}

// FeedPosition returns the change feed's epoch and cursor (Watch) before
// the open's attributes were read: they reflect every change of that
// epoch before the cursor. Zeros if the service did not say.
func (o Opened) FeedPosition() (epoch, cursor uint64) { return o.feedEpoch, o.feedCursor }

// OpenAttrIno returns the attributes of inode ino for an open, with one
// request to the metadata service that also returns a regular file's
// inline bytes and, for a released file, its HSM record: after Prime, the
// open's first read of a small or released file needs no other metadata
// request.
func (c *Client) OpenAttrIno(ctx context.Context, ino uint64) (InodeAttr, Opened, error) {
	if c.noOpenIno.Load() {
		a, err := c.GetAttrIno(ctx, ino)
		return a, Opened{}, err
	}
	var r wire.ResolveReadResp
	if err := c.metaCall(ctx, wire.OpOpenIno, &wire.InoReq{Ino: ino}, &r); err != nil {
		if errs.CodeOf(err) == errs.NotSupported {
			// A metadata service from before OpOpenIno (2026-11-28).
			c.noOpenIno.Store(true)
			a, err := c.GetAttrIno(ctx, ino)
			return a, Opened{}, err
		}
		return InodeAttr{}, Opened{}, fmt.Errorf("getattr inode %d: %w", ino, err)
	}
	if r.Attr.Mode&syscall.S_IFMT == syscall.S_IFREG && len(r.Data) != int(r.Attr.InlineLen) {
		return InodeAttr{}, Opened{}, fmt.Errorf("getattr inode %d: %w", ino, errs.New(errs.Protocol, "client: the metadata service returned %d inline bytes of %d", len(r.Data), r.Attr.InlineLen))
	}
	// A writer of the file starts from its cut generation (cut.go).
	c.cuts.learn(ino, r.Cut)
	return inodeAttr(&r.Attr), Opened{attr: r.Attr, data: r.Data, hsm: r.Hsm, feedEpoch: r.FeedEpoch, feedCursor: r.FeedCursor}, nil
}

// Prime gives f what an open of it learnt (OpenAttrIno), so that the
// open's first read asks nothing more: the inline bytes, unless f already
// caches some or changed the file since since was taken (f.SizeToken
// before the open asked; the zero token if f did not exist then), and a
// released file's HSM record, unless f has one.
func (f *File) Prime(ctx context.Context, o Opened, since SizeToken) {
	if o.attr.Ino != f.ino || o.attr.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	f.mu.Lock()
	if f.icache == nil && f.unchangedSinceLocked(since) {
		if f.icache = newInlineCache(&o.attr, o.data); f.icache != nil {
			f.icache.fresh = true
		}
	}
	f.mu.Unlock()
	if o.hsm == nil || o.attr.Flags&wire.AttrReleased == 0 {
		return
	}
	t := &f.tier
	t.mu.Lock()
	have := t.rec != nil
	t.mu.Unlock()
	if have {
		return
	}
	st, err := f.c.tierStore(ctx, o.hsm.Backend)
	if err != nil {
		return // the first read asks again, and reports it
	}
	t.mu.Lock()
	if t.rec == nil {
		t.rec, t.st, t.blocks = o.hsm, st, make(map[int64]*tierFetch)
	}
	t.mu.Unlock()
}

// maxInlineRead is the length of the read that fills the inline cache:
// more than any file keeps inline.
const maxInlineRead = 1 << 30

// dropCaches drops the read-ahead window and the inline cache. f.mu is
// held.
func (f *File) dropCaches() {
	f.ra.drop()
	f.icache = nil
}
