package fusefs

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// rootIno is the FUSE node ID of the root, which must also be the Sluice
// root's inode number (Mount checks): node IDs are inode numbers.
const rootIno = fuse.FUSE_ROOT_ID

// blockSize is st_blksize: the I/O size tools like cp and stdio use.
const blockSize = 1 << 20

// fileSystem is the fuse.RawFileSystem. Operations it does not implement
// (locks, copy_file_range, ioctl, lseek) answer ENOSYS from the
// embedded default, and the kernel falls back to its generic code.
//
// Lock order: mu, then a File's own lock (through client methods); hmu is
// never held with mu. Neither is held during a request to a server.
type fileSystem struct {
	fuse.RawFileSystem

	c       *client.Client
	opts    *Options
	log     *slog.Logger
	ctx     context.Context // the mount's lifetime; operations derive deadlines from it
	srv     *fuse.Server    // set by Init, before the first request
	orphans *orphans        // nil when the orphan directory could not be set up

	mu struct {
		sync.Mutex
		files map[uint64]*openFile // open regular files by inode
		seen  map[uint64]stamp     // a file's mtime and size when this mount last opened it
		// retired: files whose last handle was released, written through
		// this mount, by inode (fileSystem.adjust).
		retired map[uint64]*openFile
	}
	nopen atomic.Int64 // len(mu.files), read without the lock
	// lastRetired is the retiredAt of the file retired last: a reply to
	// a request begun before it may need a retired file's adjustment.
	lastRetired atomic.Uint64
	// noPassthrough is set when the kernel refused a backing file.
	noPassthrough atomic.Bool
	// kstamps: what the kernel was last told of each regular file.
	kstamps kernelStamps
	// dirs: directories' attributes sent with this mount's entry changes.
	dirs dirAttrs
	// feed: following the metadata service's change feed (feed.go).
	feed feedState
	// complete: the names of directories this mount made (complete.go).
	complete completeDirs

	hmu     sync.RWMutex
	handles map[uint64]*handle // by FUSE file handle; guarded by hmu
	nextFh  uint64             // guarded by hmu
}

// stamp is what a cached file's pages are checked against at open.
type stamp struct {
	mtime int64
	size  uint64
}

// maxSeen bounds fileSystem.mu.seen; when it is full it is cleared, which
// only costs a re-read of files opened again.
const maxSeen = 1 << 20

// maxRetired bounds fileSystem.mu.retired; when it is full it is cleared.
// Only a reply to a request that began before a file's retirement needs
// its entry, so what clearing loses is a request that crossed more than
// maxRetired retirements.
const maxRetired = 1024

// openFile is the state shared by all handles of one regular file.
type openFile struct {
	ino     uint64
	f       *client.File
	refs    int         // open handles and in-progress operations; guarded by fileSystem.mu
	retired bool        // taken out of fileSystem.mu.files; guarded by fileSystem.mu
	modeMu  sync.Mutex  // serializes the opens and releases of the file's handles
	modes   ioModes     // guarded by modeMu
	pinned  atomic.Bool // linked into the orphan directory
	written atomic.Bool // written through this mount since it was opened
	// mode is the file's mode in the latest attributes this mount saw
	// (setid.go).
	mode atomic.Uint32
	// pend: attribute changes held until the file's close (deferred.go).
	pend pendingAttrs
	// retiredAt: when it was retired (client.Mark); guarded by
	// fileSystem.mu.
	retiredAt client.PendingToken
	// creators counts the open handles of creates of the file through
	// this mount that may write (deferred.go).
	creators atomic.Int32
}

// handle is an open file or directory.
type handle struct {
	of   *openFile  // regular file
	dir  *dirHandle // directory
	mode ioMode     // of a regular file
	// sync: opened with O_SYNC or O_DSYNC, so its close makes data and
	// metadata durable.
	sync bool
	// appendEnd: opened with O_APPEND around the page cache because the
	// kernel may believe the file larger than it is (attrs.go): its
	// writes go to the end the mount knows, not the offset the kernel
	// computed from its size.
	appendEnd bool
	// created: the handle of the create that made the file; writable:
	// opened for writing (deferred.go).
	created, writable bool
}

