package fusefs

import (
	"context"
	"errors"
	"io"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/client"
)

func (fs *fileSystem) addHandle(h *handle) uint64 {
	fs.hmu.Lock()
	defer fs.hmu.Unlock()
	fs.nextFh++
	fs.handles[fs.nextFh] = h
	return fs.nextFh
}

func (fs *fileSystem) handle(fh uint64) *handle {
	fs.hmu.RLock()
	defer fs.hmu.RUnlock()
	return fs.handles[fh]
}

func (fs *fileSystem) removeHandle(fh uint64) *handle {
	fs.hmu.Lock()
	defer fs.hmu.Unlock()
	h := fs.handles[fh]
	delete(fs.handles, fh)
	return h
}

// fileHandle returns the open regular file behind fh, or nil.
func (fs *fileSystem) fileHandle(fh uint64) *openFile {
	if h := fs.handle(fh); h != nil {
		return h.of
	}
	return nil
}

// ref takes a reference to ino's open file, if it is open on this mount.
func (fs *fileSystem) ref(ino uint64) *openFile {
	if fs.nopen.Load() == 0 {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	of := fs.mu.files[ino]
	if of != nil {
		of.refs++
	}
	return of
}

// acquire returns the open file of the regular file a describes, opening
// it if this mount has no handle on it, with a reference taken.
func (fs *fileSystem) acquire(ctx context.Context, a client.InodeAttr) (*openFile, error) {
	if of := fs.ref(a.Ino); of != nil {
		of.mode.Store(a.Mode) // openRegular tells the File this open's size
		return of, nil
	}
	// Read-write whatever the open flags: the kernel has checked them, and
	// one File serves every handle (and, with the writeback cache, the
	// kernel reads through write-only handles).
	f, err := fs.c.OpenInode(ctx, a, client.O_RDWR)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	of := fs.mu.files[a.Ino]
	if of != nil {
		of.refs++
	} else {
		of = &openFile{ino: a.Ino, f: f, refs: 1}
		fs.mu.files[a.Ino] = of
		fs.nopen.Add(1)
	}
	of.mode.Store(a.Mode)
	fs.mu.Unlock()
	if of.f != f {
		f.Release(ctx, false) // lost a race with another open; f holds no data
	}
	return of, nil
}

// sizeToken returns the token of ino's File if it is open on this mount
// (client.File.SizeToken), else the zero token.
func (fs *fileSystem) sizeToken(ino uint64) client.SizeToken {
	if fs.nopen.Load() == 0 {
		return client.SizeToken{}
	}
	fs.mu.Lock()
	of := fs.mu.files[ino]
	fs.mu.Unlock()
	if of == nil {
		return client.SizeToken{}
	}
	return of.f.SizeToken()
}

// drop drops a reference and reports whether it was the last one.
func (fs *fileSystem) drop(of *openFile) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	of.refs--
	return of.refs == 0
}

// retire takes of out of the table of open files after drop returned its
// last reference and the data was sent, unless it was referenced again
// meanwhile. Of several callers whose drop returned true for the same
// openFile (a reference taken and dropped again while the first was
// sending the data), exactly one retires it: the table and nopen change
// once, and only that caller releases the File.
func (fs *fileSystem) retire(of *openFile, flushed bool) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if of.refs > 0 || of.retired {
		return false
	}
	of.retired = true
	if of.written.Load() || of.pend.wasSent() {
		// Kept a while: a reply to a request that began before now
		// may predate the file's last commits (fileSystem.adjust).
		// Set before the file leaves the table (adjust reads in the
		// other order).
		of.retiredAt = fs.c.Mark()
		if fs.mu.retired == nil || len(fs.mu.retired) >= maxRetired {
			fs.mu.retired = make(map[uint64]*openFile)
		}
		fs.mu.retired[of.ino] = of
		fs.lastRetired.Store(uint64(of.retiredAt))
	}
	if fs.mu.files[of.ino] == of {
		delete(fs.mu.files, of.ino)
		fs.nopen.Add(-1)
	}
	if of.written.Load() {
		// Our own writes changed mtime and size. The kernel's pages hold
		// what they wrote (writes go through its page cache to us): if
		// every write reached the servers, the file as they left it is
		// what the next open may keep; whether it is still so, the open
		// tells by the mtime and size. Otherwise the next open starts
		// with a clean cache.
		if mtime, size, ok := of.f.OwnAttr(); ok && flushed {
			fs.mu.seen[of.ino] = stamp{mtime, size}
		} else {
			delete(fs.mu.seen, of.ino)
		}
	}
	return true
}

