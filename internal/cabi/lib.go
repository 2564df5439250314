package cabi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// Options configure a connection. Zero values take the defaults.
type Options struct {
	// Server is the metadata service's address (host:port, or several
	// separated by commas).
	Server string
	// ReadAhead is the sequential read-ahead window of each open file
	// (default: the client library's, 16 MiB); negative disables it.
	// Batch reads never read ahead.
	ReadAhead int64
	// ConnsPerServer is the number of TCP connections to each server
	// (default: the client library's).
	ConnsPerServer int
	// Timeout bounds each operation, and each item of a batch (default
	// 60 s), plus one second per 16 MiB it moves: past it the operation
	// fails with a *TimeoutError.
	Timeout time.Duration
	// StagingDir, if set, is a local directory where files created under
	// a directory with the absorb policy are staged before they drain to
	// the targets (client.Options.StagingDir, docs/checkpoint.md);
	// StagingMax bounds the bytes staged and not drained
	// (client.Options.StagingMax; 0: the default).
	StagingDir string
	StagingMax int64
}

// DefaultTimeout is the default of Options.Timeout.
const DefaultTimeout = 60 * time.Second

// DefaultInflight is how many items of a batch run at once when the
// caller does not say.
const DefaultInflight = 64

// Lib holds the handles of one process. It is safe for concurrent use.
type Lib struct {
	t *Table
}

// New returns a Lib with no handles.
func New() *Lib { return &Lib{t: NewTable()} }

// Handles returns the number of live handles (for leak checks).
func (l *Lib) Handles() int { return l.t.Len() }

// conn is a connected client.
type conn struct {
	c       *client.Client
	timeout time.Duration

	holdMu sync.Mutex
	holds  []func() // StagingHold's releases, last first
}

// do runs fn under the deadline of an operation that moves n bytes and
// turns running out of it into a *TimeoutError.
func (cn *conn) do(op, path string, n int64, fn func(ctx context.Context) error) error {
	d := cn.timeout + time.Duration(n>>24)*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	err := fn(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &TimeoutError{Op: op, Path: path, Timeout: d, Err: err}
	}
	return err
}

// file is an open file.
type file struct {
	f    *client.File
	conn *conn
	path string
}

// Connect connects to the server and returns a client handle.
func (l *Lib) Connect(o Options) (int64, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	co := client.Options{Server: o.Server, ConnsPerServer: o.ConnsPerServer, ReadAhead: int(o.ReadAhead),
		StagingDir: o.StagingDir, StagingMax: o.StagingMax}
	cn := &conn{timeout: o.Timeout}
	err := cn.do("connect", o.Server, 0, func(ctx context.Context) error {
		c, err := client.New(ctx, co)
		cn.c = c
		return err
	})
	if err != nil {
		return 0, err
	}
	return l.t.Add(KindClient, cn), nil
}

func (l *Lib) conn(h int64) (*conn, error) {
	v, err := l.t.Get(h, KindClient)
	if err != nil {
		return nil, err
	}
	return v.(*conn), nil
}

func (l *Lib) file(h int64) (*file, error) {
	v, err := l.t.Get(h, KindFile)
	if err != nil {
		return nil, err
	}
	return v.(*file), nil
}

// Disconnect closes a client handle. Files opened through it must not be
// used afterwards.
func (l *Lib) Disconnect(h int64) error {
	v, err := l.t.Remove(h, KindClient)
	if err != nil {
		return err
	}
	return v.(*conn).c.Close()
}

// Linux open(2) flags that Open understands.
const (
	oAccMode = syscall.O_ACCMODE
	oCreat   = syscall.O_CREAT
	oExcl    = syscall.O_EXCL
	oTrunc   = syscall.O_TRUNC
	oAppend  = syscall.O_APPEND
)

// Open opens path with Linux open(2) flags (O_RDONLY, O_WRONLY, O_RDWR,
// O_CREAT, O_EXCL, O_TRUNC, O_APPEND; others are refused) and returns a
// file handle.
func (l *Lib) Open(h int64, path string, flags int, perm uint32) (int64, error) {
	cn, err := l.conn(h)
	if err != nil {
		return 0, err
	}
	if flags&^(oAccMode|oCreat|oExcl|oTrunc|oAppend) != 0 || flags&oAccMode == oAccMode {
		return 0, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("flags %#x: %w", flags, client.ErrInvalid)}
	}
	var cf int
	switch flags & oAccMode {
	case syscall.O_RDONLY:
		cf = client.O_RDONLY
	case syscall.O_WRONLY:
		cf = client.O_WRONLY
	case syscall.O_RDWR:
		cf = client.O_RDWR
	}
	for _, m := range [][2]int{{oCreat, client.O_CREATE}, {oExcl, client.O_EXCL}, {oTrunc, client.O_TRUNC}, {oAppend, client.O_APPEND}} {
		if flags&m[0] != 0 {
			cf |= m[1]
		}
	}
	var f *client.File
	err = cn.do("open", path, 0, func(ctx context.Context) error {
		var err error
		// The File keeps ctx for its io-style methods, never called here:
		// every call below passes its own context.
		f, err = cn.c.OpenFile(ctx, path, cf, fs.FileMode(perm&0o777))
		return err
	})
	if err != nil {
		return 0, err
	}
	return l.t.Add(KindFile, &file{f: f, conn: cn, path: path}), nil
}