func newFileSystem(ctx context.Context, c *client.Client, opts *Options) *fileSystem {
	fs := &fileSystem{
		RawFileSystem: fuse.NewDefaultRawFileSystem(),
		c:             c,
		opts:          opts,
		log:           opts.Logger,
		ctx:           ctx,
		handles:       make(map[uint64]*handle),
	}
	fs.mu.files = make(map[uint64]*openFile)
	fs.mu.seen = make(map[uint64]stamp)
	if opts.AttrTimeout > 0 {
		c.OnDirChange(func(a client.InodeAttr) { fs.dirs.put(a, time.Now()) })
	}
	return fs
}

func (fs *fileSystem) String() string { return "sluice" }

func (fs *fileSystem) Init(srv *fuse.Server) { fs.srv = srv }

// op returns the context of one operation: the mount's, with the
// operation deadline.
//
// intr is the request's interrupt channel, for operations that change
// nothing (lookups, attributes, reads, directory listings): when the
// kernel interrupts the request and its caller has a signal pending that
// stops it (Ctrl-C; see interrupt.go), the operation stops waiting and
// answers EINTR at once instead of holding the caller until the timeout.
// Operations that change something get nil: stopping one halfway could
// leave half a change (an unlink of an open file without its orphan
// entry), so they complete or time out.
//
// Nothing watches intr during an operation's first interruptWait: most
// operations are over long before, and a goroutine started for each one
// costs more than the operation's own work in the mount (a thread wake-up
// per request). An interrupt that came meanwhile is seen when the watch
// starts.
func (fs *fileSystem) op(intr <-chan struct{}, pid uint32) (context.Context, context.CancelFunc) {
	ctx, stop := context.WithTimeout(fs.ctx, fs.opts.OpTimeout)
	if intr == nil {
		return ctx, stop
	}
	ctx, interrupt := context.WithCancelCause(ctx)
	watch := time.AfterFunc(interruptWait, func() { watchInterrupt(ctx, intr, pid, interrupt) })
	return ctx, func() {
		watch.Stop()
		interrupt(nil)
		stop()
	}
}