// unref drops a reference; the last one sends the file's data, releases
// the File and removes the file's orphan link, if any.
func (fs *fileSystem) unref(of *openFile) {
	if !fs.drop(of) {
		return
	}
	// A file not written through this mount (every write, truncate and
	// mmap write-back through it sets written) has no data to send and
	// nothing to make durable: its release waits for nothing and needs no
	// operation deadline (a timer per release of a file only read).
	ctx := fs.ctx
	flushed := true
	if of.written.Load() || of.pinned.Load() {
		var cancel context.CancelFunc
		ctx, cancel = fs.op(nil, 0)
		defer cancel()
		// Send the data while the file is still in the table, so that an
		// open racing with this release shares the File instead of
		// reading around data not yet sent.
		if err := of.f.FlushContext(ctx); err != nil {
			flushed = false
			fs.log.Warn("fuse: release: writing back failed", "ino", of.ino, "err", err)
		}
	}
	if !fs.retire(of, flushed) {
		return
	}
	if err := of.f.Release(ctx, fs.opts.SyncOnClose); err != nil {
		fs.log.Warn("fuse: release failed", "ino", of.ino, "err", err)
	}
	if of.pinned.Load() {
		if err := fs.orphans.unpin(ctx, of.ino); err != nil {
			fs.log.Warn("fuse: freeing unlinked file failed", "ino", of.ino, "err", err)
		}
	}
}

// pinIfOpen links parent/name into the orphan directory if it is a regular
// file open on this mount, so that the unlink or rename about to drop its
// last link leaves it readable and writable through the open handles. A
// rename looks the name up as the metadata service has it now (now): it
// must not wait for this mount's queued renames (under the absorb policy
// they wait for drains; a rename never blocks the writer), which it
// queues behind; an unlink waits for them, as its own call does.
func (fs *fileSystem) pinIfOpen(ctx context.Context, parent uint64, name string, now bool) error {
	if fs.nopen.Load() == 0 || fs.orphans == nil {
		return nil
	}
	lookup := fs.c.LookupIno
	if now {
		lookup = fs.c.LookupInoNow
	}
	a, err := lookup(ctx, parent, name)
	if err != nil || !a.IsRegular() {
		return nil // the operation itself reports what is wrong
	}
	of := fs.ref(a.Ino)
	if of == nil {
		return nil
	}
	defer fs.unref(of)
	if !of.pinned.CompareAndSwap(false, true) {
		return nil
	}
	if err := fs.orphans.pin(ctx, a.Ino); err != nil {
		of.pinned.Store(false)
		return err
	}
	return nil
}

