package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Errors returned by the client wrap one of these classes (and the
// matching io/fs errors: errors.Is(err, fs.ErrNotExist) works).
var (
	ErrNotExist   = errs.ErrNotFound
	ErrExist      = errs.ErrExists
	ErrNotEmpty   = errs.ErrNotEmpty
	ErrNotDir     = errs.ErrNotDir
	ErrIsDir      = errs.ErrIsDir
	ErrInvalid    = errs.ErrInvalid
	ErrCorruption = errs.ErrCorruption
	ErrNoSpace    = errs.ErrNoSpace
)

// Errno returns the POSIX errno that err stands for (0 for nil).
func Errno(err error) syscall.Errno { return errs.Errno(err) }

// Layout says how a file is striped over storage targets.
type Layout struct {
	StripeSize  int64    // bytes per stripe
	StripeCount int      // number of targets (0 in a directory: the default)
	Replicas    int      // copies of each chunk
	Chains      []uint32 // chain IDs of a file (for one replica: target IDs); empty for a directory
	Pool        string   // a directory's pool of targets for new files ("": all targets); see SetPool
	// Data is the number a file's chunks are stored under on the targets:
	// 0 for the inode number, another once the file was migrated (Migrate).
	Data uint64
	// Components, if set (2 to 8), make the layout progressive (ADR 0021,
	// docs/placement.md): each covers the file up to its End with its own
	// stripe size, count and pool. A file's Chains are then its
	// components' in order, StripeCount their number and StripeSize the
	// first component's. SetLayout takes them for a directory.
	Components []LayoutComponent
}

// LayoutComponent is one component of a progressive layout.
type LayoutComponent struct {
	End         int64  // where its file range ends (exclusive); 0 in the last: the end of the file
	StripeSize  int64  // bytes per stripe
	StripeCount int    // targets (0 in a directory: every target of its pool)
	Pool        string // its targets' pool ("": the directory's pool, or every target)
}

func layoutFrom(l placement.Layout) Layout {
	out := Layout{StripeSize: int64(l.StripeSize), StripeCount: int(l.StripeCount), Replicas: l.ReplicaCount(), Data: l.Data}
	for _, t := range l.Chains {
		out.Chains = append(out.Chains, uint32(t))
	}
	for _, c := range l.Comps {
		out.Components = append(out.Components, LayoutComponent{End: c.End, StripeSize: int64(c.StripeSize), StripeCount: int(c.StripeCount), Pool: c.Pool})
	}
	return out
}

// PlacementComps returns a layout's components as package placement has
// them (nil if it has none), checking their ranges.
func PlacementComps(cs []LayoutComponent) ([]placement.Comp, error) {
	var out []placement.Comp
	for i, c := range cs {
		if c.StripeSize < 0 || c.StripeSize > placement.MaxStripeSize || c.StripeCount < 0 || c.StripeCount > placement.MaxStripeCount || c.End < 0 {
			return nil, errs.New(errs.Invalid, "client: invalid layout component %d: end %d, stripe size %d, stripe count %d", i+1, c.End, c.StripeSize, c.StripeCount)
		}
		size := c.StripeSize
		if size == 0 {
			size = placement.DefaultStripeSize
		}
		out = append(out, placement.Comp{End: c.End, StripeSize: uint32(size), StripeCount: uint16(c.StripeCount), Pool: c.Pool})
	}
	return out, nil
}

// Attr is a file's attributes.
type Attr struct {
	Ino    uint64
	Mode   fs.FileMode // type and permission bits, Go style
	Nlink  uint32
	Uid    uint32
	Gid    uint32
	Size   int64
	Atime  time.Time
	Mtime  time.Time
	Ctime  time.Time
	Layout Layout
	// Released: the regular file was released to the object tier when
	// the attributes were read (its bytes are in S3 only; docs/tier.md).
	Released bool
}

func attrFrom(a *wire.Attr) *Attr {
	return &Attr{
		Ino: a.Ino, Mode: modeFrom(a.Mode), Nlink: a.Nlink, Uid: a.Uid, Gid: a.Gid,
		Size: int64(a.Size), Atime: time.Unix(0, a.Atime), Mtime: time.Unix(0, a.Mtime),
		Ctime: time.Unix(0, a.Ctime), Layout: layoutFrom(a.Layout),
		Released: a.Flags&wire.AttrReleased != 0,
	}
}

// modeFrom converts a Linux st_mode to an fs.FileMode.
func modeFrom(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & syscall.S_IFMT {
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		mode |= fs.ModeSocket
	case syscall.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// permBits converts an fs.FileMode's permission and special bits to st_mode bits.
func permBits(m fs.FileMode) uint32 {
	out := uint32(m.Perm())
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

// FileInfo is an fs.FileInfo for a Sluice file.
type FileInfo struct {
	name string
	attr *Attr
}

func (fi *FileInfo) Name() string       { return fi.name }
func (fi *FileInfo) Size() int64        { return fi.attr.Size }
func (fi *FileInfo) Mode() fs.FileMode  { return fi.attr.Mode }
func (fi *FileInfo) ModTime() time.Time { return fi.attr.Mtime }
func (fi *FileInfo) IsDir() bool        { return fi.attr.Mode.IsDir() }
func (fi *FileInfo) Sys() any           { return fi.attr }

// Attr returns the Sluice attributes behind the FileInfo.
func (fi *FileInfo) Attr() *Attr { return fi.attr }

// clean makes a path absolute and clean.
func clean(p string) string { return path.Clean("/" + p) }

func (c *Client) resolve(ctx context.Context, p string, follow bool) (*wire.Attr, error) {
	var a wire.Attr
	// A drain that ends while the request is out may have committed its
	// size after the service answered: taken before, the token lets the
	// size it gave count (overlayStagedSince).
	tok := c.stagedToken()
	err := c.lookupPath(ctx, p, follow, func(q string) (uint64, error) {
		err := c.metaCall(ctx, wire.OpResolve, &wire.ResolveReq{Path: clean(q), Follow: follow}, &a)
		return a.Ino, err
	})
	if err != nil {
		return nil, err
	}
	c.overlayStagedSince(&a, tok)
	return &a, nil
}

// parent resolves the directory holding p and returns it with p's last name.
func (c *Client) parent(ctx context.Context, p string) (uint64, string, error) {
	p = clean(p)
	if p == "/" {
		return 0, "", errs.New(errs.Invalid, "client: the root has no parent")
	}
	dir, name := path.Split(p)
	a, err := c.resolve(ctx, dir, true)
	if err != nil {
		return 0, "", err
	}
	if a.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return 0, "", errs.New(errs.NotDir, "client: %s is not a directory", dir)
	}
	return a.Ino, name, nil
}

// nameParent is parent for an operation that makes or removes the name
// p: it first waits for this client's queued renames from or to p (or
// above it), so that the operation applies to the namespace as this
// client left it (read-your-renames, absorb.go). Renames do not wait:
// they queue behind the queued ones.
func (c *Client) nameParent(ctx context.Context, p string) (uint64, string, error) {
	if err := c.waitRenamesPath(ctx, p); err != nil {
		return 0, "", err
	}
	return c.parent(ctx, p)
}

func opErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: p, Err: err}
}

// Stat returns the attributes of p, following a final symlink.
func (c *Client) Stat(ctx context.Context, p string) (*FileInfo, error) {
	a, err := c.resolve(ctx, p, true)
	if err != nil {
		return nil, opErr("stat", p, err)
	}
	return &FileInfo{name: path.Base(clean(p)), attr: attrFrom(a)}, nil
}

// Lstat is Stat without following a final symlink.
func (c *Client) Lstat(ctx context.Context, p string) (*FileInfo, error) {
	a, err := c.resolve(ctx, p, false)
	if err != nil {
		return nil, opErr("lstat", p, err)
	}
	return &FileInfo{name: path.Base(clean(p)), attr: attrFrom(a)}, nil
}

// Mkdir creates a directory.
func (c *Client) Mkdir(ctx context.Context, p string, perm fs.FileMode) error {
	dir, name, err := c.nameParent(ctx, p)
	if err != nil {
		return opErr("mkdir", p, err)
	}
	var a wire.Attr
	err = c.metaCall(ctx, wire.OpMkdir, &wire.CreateReq{Parent: dir, Name: name, Mode: syscall.S_IFDIR | permBits(perm), Cred: c.cred()}, &a)
	return opErr("mkdir", p, err)
}

// MkdirAll creates a directory and any missing parents.
func (c *Client) MkdirAll(ctx context.Context, p string, perm fs.FileMode) error {
	p = clean(p)
	if fi, err := c.Stat(ctx, p); err == nil {
		if fi.IsDir() {
			return nil
		}
		return opErr("mkdir", p, errs.ErrNotDir)
	}
	if p != "/" {
		if err := c.MkdirAll(ctx, path.Dir(p), perm); err != nil {
			return err
		}
	}
	err := c.Mkdir(ctx, p, perm)
	if err != nil && errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}

func (c *Client) cred() wire.Cred { return wire.Cred{Uid: *c.opts.Uid, Gid: *c.opts.Gid} }

// credp is cred for the requests where credentials are optional (they
// name who made a change in the audit trail).
func (c *Client) credp() *wire.Cred {
	cr := c.cred()
	return &cr
}

// Remove removes a file, symlink or empty directory.
func (c *Client) Remove(ctx context.Context, p string) error {
	dir, name, err := c.nameParent(ctx, p)
	if err != nil {
		return opErr("remove", p, err)
	}
	err = c.metaCall(ctx, wire.OpUnlink, &wire.NameReq{Parent: dir, Name: name, Cred: c.credp()}, nil)
	if errs.CodeOf(err) == errs.IsDir {
		err = c.metaCall(ctx, wire.OpRmdir, &wire.NameReq{Parent: dir, Name: name, Cred: c.credp()}, nil)
	}
	return opErr("remove", p, err)
}

// RemoveAll removes p and everything below it. A missing p is no error.
func (c *Client) RemoveAll(ctx context.Context, p string) error {
	fi, err := c.Lstat(ctx, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		for {
			// Remove in pages: the listing restarts after each page, so
			// a huge directory never needs to be held in memory.
			var names []string
			for e, err := range c.ReadDir(ctx, p) {
				if err != nil {
					return err
				}
				names = append(names, e.Name)
				if len(names) == 1000 {
					break
				}
			}
			if len(names) == 0 {
				break
			}
			for _, n := range names {
				if err := c.RemoveAll(ctx, path.Join(clean(p), n)); err != nil {
					return err
				}
			}
		}
	}
	err = c.Remove(ctx, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Rename moves oldpath to newpath atomically, replacing newpath if it
// exists (as rename(2)).
func (c *Client) Rename(ctx context.Context, oldpath, newpath string) error {
	return c.rename(ctx, oldpath, newpath, 0)
}

// RenameNoReplace is Rename that fails with ErrExist if newpath exists.
func (c *Client) RenameNoReplace(ctx context.Context, oldpath, newpath string) error {
	return c.rename(ctx, oldpath, newpath, wire.RenameNoReplace)
}

// Exchange swaps two existing paths atomically.
func (c *Client) Exchange(ctx context.Context, a, b string) error {
	return c.rename(ctx, a, b, wire.RenameExchange)
}

func (c *Client) rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	od, on, err := c.parent(ctx, oldpath)
	if err != nil {
		return &fs.PathError{Op: "rename", Path: oldpath, Err: err}
	}
	nd, nn, err := c.parent(ctx, newpath)
	if err != nil {
		return &fs.PathError{Op: "rename", Path: newpath, Err: err}
	}
	err = c.renameCall(ctx, &wire.RenameReq{OldParent: od, OldName: on, NewParent: nd, NewName: nn, Flags: flags, Cred: c.credp()}, clean(oldpath), clean(newpath))
	if err != nil {
		return fmt.Errorf("rename %s %s: %w", oldpath, newpath, err)
	}
	return nil
}

// Link makes newpath a hard link to the file at oldpath.
func (c *Client) Link(ctx context.Context, oldpath, newpath string) error {
	a, err := c.resolve(ctx, oldpath, false)
	if err != nil {
		return opErr("link", oldpath, err)
	}
	nd, nn, err := c.nameParent(ctx, newpath)
	if err != nil {
		return opErr("link", newpath, err)
	}
	var out wire.Attr
	return opErr("link", newpath, c.metaCall(ctx, wire.OpLink, &wire.LinkReq{Ino: a.Ino, NewParent: nd, NewName: nn}, &out))
}

// Symlink creates newpath as a symbolic link to target.
func (c *Client) Symlink(ctx context.Context, target, newpath string) error {
	nd, nn, err := c.nameParent(ctx, newpath)
	if err != nil {
		return opErr("symlink", newpath, err)
	}
	var out wire.Attr
	return opErr("symlink", newpath, c.metaCall(ctx, wire.OpSymlink, &wire.SymlinkReq{Parent: nd, Name: nn, Target: target, Cred: c.cred()}, &out))
}

// Readlink returns a symbolic link's target.
func (c *Client) Readlink(ctx context.Context, p string) (string, error) {
	a, err := c.resolve(ctx, p, false)
	if err != nil {
		return "", opErr("readlink", p, err)
	}
	var s wire.StringResp
	if err := c.metaCall(ctx, wire.OpReadlink, &wire.InoReq{Ino: a.Ino}, &s); err != nil {
		return "", opErr("readlink", p, err)
	}
	return s.S, nil
}

// Chmod changes the permission bits of p.
func (c *Client) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	return c.setattr(ctx, "chmod", p, &wire.SetAttrReq{Valid: wire.SetMode, Mode: permBits(mode), Cred: c.credp()})
}

// Chown changes the owner of p.
func (c *Client) Chown(ctx context.Context, p string, uid, gid uint32) error {
	return c.setattr(ctx, "chown", p, &wire.SetAttrReq{Valid: wire.SetUid | wire.SetGid, Uid: uid, Gid: gid, Cred: c.credp()})
}

// Chtimes changes the access and modification times of p.
func (c *Client) Chtimes(ctx context.Context, p string, atime, mtime time.Time) error {
	return c.setattr(ctx, "chtimes", p, &wire.SetAttrReq{Valid: wire.SetAtime | wire.SetMtime, Atime: atime.UnixNano(), Mtime: mtime.UnixNano()})
}

func (c *Client) setattr(ctx context.Context, op, p string, req *wire.SetAttrReq) error {
	a, err := c.resolve(ctx, p, true)
	if err != nil {
		return opErr(op, p, err)
	}
	req.Ino = a.Ino
	var out wire.Attr
	return opErr(op, p, c.metaCall(ctx, wire.OpSetAttr, req, &out))
}

// Truncate changes the size of the file at p.
func (c *Client) Truncate(ctx context.Context, p string, size int64) error {
	f, err := c.OpenFile(ctx, p, O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := f.Truncate(ctx, size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name string
	Ino  uint64
	Mode fs.FileMode // type bits only
}

// ReadDir lists directory p in name order, one page of entries at a time
// from the metadata service, so that directories of any size can be listed.
// Stop early by breaking out of the loop.
func (c *Client) ReadDir(ctx context.Context, p string) iter.Seq2[DirEntry, error] {
	return c.ReadDirAfter(ctx, p, "")
}

// ReadDirAfter is ReadDir of the entries whose names sort after cursor
// ("": all of them).
func (c *Client) ReadDirAfter(ctx context.Context, p, cursor string) iter.Seq2[DirEntry, error] {
	return func(yield func(DirEntry, error) bool) {
		a, err := c.resolve(ctx, p, true)
		if err != nil {
			yield(DirEntry{}, opErr("readdir", p, err))
			return
		}
		for {
			page, err := c.readDirPage(ctx, &wire.ReadDirReq{Ino: a.Ino, Cursor: cursor, Limit: 1024})
			if err != nil {
				yield(DirEntry{}, opErr("readdir", p, err))
				return
			}
			for _, e := range page.Entries {
				if !yield(DirEntry{Name: e.Name, Ino: e.Ino, Mode: modeFrom(e.Mode)}, nil) {
					return
				}
			}
			if page.EOF || len(page.Entries) == 0 {
				return
			}
			cursor = page.Cursor
		}
	}
}

// ReadDirAll lists a whole directory into memory.
func (c *Client) ReadDirAll(ctx context.Context, p string) ([]DirEntry, error) {
	var out []DirEntry
	for e, err := range c.ReadDir(ctx, p) {
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// GetXattr returns the value of extended attribute name of p.
func (c *Client) GetXattr(ctx context.Context, p, name string) ([]byte, error) {
	a, err := c.resolve(ctx, p, true)
	if err != nil {
		return nil, opErr("getxattr", p, err)
	}
	var v wire.BytesResp
	if err := c.metaCall(ctx, wire.OpGetXattr, &wire.XattrReq{Ino: a.Ino, Name: name}, &v); err != nil {
		return nil, opErr("getxattr", p, err)
	}
	return v.B, nil
}

// SetXattr sets extended attribute name of p.
func (c *Client) SetXattr(ctx context.Context, p, name string, value []byte) error {
	a, err := c.resolve(ctx, p, true)
	if err != nil {
		return opErr("setxattr", p, err)
	}
	return opErr("setxattr", p, c.metaCall(ctx, wire.OpSetXattr, &wire.XattrReq{Ino: a.Ino, Name: name, Value: value}, nil))
}

// ListXattr lists the extended attribute names of p.
func (c *Client) ListXattr(ctx context.Context, p string) ([]string, error) {
	a, err := c.resolve(ctx, p, true)
	if err != nil {
		return nil, opErr("listxattr", p, err)
	}
	var n wire.NamesResp
	if err := c.metaCall(ctx, wire.OpListXattr, &wire.InoReq{Ino: a.Ino}, &n); err != nil {
		return nil, opErr("listxattr", p, err)
	}
	return n.Names, nil
}

// RemoveXattr removes extended attribute name of p.
func (c *Client) RemoveXattr(ctx context.Context, p, name string) error {
	a, err := c.resolve(ctx, p, true)
	if err != nil {
		return opErr("removexattr", p, err)
	}
	return opErr("removexattr", p, c.metaCall(ctx, wire.OpRemoveXattr, &wire.XattrReq{Ino: a.Ino, Name: name}, nil))
}

// Statfs is file-system-wide usage.
type Statfs struct {
	Capacity, Used, Free int64
	Inodes               uint64
	Targets              int
}

// Statfs returns the file system's capacity and usage.
func (c *Client) Statfs(ctx context.Context) (*Statfs, error) {
	var s wire.StatfsResp
	if err := c.metaCall(ctx, wire.OpStatfs, nil, &s); err != nil {
		return nil, fmt.Errorf("statfs: %w", err)
	}
	return &Statfs{Capacity: s.Capacity, Used: s.Used, Free: s.Free, Inodes: s.Inodes, Targets: int(s.Targets)}, nil
}

// GetLayout returns the layout of a file, or a directory's default layout.
func (c *Client) GetLayout(ctx context.Context, p string) (Layout, error) {
	a, err := c.resolve(ctx, p, true)
	if err != nil {
		return Layout{}, opErr("layout", p, err)
	}
	var l wire.LayoutMsg
	if err := c.metaCall(ctx, wire.OpGetLayout, &wire.InoReq{Ino: a.Ino}, &l); err != nil {
		return Layout{}, opErr("layout", p, err)
	}
	out := layoutFrom(l.Layout)
	out.Pool = l.Pool
	return out, nil
}

// SetLayout sets a directory's default layout (inherited by new files and
// directories below it), or the layout of an empty file. Chains are chosen
// by the metadata service when files are created; l.Chains is ignored. A
// zero StripeSize means the default; Replicas 0 means 1. l.Pool is
// ignored: SetPool sets it.
func (c *Client) SetLayout(ctx context.Context, p string, l Layout) error {
	a, err := c.resolve(ctx, p, true)
	if err != nil {
		return opErr("layout", p, err)
	}
	stripeSize, stripeCount := l.StripeSize, l.StripeCount
	if l.Replicas < 0 || l.Replicas > placement.MaxReplicas {
		return opErr("layout", p, errs.New(errs.Invalid, "client: invalid layout: %d replicas (1 to %d)", l.Replicas, placement.MaxReplicas))
	}
	if stripeSize == 0 {
		stripeSize = placement.DefaultStripeSize
	}
	if stripeSize < 0 || stripeSize > placement.MaxStripeSize || stripeCount < 0 || stripeCount > placement.MaxStripeCount {
		return opErr("layout", p, errs.New(errs.Invalid, "client: invalid layout: stripe size %d, stripe count %d", stripeSize, stripeCount))
	}
	pl := placement.Layout{StripeSize: uint32(stripeSize), StripeCount: uint16(stripeCount), Replicas: uint8(l.Replicas)}
	if pl.Comps, err = PlacementComps(l.Components); err != nil {
		return opErr("layout", p, err)
	}
	if pl.Progressive() {
		pl.StripeSize, pl.StripeCount = pl.Comps[0].StripeSize, pl.Comps[0].StripeCount
	}
	if err := pl.Validate(); err != nil {
		return opErr("layout", p, err)
	}
	return opErr("layout", p, c.metaCall(ctx, wire.OpSetLayout, &wire.SetLayoutReq{Ino: a.Ino, Layout: pl, Cred: c.credp()}, nil))
}

// Walk calls fn for p and every path below it (directories before their
// entries, entries in name order), like filepath.WalkDir. Each directory
// is listed with its entries' attributes, a page of up to walkPage
// entries per request (not a lookup per entry), so an entry's FileInfo is
// as of its page.
func (c *Client) Walk(ctx context.Context, p string, fn func(p string, fi *FileInfo, err error) error) error {
	fi, err := c.Lstat(ctx, p)
	if err != nil {
		return fn(p, nil, err)
	}
	return c.walk(ctx, clean(p), fi, fn)
}

// walkPage is how many entries a page of Walk's listings asks for.
const walkPage = 1024

func (c *Client) walk(ctx context.Context, p string, fi *FileInfo, fn func(string, *FileInfo, error) error) error {
	if err := fn(p, fi, nil); err != nil || !fi.IsDir() {
		if errors.Is(err, fs.SkipDir) {
			return nil
		}
		return err
	}
	cursor := ""
	for {
		var page wire.ReadDirResp
		tok := c.stagedToken()
		if err := c.metaCall(ctx, wire.OpReadDir, &wire.ReadDirReq{Ino: fi.attr.Ino, Cursor: cursor, Limit: walkPage, Plus: true}, &page); err != nil {
			return fn(p, fi, opErr("readdir", p, err))
		}
		for _, e := range page.Entries {
			child := strings.TrimSuffix(p, "/") + "/" + e.Name
			if e.Attr == nil {
				return fn(p, fi, opErr("readdir", p, errs.New(errs.Invalid, "client: listing of inode %d without attributes", fi.attr.Ino)))
			}
			c.overlayStagedSince(e.Attr, tok) // this client's staged writes count, as in a lookup
			if err := c.walk(ctx, child, &FileInfo{name: e.Name, attr: attrFrom(e.Attr)}, fn); err != nil {
				return err
			}
		}
		if page.EOF || len(page.Entries) == 0 {
			return nil
		}
		cursor = page.Cursor
	}
}