// watchInterrupt waits until the kernel interrupts the request or ctx
// (the operation) ends; after an interrupt it cancels the operation once
// the caller is stopping, looking every interruptPoll.
func watchInterrupt(ctx context.Context, intr <-chan struct{}, pid uint32, interrupt context.CancelCauseFunc) {
	select {
	case <-intr:
	case <-ctx.Done():
		return
	}
	t := time.NewTicker(interruptPoll)
	defer t.Stop()
	for !callerStopping(pid) {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	interrupt(errInterrupted)
}

var errInterrupted = errors.New("fuse: operation interrupted")

// status translates err to the errno the caller gets. This is the one
// place where Sluice errors become errnos.
func (fs *fileSystem) status(ctx context.Context, op string, err error) fuse.Status {
	if err == nil {
		return fuse.OK
	}
	if err == errPassthroughBusy {
		return fuse.Status(syscall.ETXTBSY)
	}
	if context.Cause(ctx) == errInterrupted {
		return fuse.Status(syscall.EINTR)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		fs.log.Warn("fuse: operation timed out", "op", op, "timeout", fs.opts.OpTimeout, "err", err)
		return fuse.Status(syscall.ETIMEDOUT)
	}
	en := errs.Errno(err)
	if en == syscall.EIO {
		fs.log.Warn("fuse: operation failed", "op", op, "err", err)
	} else if fs.opts.Debug {
		fs.log.Debug("fuse: operation failed", "op", op, "err", err)
	}
	return fuse.Status(en)
}

// inodeStatus is status for an operation on an inode the kernel named by
// its node ID: an inode the metadata service no longer has gives ESTALE,
// not ENOENT. The kernel reached it through a cached name that another
// client removed or renamed meanwhile (the change feed drops such names,
// but after the fact); on ESTALE the kernel walks the path again with
// fresh lookups, so that an open(O_CREAT), a stat or a truncate of the
// name acts on what the name is now instead of failing with ENOENT.
func (fs *fileSystem) inodeStatus(ctx context.Context, op string, err error) fuse.Status {
	if err != nil && errs.CodeOf(err) == errs.NotFound && context.Cause(ctx) != errInterrupted && ctx.Err() == nil {
		return fuse.Status(syscall.ESTALE)
	}
	return fs.status(ctx, op, err)
}

// reserved reports whether parent/name is the hidden orphan directory,
// which no operation may touch.
func (fs *fileSystem) reserved(parent uint64, name string) bool {
	return parent == rootIno && name == orphanRootName
}

func owner(h *fuse.InHeader) client.Owner { return client.Owner{Uid: h.Uid, Gid: h.Gid} }

func splitNs(ns int64) (uint64, uint32) {
	if ns < 0 {
		return 0, 0
	}
	return uint64(ns / 1e9), uint32(ns % 1e9)
}

// adjust corrects attributes from the metadata service with what this
// mount knows better: data of an open file not yet committed to the
// metadata when the request that returned a began (tok, taken then: a
// commit that finished while the request was in flight may be missing
// from a), the link in the orphan directory, and the hidden orphan
// directory in the root.
func (fs *fileSystem) adjust(a *client.InodeAttr, tok client.PendingToken) {
	if a.Ino == rootIno && fs.orphans != nil && a.Nlink > 2 {
		a.Nlink--
	}
	if !a.IsRegular() {
		return
	}
	// nopen before lastRetired: retire sets lastRetired before it takes
	// the file out of the table.
	if fs.nopen.Load() == 0 && client.PendingToken(fs.lastRetired.Load()) <= tok {
		return
	}
	fs.mu.Lock()
	of := fs.mu.files[a.Ino]
	var gone *openFile
	if client.PendingToken(fs.lastRetired.Load()) > tok {
		gone = fs.mu.retired[a.Ino]
	}
	fs.mu.Unlock()
	if gone != nil && gone.retiredAt > tok {
		// Closed while the request was in flight: its last data and
		// attribute changes may have been committed after the service
		// answered.
		gone.overlayPending(a, tok)
		if gone.f.PendingSince(tok) {
			a.Size = max(a.Size, uint64(gone.f.KnownSize()))
		}
	}
	if of == nil {
		return
	}
	of.overlayPending(a, tok)
	of.mode.Store(a.Mode)
	// The kernel is about to be told a.Size: reads up to it must not be
	// cut at a smaller size the File trusts.
	of.f.Seen(*a)
	if of.f.PendingSince(tok) {
		a.Size = max(a.Size, uint64(of.f.KnownSize()))
	}
	if of.pinned.Load() && a.Nlink > 0 {
		a.Nlink--
	}
}

func fillAttr(a *client.InodeAttr, out *fuse.Attr) {
	out.Ino = a.Ino
	out.Size = a.Size
	out.Blocks = (a.Size + 511) / 512
	if a.Released() {
		out.Blocks = 0 // its bytes are in the object tier: du counts none (as Lustre HSM)
	}
	out.Atime, out.Atimensec = splitNs(a.Atime)
	out.Mtime, out.Mtimensec = splitNs(a.Mtime)
	out.Ctime, out.Ctimensec = splitNs(a.Ctime)
	out.Mode = a.Mode
	out.Nlink = a.Nlink
	out.Uid, out.Gid = a.Uid, a.Gid
	out.Rdev = a.Rdev
	out.Blksize = blockSize
}

// tellKernel records the attributes of a reply to the kernel; certain:
// the kernel applies them whatever crossed the reply (a setattr's).
func (fs *fileSystem) tellKernel(a *client.InodeAttr, certain bool) {
	if a.IsRegular() {
		fs.kstamps.put(a.Ino, stamp{a.Mtime, a.Size}, time.Now(), certain)
	}
}

// fillEntry fills a reply's entry from a; g is the feed generation and
// tok the pending token when the request began (fs.gen, fs.c.PendingToken).
func (fs *fileSystem) fillEntry(g uint64, tok client.PendingToken, a *client.InodeAttr, out *fuse.EntryOut) {
	fs.adjust(a, tok)
	fs.tellKernel(a, false)
	out.NodeId = a.Ino
	out.Generation = 1 // inode numbers are never reused
	t := fs.ttl(g)
	out.SetEntryTimeout(t.entry)
	out.SetAttrTimeout(t.attr)
	fillAttr(a, &out.Attr)
}

func (fs *fileSystem) Lookup(intr <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if fs.reserved(h.NodeId, name) {
		return fuse.ENOENT
	}
	g, tok := fs.gen(), fs.c.PendingToken()
	if fs.completeUsable() && fs.complete.absent(h.NodeId, name) {
		// A directory this mount made, whose every name it knows.
		if t := fs.ttl(g); t.neg > 0 {
			*out = fuse.EntryOut{}
			out.SetEntryTimeout(t.neg)
			return fuse.OK
		}
		return fuse.ENOENT
	}
	ctx, cancel := fs.op(intr, h.Pid)
	defer cancel()
	a, err := fs.c.LookupIno(ctx, h.NodeId, name)
	if err != nil {
		if t := fs.ttl(g); errs.CodeOf(err) == errs.NotFound && t.neg > 0 {
			// Node ID 0: "no such entry", cached for the entry timeout.
			*out = fuse.EntryOut{}
			out.SetEntryTimeout(t.neg)
			return fuse.OK
		}
		return fs.status(ctx, "lookup", err)
	}
	fs.fillEntry(g, tok, &a, out)
	return fuse.OK
}

func (fs *fileSystem) GetAttr(intr <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	g, tok := fs.gen(), fs.c.PendingToken()
	if a, ttl, ok := fs.dirs.get(in.NodeId, fs.ttl(g).attr, time.Now()); ok {
		// A directory this mount just changed an entry in (dirattrs.go).
		fs.adjust(&a, tok)
		fillAttr(&a, &out.Attr)
		out.SetTimeout(ttl)
		return fuse.OK
	}
	ctx, cancel := fs.op(intr, in.Pid)
	defer cancel()
	a, err := fs.c.GetAttrIno(ctx, in.NodeId)
	if err != nil {
		return fs.inodeStatus(ctx, "getattr", err)
	}
	fs.adjust(&a, tok)
	fs.tellKernel(&a, false)
	fillAttr(&a, &out.Attr)
	out.SetTimeout(fs.ttl(g).attr)
	return fuse.OK
}

func (fs *fileSystem) SetAttr(_ <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	g, tok := fs.gen(), fs.c.PendingToken()
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	ino := in.NodeId
	defer fs.changingDirs(ino)()
	of := fs.ref(ino)
	if of != nil {
		defer fs.unref(of)
	}
	var a client.InodeAttr
	var err error
	have := false
	ch, changes := setAttrChange(in)
	if of != nil {
		if changes && fs.deferSetAttr(in, of, ch, out, g) {
			return fuse.OK
		}
		// Held changes go first: this one may be ordered after them.
		if err := fs.applyPending(ctx, of); err != nil {
			return fs.inodeStatus(ctx, "setattr", err)
		}
	}
	if size, ok := in.GetSize(); ok {
		if of != nil {
			// Through the open File, so that its buffered writes land first.
			err = of.f.Truncate(ctx, int64(size))
			of.written.Store(true)
		} else {
			a, err = fs.c.TruncateIno(ctx, ino, int64(size))
			have = true
		}
		if err != nil {
			return fs.status(ctx, "truncate", err)
		}
	}
	if ch.Valid&(client.AttrMtime|client.AttrMtimeNow) != 0 && of != nil {
		// futimens after write: the buffered data must not be committed
		// after the new mtime, or the commit would overwrite it.
		if err := of.f.FlushContext(ctx); err != nil {
			return fs.inodeStatus(ctx, "setattr", err)
		}
	}
	switch {
	case ch.Valid != 0:
		a, err = fs.c.SetAttrIno(client.WithCaller(ctx, owner(&in.InHeader)), ino, ch)
	case !have:
		a, err = fs.c.GetAttrIno(ctx, ino)
	}
	if err == nil && in.Valid&fuse.FATTR_KILL_SUIDGID != 0 && a.IsRegular() {
		// A chown, or a truncate by a process without CAP_FSETID.
		_, err = fs.killSetID(ctx, &a)
	}
	if err != nil {
		return fs.inodeStatus(ctx, "setattr", err)
	}
	// What a file released before showed of its own changes is older
	// than this change, whose reply the kernel applies over any that
	// crossed it (a new open does not end it: a reply to a request that
	// crossed the close still needs it).
	fs.mu.Lock()
	delete(fs.mu.retired, ino)
	fs.mu.Unlock()
	if of != nil {
		of.pend.remember(a)
	}
	fs.adjust(&a, tok)
	fs.tellKernel(&a, true)
	fillAttr(&a, &out.Attr)
	out.SetTimeout(fs.ttl(g).attr)
	return fuse.OK
}

// setAttrChange returns the attribute changes of a SETATTR other than
// the size, and whether there are any.
func setAttrChange(in *fuse.SetAttrIn) (client.AttrChange, bool) {
	var ch client.AttrChange
	if mode, ok := in.GetMode(); ok {
		ch.Valid |= client.AttrMode
		ch.Mode = mode & 0o7777
	}
	if uid, ok := in.GetUID(); ok {
		ch.Valid |= client.AttrUid
		ch.Uid = uid
	}
	if gid, ok := in.GetGID(); ok {
		ch.Valid |= client.AttrGid
		ch.Gid = gid
	}
	switch {
	case in.Valid&fuse.FATTR_ATIME_NOW != 0:
		ch.Valid |= client.AttrAtimeNow
	case in.Valid&fuse.FATTR_ATIME != 0:
		ch.Valid |= client.AttrAtime
		ch.Atime = int64(in.Atime)*1e9 + int64(in.Atimensec)
	}
	switch {
	case in.Valid&fuse.FATTR_MTIME_NOW != 0:
		ch.Valid |= client.AttrMtimeNow
	case in.Valid&fuse.FATTR_MTIME != 0:
		ch.Valid |= client.AttrMtime
		ch.Mtime = int64(in.Mtime)*1e9 + int64(in.Mtimensec)
	}
	return ch, ch.Valid != 0
}

func (fs *fileSystem) Mknod(_ <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if fs.reserved(in.NodeId, name) {
		return fuse.EPERM
	}
	g, tok := fs.gen(), fs.c.PendingToken()
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	a, err := fs.c.CreateIno(ctx, in.NodeId, name, in.Mode, in.Rdev, owner(&in.InHeader), true)
	fs.entryChanged(in.NodeId, name, true, err)
	if err != nil {
		return fs.status(ctx, "mknod", err)
	}
	fs.fillEntry(g, tok, &a, out)
	return fuse.OK
}

func (fs *fileSystem) Mkdir(_ <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if fs.reserved(in.NodeId, name) {
		return fuse.EPERM
	}
	g, tok := fs.gen(), fs.c.PendingToken()
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	usable := fs.completeUsable()
	a, err := fs.c.MkdirIno(ctx, in.NodeId, name, in.Mode, owner(&in.InHeader))
	fs.entryChanged(in.NodeId, name, true, err)
	if err != nil {
		return fs.status(ctx, "mkdir", err)
	}
	if usable && fs.completeUsable() && fs.gen() == g {
		// Empty, and the feed applied no change since the mkdir began
		// (a change in it reported before this point would be lost).
		fs.complete.made(a.Ino)
	}
	fs.fillEntry(g, tok, &a, out)
	return fuse.OK
}

func (fs *fileSystem) Unlink(_ <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if fs.reserved(h.NodeId, name) {
		return fuse.EPERM
	}
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	err := fs.pinIfOpen(ctx, h.NodeId, name, false)
	if err == nil {
		err = fs.c.UnlinkIno(client.WithCaller(ctx, owner(h)), h.NodeId, name)
	}
	fs.entryChanged(h.NodeId, name, false, err)
	return fs.status(ctx, "unlink", err)
}

func (fs *fileSystem) Rmdir(_ <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if fs.reserved(h.NodeId, name) {
		return fuse.EPERM
	}
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	err := fs.c.RmdirIno(client.WithCaller(ctx, owner(h)), h.NodeId, name)
	fs.entryChanged(h.NodeId, name, false, err)
	return fs.status(ctx, "rmdir", err)
}

func (fs *fileSystem) Rename(_ <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if fs.reserved(in.NodeId, oldName) || fs.reserved(in.Newdir, newName) {
		return fuse.EPERM
	}
	if in.Flags&^(client.RenameNoReplace|client.RenameExchange) != 0 {
		return fuse.EINVAL // RENAME_WHITEOUT
	}
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	var err error
	if in.Flags == 0 {
		// The target, if it exists, loses a link: keep it alive if open.
		err = fs.pinIfOpen(ctx, in.Newdir, newName, true)
	}
	// Both directories change, and so does a renamed directory's ctime.
	fs.dirs.clear()
	defer fs.dirs.clear()
	if err == nil {
		err = fs.c.RenameIno(client.WithCaller(ctx, owner(&in.InHeader)), in.NodeId, oldName, in.Newdir, newName, in.Flags)
	}
	if in.Flags&client.RenameExchange == 0 || err != nil {
		// An exchange keeps both names. A rename onto another link of
		// the same inode succeeds and keeps both names too (POSIX), and
		// the mount cannot tell (the kernel skips it only when it knows
		// both names): the source directory's names are no longer known.
		fs.complete.drop(in.NodeId)
		fs.entryChanged(in.Newdir, newName, true, err)
	}
	return fs.status(ctx, "rename", err)
}

func (fs *fileSystem) Link(_ <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if fs.reserved(in.NodeId, name) {
		return fuse.EPERM
	}
	g, tok := fs.gen(), fs.c.PendingToken()
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	defer fs.changingDirs(in.NodeId)()
	a, err := fs.c.LinkIno(ctx, in.Oldnodeid, in.NodeId, name)
	fs.entryChanged(in.NodeId, name, true, err)
	if err != nil {
		return fs.status(ctx, "link", err)
	}
	fs.fillEntry(g, tok, &a, out)
	return fuse.OK
}

func (fs *fileSystem) Symlink(_ <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if fs.reserved(h.NodeId, name) {
		return fuse.EPERM
	}
	g, tok := fs.gen(), fs.c.PendingToken()
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	defer fs.changingDirs(h.NodeId)()
	a, err := fs.c.SymlinkIno(ctx, h.NodeId, name, target, owner(h))
	fs.entryChanged(h.NodeId, name, true, err)
	if err != nil {
		return fs.status(ctx, "symlink", err)
	}
	fs.fillEntry(g, tok, &a, out)
	return fuse.OK
}

func (fs *fileSystem) Readlink(intr <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	ctx, cancel := fs.op(intr, h.Pid)
	defer cancel()
	s, err := fs.c.ReadlinkIno(ctx, h.NodeId)
	if err != nil {
		return nil, fs.inodeStatus(ctx, "readlink", err)
	}
	return []byte(s), fuse.OK
}

// aclXattr reports whether name is a POSIX ACL attribute. The mount does
// not support ACLs: storing them as plain attributes would let cp -a and
// rsync -A believe they set a file's mode when they did not.
func aclXattr(name string) bool { return strings.HasPrefix(name, "system.posix_acl_") }

func (fs *fileSystem) GetXAttr(intr <-chan struct{}, h *fuse.InHeader, name string, dest []byte) (uint32, fuse.Status) {
	if aclXattr(name) {
		return 0, fuse.ENOATTR
	}
	ctx, cancel := fs.op(intr, h.Pid)
	defer cancel()
	v, err := fs.c.GetXattrIno(ctx, h.NodeId, name)
	if err != nil {
		return 0, fs.status(ctx, "getxattr", err)
	}
	if len(v) > len(dest) {
		return uint32(len(v)), fuse.ERANGE
	}
	return uint32(copy(dest, v)), fuse.OK
}

func (fs *fileSystem) ListXAttr(intr <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	ctx, cancel := fs.op(intr, h.Pid)
	defer cancel()
	names, err := fs.c.ListXattrIno(ctx, h.NodeId)
	if err != nil {
		return 0, fs.status(ctx, "listxattr", err)
	}
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte(0)
	}
	if b.Len() > len(dest) {
		return uint32(b.Len()), fuse.ERANGE
	}
	return uint32(copy(dest, b.String())), fuse.OK
}