// openRegular opens regular file a for a handle with the kernel's open
// flags and returns the handle, the FOPEN flags and the backing ID of a
// passthrough open.
//
// since is the token of the File open on the inode, if one was, taken
// before a was asked for (sizeToken).
func (fs *fileSystem) openRegular(ctx context.Context, a client.InodeAttr, flags uint32, created bool, since client.SizeToken, opened *client.Opened) (uint64, uint32, int32, error) {
	of, err := fs.acquire(ctx, a)
	if err != nil {
		return 0, 0, 0, err
	}
	// The mode first: a write open refused for it must not truncate.
	mode, backing, err := fs.chooseMode(of, a, flags, created)
	if err != nil {
		fs.unref(of)
		return 0, 0, 0, err
	}
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY && a.Size > 0 {
		if err := of.f.Truncate(ctx, 0); err != nil {
			fs.endMode(of, mode)
			fs.unref(of)
			return 0, 0, 0, err
		}
		of.written.Store(true)
		a.Size = 0
	}
	// Keep the kernel's cached pages only if the file is unchanged since
	// this mount last opened it (close-to-open consistency).
	st := stamp{a.Mtime, a.Size}
	fs.mu.Lock()
	prev, ok := fs.mu.seen[a.Ino]
	keep := ok && prev == st
	if len(fs.mu.seen) >= maxSeen {
		clear(fs.mu.seen)
	}
	fs.mu.seen[a.Ino] = st
	fs.mu.Unlock()
	if keep {
		of.f.Seen(a) // this open's size, for its reads (close-to-open)
	} else {
		// Changed since this mount last knew it: the File, if an earlier
		// open left it (or one is still open), must forget what it
		// cached and, unless it holds unsent writes, take this size,
		// also a smaller one.
		of.f.Reopened(a, since)
	}
	if opened != nil && mode == modeCached && flags&syscall.O_ACCMODE == syscall.O_RDONLY && a.Size > 0 {
		of.f.Prime(ctx, *opened, since)
	}
	ks, known := fs.kstamps.get(a.Ino)
	keepPages, notify, direct := openCaching(keep, created, ks.toldOf(st), a.Size, ks.bound, known)
	var oflags uint32
	if keepPages {
		oflags |= fuse.FOPEN_KEEP_CACHE
	}
	if notify {
		// The kernel may hold attributes from before the change (a size
		// from a lookup up to AttrTimeout ago): make it ask again. Not
		// when what it was last told is what the open found (a lookup
		// just before the open, as in every open of a path).
		fs.notifyAttr(a.Ino)
		if opened != nil {
			epoch, cursor := opened.FeedPosition()
			fs.kstamps.fresh(a.Ino, epoch, cursor)
		}
	}
	if direct {
		// The kernel may believe the file larger than the open found it
		// (another client cut it, and the reply that told the kernel so
		// may have been dropped: attrs.go): its cached reads would
		// return bytes past the end. This open's reads and writes go to
		// the mount, which knows the size.
		oflags |= fuse.FOPEN_DIRECT_IO
	}
	if mode == modePassthrough {
		oflags = fuse.FOPEN_PASSTHROUGH
	}
	h := &handle{of: of, mode: mode, sync: flags&syscall.O_DSYNC != 0} // O_SYNC includes O_DSYNC
	h.created, h.writable = created, flags&syscall.O_ACCMODE != syscall.O_RDONLY
	if created && h.writable {
		of.pend.remember(a)
		of.creators.Add(1)
	}
	h.appendEnd = oflags&fuse.FOPEN_DIRECT_IO != 0 && flags&syscall.O_APPEND != 0
	if flags&syscall.O_ACCMODE == syscall.O_RDONLY && !h.sync {
		// Flush has nothing to do for a read-only descriptor (the data
		// of other handles is sent at their own close): spare the
		// request at every close. The kernel ignores this flag with the
		// writeback cache, whose close writes the dirty pages back.
		oflags |= fuse.FOPEN_NOFLUSH
	}
	return fs.addHandle(h), oflags, backing, nil
}