// Pread reads len(p) bytes at off into p and returns how many it read:
// fewer only at the end of the file, 0 at or past it.
func (l *Lib) Pread(h int64, p []byte, off int64) (int, error) {
	fl, err := l.file(h)
	if err != nil {
		return 0, err
	}
	var n int
	err = fl.conn.do("read", fl.path, int64(len(p)), func(ctx context.Context) error {
		var err error
		n, err = fl.f.ReadAtContext(ctx, p, off)
		if err == io.EOF {
			err = nil
		}
		return err
	})
	return n, err
}

// Pwrite writes p at off (into the client's write-back buffer: the data
// is durable after Fsync or Close).
func (l *Lib) Pwrite(h int64, p []byte, off int64) (int, error) {
	fl, err := l.file(h)
	if err != nil {
		return 0, err
	}
	var n int
	err = fl.conn.do("write", fl.path, int64(len(p)), func(ctx context.Context) error {
		var err error
		n, err = fl.f.WriteAtContext(ctx, p, off)
		return err
	})
	return n, err
}

// Fsync makes the file's data durable.
func (l *Lib) Fsync(h int64) error {
	fl, err := l.file(h)
	if err != nil {
		return err
	}
	return fl.conn.do("fsync", fl.path, 0, fl.f.SyncContext)
}

// Close flushes, syncs and closes a file handle; the handle is gone even
// when the flush fails.
func (l *Lib) Close(h int64) error {
	v, err := l.t.Remove(h, KindFile)
	if err != nil {
		return err
	}
	fl := v.(*file)
	return fl.conn.do("close", fl.path, 0, func(ctx context.Context) error { return fl.f.Release(ctx, true) })
}

// Ftruncate changes an open file's size.
func (l *Lib) Ftruncate(h int64, size int64) error {
	fl, err := l.file(h)
	if err != nil {
		return err
	}
	return fl.conn.do("truncate", fl.path, 0, func(ctx context.Context) error { return fl.f.Truncate(ctx, size) })
}

// Fstat returns an open file's attributes, counting data written through
// it and not yet flushed.
func (l *Lib) Fstat(h int64) (Stat, error) {
	fl, err := l.file(h)
	if err != nil {
		return Stat{}, err
	}
	var st Stat
	err = fl.conn.do("fstat", fl.path, 0, func(ctx context.Context) error {
		a, err := fl.conn.c.GetAttrIno(ctx, fl.f.Ino())
		if err != nil {
			return &fs.PathError{Op: "fstat", Path: fl.path, Err: err}
		}
		st = Stat{Size: max(int64(a.Size), fl.f.KnownSize()), Atime: a.Atime, Mtime: a.Mtime, Ctime: a.Ctime,
			Ino: a.Ino, Mode: a.Mode, Nlink: a.Nlink, Uid: a.Uid, Gid: a.Gid}
		return nil
	})
	return st, err
}

// Stat is a file's attributes in Linux form: Mode is st_mode, times are
// nanoseconds since the Unix epoch.
type Stat struct {
	Size                int64
	Atime, Mtime, Ctime int64
	Ino                 uint64
	Mode                uint32
	Nlink, Uid, Gid     uint32
}

func statFrom(fi *client.FileInfo) Stat {
	a := fi.Attr()
	return Stat{Size: a.Size, Atime: a.Atime.UnixNano(), Mtime: a.Mtime.UnixNano(), Ctime: a.Ctime.UnixNano(),
		Ino: a.Ino, Mode: stMode(a.Mode), Nlink: a.Nlink, Uid: a.Uid, Gid: a.Gid}
}

// stMode converts an fs.FileMode to a Linux st_mode.
func stMode(m fs.FileMode) uint32 {
	out := uint32(m.Perm())
	switch {
	case m.IsDir():
		out |= syscall.S_IFDIR
	case m&fs.ModeSymlink != 0:
		out |= syscall.S_IFLNK
	case m&fs.ModeNamedPipe != 0:
		out |= syscall.S_IFIFO
	case m&fs.ModeSocket != 0:
		out |= syscall.S_IFSOCK
	case m&fs.ModeCharDevice != 0:
		out |= syscall.S_IFCHR
	case m&fs.ModeDevice != 0:
		out |= syscall.S_IFBLK
	default:
		out |= syscall.S_IFREG
	}
	if m&fs.ModeSetuid != 0 {
		out |= syscall.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		out |= syscall.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		out |= syscall.S_ISVTX
	}
	return out
}