func (fs *fileSystem) SetXAttr(_ <-chan struct{}, in *fuse.SetXAttrIn, name string, data []byte) fuse.Status {
	if aclXattr(name) {
		return fuse.Status(syscall.EOPNOTSUPP)
	}
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	defer fs.changingDirs(in.NodeId)()
	return fs.status(ctx, "setxattr", fs.c.SetXattrIno(ctx, in.NodeId, name, data, in.Flags))
}

func (fs *fileSystem) RemoveXAttr(_ <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	defer fs.changingDirs(h.NodeId)()
	return fs.status(ctx, "removexattr", fs.c.RemoveXattrIno(ctx, h.NodeId, name))
}

func (fs *fileSystem) StatFs(intr <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	ctx, cancel := fs.op(intr, h.Pid)
	defer cancel()
	st, err := fs.c.Statfs(ctx)
	if err != nil {
		return fs.status(ctx, "statfs", err)
	}
	const bsize = 4096
	*out = fuse.StatfsOut{
		Blocks:  uint64(max(st.Capacity, 0)) / bsize,
		Bfree:   uint64(max(st.Free, 0)) / bsize,
		Bavail:  uint64(max(st.Free, 0)) / bsize,
		Files:   st.Inodes + 1<<32,
		Ffree:   1 << 32,
		Bsize:   bsize,
		Frsize:  bsize,
		NameLen: 255,
	}
	return fuse.OK
}