func (fs *fileSystem) Open(intr <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if in.Flags&syscall.O_TRUNC != 0 {
		intr = nil // a truncating open changes the file
	}
	ctx, cancel := fs.op(intr, in.Pid)
	defer cancel()
	// Always ask (close-to-open): attributes from a lookup a moment ago
	// may be from an earlier system call of the same thread (a stat, a
	// rename's lookup) that another client's close followed. Taking those
	// instead (ADR 0014 rule 4, removed) let TestTwoMountsRandom read a
	// file's old bytes after the other mount's close.
	since := fs.sizeToken(in.NodeId)
	// With the attributes come a small file's bytes and a released file's
	// HSM record: its first read needs no other metadata request.
	a, opened, err := fs.c.OpenAttrIno(ctx, in.NodeId)
	if err != nil {
		return fs.inodeStatus(ctx, "open", err)
	}
	if in.Mode&fuse.OPEN_KILL_SUIDGID != 0 {
		// O_TRUNC by a process without CAP_FSETID (setid.go).
		changed, err := fs.killSetID(ctx, &a)
		if err != nil {
			return fs.inodeStatus(ctx, "open", err)
		}
		if changed {
			fs.notifyAttr(a.Ino)
		}
	}
	fh, oflags, backing, err := fs.openRegular(ctx, a, in.Flags, false, since, &opened)
	if err != nil {
		return fs.inodeStatus(ctx, "open", err)
	}
	out.Fh, out.OpenFlags, out.BackingID = fh, oflags, backing
	return fuse.OK
}

func (fs *fileSystem) Create(_ <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if fs.reserved(in.NodeId, name) {
		return fuse.EPERM
	}
	g, tok := fs.gen(), fs.c.PendingToken()
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	excl := in.Flags&syscall.O_EXCL != 0
	a, err := fs.c.CreateIno(ctx, in.NodeId, name, syscall.S_IFREG|in.Mode&0o7777, 0, owner(&in.InHeader), excl)
	fs.entryChanged(in.NodeId, name, true, err)
	if err != nil {
		return fs.status(ctx, "create", err)
	}
	fh, oflags, backing, err := fs.openRegular(ctx, a, in.Flags, true, client.SizeToken{}, nil)
	if err != nil {
		return fs.status(ctx, "create", err)
	}
	fs.fillEntry(g, tok, &a, &out.EntryOut)
	out.Fh, out.OpenFlags, out.BackingID = fh, oflags, backing
	return fuse.OK
}

func (fs *fileSystem) Read(intr <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	of := fs.fileHandle(in.Fh)
	if of == nil {
		return nil, fuse.EBADF
	}
	ctx, cancel := fs.op(intr, in.Pid)
	defer cancel()
	dst := buf[:min(len(buf), int(in.Size))]
	n, err := of.f.ReadAtParallel(ctx, dst, int64(in.Offset))
	if (err == nil || errors.Is(err, io.EOF)) && n < len(dst) && fs.opts.WritebackCache && in.Flags&syscall.O_DIRECT != 0 {
		// A direct read that this mount answers short, under the
		// writeback cache: the kernel may hold written pages past the
		// end this mount knows (a hole read below data not sent yet),
		// and it reads direct I/O here without writing them back first.
		// Invalidating the file's pages makes the kernel write its dirty
		// ones back (it launders them); then read again. A read that is
		// still short is at the end of the file.
		if st := fs.srv.InodeNotify(in.NodeId, 0, 0); st == fuse.OK {
			n, err = of.f.ReadAtParallel(ctx, dst, int64(in.Offset))
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fs.status(ctx, "read", err)
	}
	return fuse.ReadResultData(dst[:n]), fuse.OK
}

func (fs *fileSystem) Write(_ <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	h := fs.handle(in.Fh)
	if h == nil || h.of == nil {
		return 0, fuse.EBADF
	}
	of := h.of
	off := in.Offset
	if h.appendEnd {
		off = uint64(of.f.KnownSize())
	}
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	// Held attribute changes go first: the write's commit sets the
	// modification time after them, as it would have.
	if err := fs.applyPending(ctx, of); err != nil {
		return 0, fs.status(ctx, "write", err)
	}
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
		// A process without CAP_FSETID (setid.go).
		if err := fs.killSetIDOpen(ctx, of); err != nil {
			return 0, fs.status(ctx, "write", err)
		}
	}
	of.written.Store(true)
	fs.kstamps.grew(of.ino, in.Offset+uint64(len(data))) // the kernel moves its size itself
	n, err := of.f.WriteAtContext(ctx, data, int64(off))
	if err != nil {
		return uint32(n), fs.status(ctx, "write", err)
	}
	return uint32(n), fuse.OK
}