// Stat returns the attributes of path (following a final symlink if
// follow is set).
func (l *Lib) Stat(h int64, path string, follow bool) (Stat, error) {
	cn, err := l.conn(h)
	if err != nil {
		return Stat{}, err
	}
	var st Stat
	err = cn.do("stat", path, 0, func(ctx context.Context) error {
		stat := cn.c.Lstat
		if follow {
			stat = cn.c.Stat
		}
		fi, err := stat(ctx, path)
		if err == nil {
			st = statFrom(fi)
		}
		return err
	})
	return st, err
}

// Mkdir creates a directory (and its missing parents if parents is set,
// where an existing directory is no error).
func (l *Lib) Mkdir(h int64, path string, perm uint32, parents bool) error {
	cn, err := l.conn(h)
	if err != nil {
		return err
	}
	return cn.do("mkdir", path, 0, func(ctx context.Context) error {
		if parents {
			return cn.c.MkdirAll(ctx, path, fs.FileMode(perm&0o777))
		}
		return cn.c.Mkdir(ctx, path, fs.FileMode(perm&0o777))
	})
}

// Unlink removes a file or symlink; a directory is EISDIR.
func (l *Lib) Unlink(h int64, path string) error {
	return l.remove(h, "unlink", path, func(fi *client.FileInfo) error {
		if fi.IsDir() {
			return client.ErrIsDir
		}
		return nil
	})
}

// Rmdir removes an empty directory; anything else is ENOTDIR.
func (l *Lib) Rmdir(h int64, path string) error {
	return l.remove(h, "rmdir", path, func(fi *client.FileInfo) error {
		if !fi.IsDir() {
			return client.ErrNotDir
		}
		return nil
	})
}

func (l *Lib) remove(h int64, op, path string, check func(*client.FileInfo) error) error {
	cn, err := l.conn(h)
	if err != nil {
		return err
	}
	return cn.do(op, path, 0, func(ctx context.Context) error {
		fi, err := cn.c.Lstat(ctx, path)
		if err != nil {
			return err
		}
		if err := check(fi); err != nil {
			return &fs.PathError{Op: op, Path: path, Err: err}
		}
		return cn.c.Remove(ctx, path)
	})
}

// RemoveAll removes path and everything below it; a missing path is no
// error.
func (l *Lib) RemoveAll(h int64, path string) error {
	cn, err := l.conn(h)
	if err != nil {
		return err
	}
	return cn.do("remove", path, 0, func(ctx context.Context) error { return cn.c.RemoveAll(ctx, path) })
}

// Rename moves oldpath to newpath atomically, replacing newpath unless
// noReplace is set (then an existing newpath is EEXIST).
func (l *Lib) Rename(h int64, oldpath, newpath string, noReplace bool) error {
	cn, err := l.conn(h)
	if err != nil {
		return err
	}
	return cn.do("rename", oldpath, 0, func(ctx context.Context) error {
		if noReplace {
			return cn.c.RenameNoReplace(ctx, oldpath, newpath)
		}
		return cn.c.Rename(ctx, oldpath, newpath)
	})
}

// Truncate changes the size of the file at path.
func (l *Lib) Truncate(h int64, path string, size int64) error {
	cn, err := l.conn(h)
	if err != nil {
		return err
	}
	return cn.do("truncate", path, 0, func(ctx context.Context) error { return cn.c.Truncate(ctx, path, size) })
}

// PutResult keeps b until TakeResult copies it out, for results whose size
// the caller cannot know in advance (listings).
func (l *Lib) PutResult(b []byte) int64 { return l.t.Add(KindResult, b) }

// TakeResult copies result h into dst, which must hold all of it, and
// frees it.
func (l *Lib) TakeResult(h int64, dst []byte) (int, error) {
	v, err := l.t.Get(h, KindResult)
	if err != nil {
		return 0, err
	}
	b := v.([]byte)
	if len(dst) < len(b) {
		return 0, fmt.Errorf("sluice: result %d has %d bytes, the buffer %d: %w", h, len(b), len(dst), client.ErrInvalid)
	}
	if _, err := l.t.Remove(h, KindResult); err != nil {
		return 0, err
	}
	return copy(dst, b), nil
}

// Free releases a file set, a KV-cache store's handle or a result nobody
// took.
func (l *Lib) Free(h int64) error {
	_, err := l.t.Remove(h, KindResult)
	var be *BadHandleError
	if !errors.As(err, &be) {
		return err
	}
	if _, err := l.t.Remove(h, KindKV); !errors.As(err, &be) {
		return err
	}
	v, err := l.t.Remove(h, KindFileset)
	if err != nil {
		return err
	}
	v.(*fileset).release()
	return nil
}