// FsyncDir makes the directory's entries durable. The metadata service
// may acknowledge changes before they survive a power loss (its sync
// window, ADR 0006), so this asks it to sync: every change acknowledged
// so far, not only this directory's.
func (fs *fileSystem) FsyncDir(<-chan struct{}, *fuse.FsyncIn) fuse.Status {
	ctx, cancel := fs.op(nil, 0)
	defer cancel()
	return fs.status(ctx, "fsyncdir", fs.c.SyncMeta(ctx))
}

// Forget drops what the mount remembers of the attributes the kernel had
// cached: it has dropped the inode. Node IDs are inode numbers, so there
// is no other per-node state.
func (fs *fileSystem) Forget(nodeid, nlookup uint64) {
	fs.kstamps.drop(nodeid)
	fs.complete.drop(nodeid) // a removed directory, or one out of the kernel's mind
}

// notifyAttr tells the kernel to drop its cached attributes of ino.
func (fs *fileSystem) notifyAttr(ino uint64) {
	fs.kstamps.invalidated(ino, time.Now())
	if fs.srv == nil {
		return
	}
	// ENOENT: the kernel has no such inode cached; nothing to drop.
	if st := fs.srv.InodeNotify(ino, -1, 0); st != fuse.OK && st != fuse.ENOENT {
		fs.log.Debug("fuse: attribute invalidation failed", "ino", ino, "status", st)
	}
}