// Fallocate is fallocate(2) on an open file: without flags the file grows
// to the range's end; KEEP_SIZE alone changes nothing (no space is
// reserved); PUNCH_HOLE (with KEEP_SIZE, as the kernel requires) and
// ZERO_RANGE make the range read as zeros, written as zeros (nothing is
// freed). The kernel drops its cached pages of a zeroed range and moves
// its own size. Other modes (collapse, insert, unshare; the kernel passes
// none of them to FUSE today) answer EOPNOTSUPP.
func (fs *fileSystem) Fallocate(_ <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	h := fs.handle(in.Fh)
	if h == nil || h.of == nil {
		return fuse.EBADF
	}
	of := h.of
	mode := in.Mode
	if mode&^(unix.FALLOC_FL_KEEP_SIZE|unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_ZERO_RANGE) != 0 || mode&unix.FALLOC_FL_PUNCH_HOLE != 0 && mode&unix.FALLOC_FL_ZERO_RANGE != 0 {
		return fuse.Status(syscall.EOPNOTSUPP)
	}
	if mode&unix.FALLOC_FL_PUNCH_HOLE != 0 && mode&unix.FALLOC_FL_KEEP_SIZE == 0 {
		return fuse.EINVAL
	}
	off, n := int64(in.Offset), int64(in.Length)
	if off < 0 || n <= 0 || off+n < off {
		return fuse.EINVAL
	}
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	if err := fs.applyPending(ctx, of); err != nil {
		return fs.status(ctx, "fallocate", err)
	}
	keep := mode&unix.FALLOC_FL_KEEP_SIZE != 0
	var err error
	switch {
	case mode&(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_ZERO_RANGE) != 0:
		err = of.f.ZeroRange(ctx, off, n, keep)
	case keep:
		return fuse.OK // nothing to reserve
	default:
		err = of.f.Allocate(ctx, off+n)
	}
	if err != nil {
		return fs.status(ctx, "fallocate", err)
	}
	of.written.Store(true)
	if !keep {
		fs.kstamps.grew(of.ino, uint64(off+n)) // the kernel moves its size itself
	}
	return fuse.OK
}

// Lseek answers lseek(2)'s SEEK_DATA and SEEK_HOLE from the chunks' map
// of their data (client.File.SeekData, SeekHole); the kernel answers the
// other whences itself. The kernel does not write its dirty pages back
// before asking: while this mount has the file open for writing (a shared
// writable mapping, or the writeback cache, may hold data the chunks have
// not seen), the file's pages are invalidated first, which makes the
// kernel write its dirty ones back (it launders them), as a direct read
// under the writeback cache does.
func (fs *fileSystem) Lseek(_ <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	h := fs.handle(in.Fh)
	if h == nil || h.of == nil {
		return fuse.EBADF
	}
	if in.Whence != unix.SEEK_DATA && in.Whence != unix.SEEK_HOLE {
		return fuse.EINVAL
	}
	off := int64(in.Offset)
	if off < 0 {
		return fuse.Status(syscall.ENXIO)
	}
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	laundered := true
	if fs.openForWriting(h.of) && fs.srv != nil {
		// ENOENT: the kernel holds no pages of the inode.
		st := fs.srv.InodeNotify(in.NodeId, 0, 0)
		laundered = st == fuse.OK || st == fuse.ENOENT
	}
	var at int64
	var err error
	switch {
	case !laundered:
		// Unsure of the kernel's pages: the whole file is data.
		var fi *client.FileInfo
		if fi, err = h.of.f.Stat(); err == nil {
			switch {
			case off >= fi.Size():
				err = io.EOF
			case in.Whence == unix.SEEK_HOLE:
				at = fi.Size()
			default:
				at = off
			}
		}
	case in.Whence == unix.SEEK_HOLE:
		at, err = h.of.f.SeekHole(ctx, off)
	default:
		at, err = h.of.f.SeekData(ctx, off)
	}
	if errors.Is(err, io.EOF) {
		return fuse.Status(syscall.ENXIO)
	}
	if err != nil {
		return fs.status(ctx, "lseek", err)
	}
	out.Offset = uint64(at)
	return fuse.OK
}

// openForWriting reports whether a handle of this mount has of open for
// writing.
func (fs *fileSystem) openForWriting(of *openFile) bool {
	fs.hmu.RLock()
	defer fs.hmu.RUnlock()
	for _, h := range fs.handles {
		if h.of == of && h.writable {
			return true
		}
	}
	return false
}

// Flush is close(2) of one descriptor: send the buffered data, so that
// errors reach the closing program and other mounts see the data. The
// close of a descriptor opened with O_SYNC or O_DSYNC also makes the data
// and the metadata (the create, the size) durable, as fsync does.
// Read-only descriptors without O_SYNC are opened with FOPEN_NOFLUSH: the
// kernel sends no Flush at their close.
func (fs *fileSystem) Flush(_ <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	h := fs.handle(in.Fh)
	if h == nil || h.of == nil {
		return fuse.OK
	}
	of := h.of
	if h.writable {
		// Attribute changes held until the close (deferred.go).
		ctx, cancel := fs.op(nil, 0)
		err := fs.applyPending(ctx, of)
		cancel()
		if err != nil {
			return fs.status(ctx, "flush", err)
		}
	}
	if h.sync {
		ctx, cancel := fs.op(nil, 0)
		defer cancel()
		return fs.status(ctx, "flush", of.f.SyncContext(ctx))
	}
	if !of.written.Load() {
		return fuse.OK
	}
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	return fs.status(ctx, "flush", of.f.FlushContext(ctx))
}

// Fsync (and fdatasync) makes the file's data durable on the targets, then
// its metadata on the metadata service (File.SyncContext does both).
func (fs *fileSystem) Fsync(_ <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	of := fs.fileHandle(in.Fh)
	if of == nil {
		return fuse.EBADF
	}
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	if err := fs.applyPending(ctx, of); err != nil {
		return fs.status(ctx, "fsync", err)
	}
	return fs.status(ctx, "fsync", of.f.SyncContext(ctx))
}

// Release ends a handle. For one opened with O_SYNC or O_DSYNC, Flush
// already synced at close(2); the handle's writes through a mapping may
// have come after, so Release syncs the metadata again (cheap when
// nothing is unsynced).
func (fs *fileSystem) Release(_ <-chan struct{}, in *fuse.ReleaseIn) {
	if h := fs.removeHandle(in.Fh); h != nil && h.of != nil {
		if h.writable {
			// Normally sent at the close already (FLUSH).
			ctx, cancel := fs.op(nil, 0)
			if h.created {
				h.of.creators.Add(-1)
			}
			if err := fs.applyPending(ctx, h.of); err != nil {
				fs.log.Warn("fuse: attribute changes held until the release failed", "ino", h.of.ino, "err", err)
			}
			cancel()
		}
		fs.endMode(h.of, h.mode)
		fs.unref(h.of)
		if h.sync {
			ctx, cancel := fs.op(nil, 0)
			defer cancel()
			if err := fs.c.SyncMeta(ctx); err != nil {
				fs.log.Warn("fuse: syncing metadata at the release of a synchronous file failed", "err", err)
			}
		}
	}
}

// flushAll sends the buffered data of every open file (before unmounting).
func (fs *fileSystem) flushAll(ctx context.Context) {
	fs.mu.Lock()
	var open []*openFile
	for _, of := range fs.mu.files {
		open = append(open, of)
	}
	fs.mu.Unlock()
	for _, of := range open {
		err := fs.applyPending(ctx, of)
		if err == nil {
			err = of.f.FlushContext(ctx)
		}
		if err != nil {
			fs.log.Warn("fuse: writing back before unmount failed", "ino", of.ino, "err", err)
		}
	}
}
