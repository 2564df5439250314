package client

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"syscall"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/profile"
	"github.com/sluice-fs/sluice/internal/wire"
)

// This file is the inode-level API: the operations of the metadata service
// addressed by inode number and (directory inode, name), as a kernel file
// system adapter (the FUSE mount) needs them. The kernel resolves paths
// itself, so none of these resolve paths, and they do not check
// permissions: the caller enforces them.

// InodeAttr is an inode's attributes in Linux form: Mode is st_mode (type
// and permission bits), times are nanoseconds since the Unix epoch.
type InodeAttr struct {
	Ino                   uint64
	Mode                  uint32
	Nlink, Uid, Gid, Rdev uint32
	Size                  uint64
	Atime, Mtime, Ctime   int64

	layout placement.Layout // a regular file's layout: lets OpenInode skip a round trip
	where  dataHome         // where a regular file's bytes live
	// at is when the attributes came (clock): a File opened from them
	// holds the layout's lease from then (Options.LayoutLease), however
	// long the caller kept them.
	at int64
}

func inodeAttr(a *wire.Attr) InodeAttr {
	return InodeAttr{
		Ino: a.Ino, Mode: a.Mode, Nlink: a.Nlink, Uid: a.Uid, Gid: a.Gid, Rdev: a.Rdev,
		Size: a.Size, Atime: a.Atime, Mtime: a.Mtime, Ctime: a.Ctime, layout: a.Layout,
		where: homeOf(a), at: clock(),
	}
}

// AllInChunks reports whether every byte of the regular file lives in
// chunks on the targets, none in the metadata (inline data, ADR 0009), as
// of when the attributes were read. Once true it stays true.
func (a *InodeAttr) AllInChunks() bool { return a.where.allChunks() }

// Released reports whether the regular file was released to the object
// tier when the attributes were read: its bytes are in S3 only, and reads
// fetch them from there (docs/tier.md).
func (a *InodeAttr) Released() bool { return a.where.released() }

// IsDir reports whether the inode is a directory.
func (a *InodeAttr) IsDir() bool { return a.Mode&syscall.S_IFMT == syscall.S_IFDIR }

// IsRegular reports whether the inode is a regular file.
func (a *InodeAttr) IsRegular() bool { return a.Mode&syscall.S_IFMT == syscall.S_IFREG }

// Owner is who creates an inode: it becomes the inode's uid and gid.
type Owner struct{ Uid, Gid uint32 }

func (o Owner) cred() wire.Cred { return wire.Cred{Uid: o.Uid, Gid: o.Gid} }

type callerKey struct{}

// WithCaller returns ctx naming who asks for the changes made with it
// through the inode API (SetAttrIno, UnlinkIno, RmdirIno, RenameIno): the
// metadata service records it in its audit trail. The mount passes the
// calling process's uid and gid; without it the trail says "unknown".
func WithCaller(ctx context.Context, o Owner) context.Context {
	return context.WithValue(ctx, callerKey{}, o)
}

func callerCred(ctx context.Context) *wire.Cred {
	o, ok := ctx.Value(callerKey{}).(Owner)
	if !ok {
		return nil
	}
	c := o.cred()
	return &c
}

// Bits of AttrChange.Valid: which attributes SetAttrIno changes.
const (
	AttrMode     = wire.SetMode
	AttrUid      = wire.SetUid
	AttrGid      = wire.SetGid
	AttrAtime    = wire.SetAtime
	AttrMtime    = wire.SetMtime
	AttrAtimeNow = wire.SetAtimeNow
	AttrMtimeNow = wire.SetMtimeNow
)

// AttrChange says which attributes SetAttrIno changes and to what. A size
// change is not one of them: it needs the file's chunks cut first, which
// TruncateIno and File.Truncate do.
type AttrChange struct {
	Valid        uint32 // Attr* bits
	Mode         uint32 // permission bits (07777)
	Uid, Gid     uint32
	Atime, Mtime int64 // nanoseconds since the Unix epoch
}

// Rename flags for RenameIno, as in Linux renameat2.
const (
	RenameNoReplace = wire.RenameNoReplace
	RenameExchange  = wire.RenameExchange
)

// Flags for SetXattrIno, as in Linux setxattr.
const (
	XattrCreate  = wire.XattrCreate
	XattrReplace = wire.XattrReplace
)

// RootIno returns the inode number of the file system's root directory.
func (c *Client) RootIno() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info.RootIno
}

func (c *Client) attrCall(ctx context.Context, op wire.Op, req wire.Message) (InodeAttr, error) {
	var a wire.Attr
	tok := c.stagedToken()
	if err := c.metaCall(ctx, op, req, &a); err != nil {
		return InodeAttr{}, err
	}
	c.overlayStagedSince(&a, tok)
	return inodeAttr(&a), nil
}

// OnDirChange makes the client call fn with a directory's attributes as
// the metadata service left them after this client's create, mkdir,
// unlink or rmdir in it (services older than this call send none). fn
// runs before the call that made the change returns and must not block.
// A FUSE mount answers the kernel's next getattr of the directory from
// them. Nil stops the calls.
func (c *Client) OnDirChange(fn func(dir InodeAttr)) {
	if fn == nil {
		c.dirHook.Store(nil)
		return
	}
	c.dirHook.Store(&fn)
}

func (c *Client) dirChanged(dirs ...*wire.Attr) {
	fn := c.dirHook.Load()
	if fn == nil {
		return
	}
	for _, d := range dirs {
		if d != nil && d.Ino != 0 {
			(*fn)(inodeAttr(d))
		}
	}
}

// entryCall makes a metadata call answered by an EntryResp.
func (c *Client) entryCall(ctx context.Context, op wire.Op, req wire.Message) (InodeAttr, error) {
	var r wire.EntryResp
	tok := c.stagedToken()
	if err := c.metaCall(ctx, op, req, &r); err != nil {
		return InodeAttr{}, err
	}
	c.dirChanged(r.Dir)
	c.overlayStagedSince(&r.Attr, tok)
	return inodeAttr(&r.Attr), nil
}

// dirsCall makes a metadata call answered by a DirsResp.
func (c *Client) dirsCall(ctx context.Context, op wire.Op, req wire.Message) error {
	var r wire.DirsResp
	if err := c.metaCall(ctx, op, req, &r); err != nil {
		return err
	}
	for i := range r.Dirs {
		c.dirChanged(&r.Dirs[i])
	}
	return nil
}

// LookupIno returns the attributes of entry name in directory parent.
// This client's renames queued behind staged files look done
// (read-your-renames, absorb.go).
func (c *Client) LookupIno(ctx context.Context, parent uint64, name string) (InodeAttr, error) {
	if c.stg == nil {
		return c.LookupInoNow(ctx, parent, name)
	}
	var a InodeAttr
	err := c.stg.throughRenames(func(rs []*renameRec) error {
		p, n, gone := renamedName(parent, name, rs)
		if gone {
			return fmt.Errorf("lookup %d/%q: %w", parent, name, renamedAway(name))
		}
		var err error
		a, err = c.LookupInoNow(ctx, p, n)
		if err != nil && (p != parent || n != name) {
			err = fmt.Errorf("lookup %d/%q: %w", parent, name, err)
		}
		return err
	})
	return a, err
}

// LookupInoNow is LookupIno without this client's queued renames: the
// entry as the metadata service has it now (which a queued rename may
// still replace or remove).
func (c *Client) LookupInoNow(ctx context.Context, parent uint64, name string) (InodeAttr, error) {
	a, err := c.attrCall(ctx, wire.OpLookup, &wire.NameReq{Parent: parent, Name: name})
	if err != nil {
		return InodeAttr{}, fmt.Errorf("lookup %d/%q: %w", parent, name, err)
	}
	return a, nil
}

// GetAttrIno returns an inode's attributes.
func (c *Client) GetAttrIno(ctx context.Context, ino uint64) (InodeAttr, error) {
	a, err := c.attrCall(ctx, wire.OpGetAttr, &wire.InoReq{Ino: ino})
	if err != nil {
		return InodeAttr{}, fmt.Errorf("getattr inode %d: %w", ino, err)
	}
	return a, nil
}

// SetAttrIno changes the attributes ch.Valid selects (and the ctime) and
// returns the new attributes.
func (c *Client) SetAttrIno(ctx context.Context, ino uint64, ch AttrChange) (InodeAttr, error) {
	a, err := c.attrCall(ctx, wire.OpSetAttr, attrChangeReq(ctx, ino, ch))
	if err != nil {
		return InodeAttr{}, fmt.Errorf("setattr inode %d: %w", ino, err)
	}
	return a, nil
}

// attrChangeReq is the request of change ch to inode ino (never a size:
// sizes go through a File), from the caller ctx names.
func attrChangeReq(ctx context.Context, ino uint64, ch AttrChange) *wire.SetAttrReq {
	return &wire.SetAttrReq{Ino: ino, Valid: ch.Valid &^ wire.SetSize, Mode: ch.Mode & 0o7777,
		Uid: ch.Uid, Gid: ch.Gid, Atime: ch.Atime, Mtime: ch.Mtime, Cred: callerCred(ctx)}
}

// TruncateIno sets the size of regular file ino, cutting its chunks first
// when it shrinks. A file open through this client should be truncated
// through its File instead, so that buffered writes are ordered before.
func (c *Client) TruncateIno(ctx context.Context, ino uint64, size int64) (InodeAttr, error) {
	f, _, err := c.OpenIno(ctx, ino, O_RDWR)
	if err != nil {
		return InodeAttr{}, err
	}
	err = f.Truncate(ctx, size)
	f.Release(ctx, false)
	if err != nil {
		return InodeAttr{}, err
	}
	return c.GetAttrIno(ctx, ino)
}

// CreateIno makes entry name in directory parent: a regular file, or a
// FIFO, socket or device node, as the type bits of mode say (none: a
// regular file). Without exclusive, an existing regular file is no error:
// its attributes are returned.
func (c *Client) CreateIno(ctx context.Context, parent uint64, name string, mode, rdev uint32, o Owner, exclusive bool) (InodeAttr, error) {
	if mode&syscall.S_IFMT == 0 {
		mode |= syscall.S_IFREG
	}
	req := &wire.CreateReq{Parent: parent, Name: name, Mode: mode, Rdev: rdev, Cred: o.cred(), Exclusive: exclusive}
	if err := c.waitRenamesAt(ctx, parent, name); err != nil {
		return InodeAttr{}, fmt.Errorf("create %d/%q: %w", parent, name, err)
	}
	a, err := c.entryCall(ctx, wire.OpCreate, req)
	if err != nil {
		return InodeAttr{}, fmt.Errorf("create %d/%q: %w", parent, name, err)
	}
	c.stageCreated(a.Ino, parent)
	return a, nil
}

// MkdirIno makes directory name in parent with permission bits perm.
func (c *Client) MkdirIno(ctx context.Context, parent uint64, name string, perm uint32, o Owner) (InodeAttr, error) {
	req := &wire.CreateReq{Parent: parent, Name: name, Mode: syscall.S_IFDIR | perm&0o7777, Cred: o.cred()}
	if err := c.waitRenamesAt(ctx, parent, name); err != nil {
		return InodeAttr{}, fmt.Errorf("mkdir %d/%q: %w", parent, name, err)
	}
	a, err := c.entryCall(ctx, wire.OpMkdir, req)
	if err != nil {
		return InodeAttr{}, fmt.Errorf("mkdir %d/%q: %w", parent, name, err)
	}
	return a, nil
}

// SymlinkIno makes name in parent a symbolic link to target.
func (c *Client) SymlinkIno(ctx context.Context, parent uint64, name, target string, o Owner) (InodeAttr, error) {
	if err := c.waitRenamesAt(ctx, parent, name); err != nil {
		return InodeAttr{}, fmt.Errorf("symlink %d/%q: %w", parent, name, err)
	}
	a, err := c.attrCall(ctx, wire.OpSymlink, &wire.SymlinkReq{Parent: parent, Name: name, Target: target, Cred: o.cred()})
	if err != nil {
		return InodeAttr{}, fmt.Errorf("symlink %d/%q: %w", parent, name, err)
	}
	return a, nil
}

// ReadlinkIno returns the target of symbolic link ino.
func (c *Client) ReadlinkIno(ctx context.Context, ino uint64) (string, error) {
	var s wire.StringResp
	if err := c.metaCall(ctx, wire.OpReadlink, &wire.InoReq{Ino: ino}, &s); err != nil {
		return "", fmt.Errorf("readlink inode %d: %w", ino, err)
	}
	return s.S, nil
}

// UnlinkIno removes non-directory entry name from parent; the inode is
// freed with its last link.
func (c *Client) UnlinkIno(ctx context.Context, parent uint64, name string) error {
	if err := c.waitRenamesAt(ctx, parent, name); err != nil {
		return fmt.Errorf("unlink %d/%q: %w", parent, name, err)
	}
	if err := c.dirsCall(ctx, wire.OpUnlink, &wire.NameReq{Parent: parent, Name: name, Cred: callerCred(ctx)}); err != nil {
		return fmt.Errorf("unlink %d/%q: %w", parent, name, err)
	}
	return nil
}

// RmdirIno removes empty directory name from parent.
func (c *Client) RmdirIno(ctx context.Context, parent uint64, name string) error {
	if err := c.waitRenamesDir(ctx, parent, name); err != nil {
		return fmt.Errorf("rmdir %d/%q: %w", parent, name, err)
	}
	if err := c.dirsCall(ctx, wire.OpRmdir, &wire.NameReq{Parent: parent, Name: name, Cred: callerCred(ctx)}); err != nil {
		return fmt.Errorf("rmdir %d/%q: %w", parent, name, err)
	}
	return nil
}

// RenameIno moves oldParent/oldName to newParent/newName atomically with
// the rules of Linux renameat2 (flags: RenameNoReplace, RenameExchange).
func (c *Client) RenameIno(ctx context.Context, oldParent uint64, oldName string, newParent uint64, newName string, flags uint32) error {
	req := &wire.RenameReq{OldParent: oldParent, OldName: oldName, NewParent: newParent, NewName: newName, Flags: flags, Cred: callerCred(ctx)}
	if err := c.renameCall(ctx, req, "", ""); err != nil {
		return fmt.Errorf("rename %d/%q to %d/%q: %w", oldParent, oldName, newParent, newName, err)
	}
	return nil
}

// LinkIno makes newParent/newName a hard link to ino and returns its new
// attributes.
func (c *Client) LinkIno(ctx context.Context, ino, newParent uint64, newName string) (InodeAttr, error) {
	if err := c.waitRenamesAt(ctx, newParent, newName); err != nil {
		return InodeAttr{}, fmt.Errorf("link inode %d as %d/%q: %w", ino, newParent, newName, err)
	}
	a, err := c.attrCall(ctx, wire.OpLink, &wire.LinkReq{Ino: ino, NewParent: newParent, NewName: newName})
	if err != nil {
		return InodeAttr{}, fmt.Errorf("link inode %d as %d/%q: %w", ino, newParent, newName, err)
	}
	return a, nil
}

// InodeDirEntry is one entry of a directory page. Mode has the type bits;
// Attr is set in a plus listing. In a listing with an extended attribute
// (ReadDirPageXattr), Xattr is its value and HasXattr says whether the
// inode has it.
type InodeDirEntry struct {
	Name     string
	Ino      uint64
	Mode     uint32
	Attr     *InodeAttr
	Xattr    []byte
	HasXattr bool
}

// DirPage is one page of a directory listing. Cursor continues it; EOF
// says nothing follows. Xattrs says that the entries carry the extended
// attribute ReadDirPageXattr asked for (a metadata service older than
// 2026-12-02 sends none).
type DirPage struct {
	Entries []InodeDirEntry
	Cursor  string
	EOF     bool
	Xattrs  bool
}

// ReadDirPage returns up to limit entries of directory ino whose names
// sort after cursor ("" = from the start), in byte order of the names,
// without "." and "..". With plus, each entry carries its attributes.
func (c *Client) ReadDirPage(ctx context.Context, ino uint64, cursor string, limit int, plus bool) (DirPage, error) {
	return c.readDirPage(ctx, &wire.ReadDirReq{Ino: ino, Cursor: cursor, Limit: uint32(max(limit, 0)), Plus: plus})
}

// ReadDirPageXattr is ReadDirPage with plus, each entry also carrying the
// value of its extended attribute name, read in the same transaction as
// its attributes (one request for what a stat and a getxattr of every
// entry would ask). If the page's Xattrs is false, the metadata service
// does not send them: ask GetXattrIno.
func (c *Client) ReadDirPageXattr(ctx context.Context, ino uint64, cursor string, limit int, name string) (DirPage, error) {
	return c.readDirPage(ctx, &wire.ReadDirReq{Ino: ino, Cursor: cursor, Limit: uint32(max(limit, 0)), Plus: true, Xattr: name})
}

// namedListWorth is how many listed entries (with attributes) cost about
// as much as one lookup (measured, 2026-11-29: a page of 1,024 entries
// took about as long as 64 lookups).
const namedListWorth = 16

// ReadDirNamed returns the entries of directory ino for which want is
// true (n of them at most), from plus listings (with xattr, each entry
// also carrying that extended attribute: ReadDirPageXattr) that start just
// before first and end at last, the least and greatest names wanted. The
// first page holds limit entries; pages grow fourfold up to 1,024 while
// they hold at least one wanted name per 16 entries listed. When the
// names are sparser it stops (a random batch of a large directory), and
// the caller looks up the names not returned: also after an error, which
// it returns with the entries found so far, and where a metadata service
// older than 2026-12-02 sends no xattrs (none of a page's entries is then
// returned).
func (c *Client) ReadDirNamed(ctx context.Context, ino uint64, first, last string, n int, want func(name string) bool, limit int, xattr string) (map[string]InodeDirEntry, error) {
	found := make(map[string]InodeDirEntry, n)
	if first == "" {
		return found, nil
	}
	cursor := first[:len(first)-1] // sorts before first, and nothing else wanted does
	listed := 0
	for {
		req := &wire.ReadDirReq{Ino: ino, Cursor: cursor, Limit: uint32(max(limit, 0)), Plus: true, Xattr: xattr}
		page, err := c.readDirPage(ctx, req)
		if err != nil {
			return found, err
		}
		if xattr != "" && len(page.Entries) > 0 && !page.Xattrs {
			return found, nil
		}
		for _, e := range page.Entries {
			if e.Attr != nil && want(e.Name) {
				found[e.Name] = e
			}
		}
		listed += len(page.Entries)
		if page.EOF || len(page.Entries) == 0 || page.Entries[len(page.Entries)-1].Name >= last || len(found) >= n {
			return found, nil
		}
		if len(found)*namedListWorth < listed {
			return found, nil // sparse: the rest are looked up
		}
		cursor, limit = page.Cursor, min(limit*4, 1024)
	}
}

func (c *Client) readDirPage(ctx context.Context, req *wire.ReadDirReq) (DirPage, error) {
	if c.stg == nil {
		return c.readDirPageNow(ctx, req)
	}
	for {
		rs, done := c.stg.renamesNow()
		moves := renamedDir(req.Ino, rs)
		if len(moves) == 0 {
			return c.readDirPageNow(ctx, req)
		}
		page, err := c.readDirRenamed(ctx, req, moves)
		if !c.stg.renamesMoved(done) {
			return page, err
		}
		// A rename left the queue meanwhile: the service's entries and
		// the moves may disagree. Again.
	}
}

// readDirRenamed is readDirPage of a directory whose entries this
// client's queued renames change (read-your-renames, as its lookups):
// the service's entries of the names in moves are hidden, and the
// entries the moves map those names to are shown under them. A page the
// moves leave empty is followed by the next, so that only the end of the
// listing is empty. The page may hold more than req.Limit entries; it
// carries no xattrs (Xattrs false) when a moved entry is in it.
func (c *Client) readDirRenamed(ctx context.Context, req *wire.ReadDirReq, moves map[string]dirMove) (DirPage, error) {
	var moved []InodeDirEntry
	for name, m := range moves {
		if m.gone {
			continue
		}
		a, err := c.LookupInoNow(ctx, m.parent, m.name)
		if errs.CodeOf(err) == errs.NotFound {
			continue
		}
		if err != nil {
			return DirPage{}, fmt.Errorf("readdir inode %d: entry %q: %w", req.Ino, name, err)
		}
		e := InodeDirEntry{Name: name, Ino: a.Ino, Mode: a.Mode & syscall.S_IFMT}
		if req.Plus {
			e.Attr = &a
		}
		moved = append(moved, e)
	}
	r := *req
	out := DirPage{Xattrs: req.Xattr != ""}
	for {
		page, err := c.readDirPageNow(ctx, &r)
		if err != nil {
			return DirPage{}, err
		}
		end := page.EOF || len(page.Entries) == 0
		for _, e := range page.Entries {
			if _, ok := moves[e.Name]; !ok {
				out.Entries = append(out.Entries, e)
			}
		}
		for _, e := range moved {
			if e.Name > r.Cursor && (end || e.Name <= page.Cursor) {
				out.Entries = append(out.Entries, e)
				out.Xattrs = false
			}
		}
		out.Xattrs = out.Xattrs && page.Xattrs
		out.Cursor, out.EOF = page.Cursor, page.EOF
		if len(out.Entries) > 0 || end {
			break
		}
		r.Cursor = page.Cursor
	}
	slices.SortFunc(out.Entries, func(a, b InodeDirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// readDirPageNow is readDirPage without this client's queued renames.
func (c *Client) readDirPageNow(ctx context.Context, req *wire.ReadDirReq) (DirPage, error) {
	var resp wire.ReadDirResp
	tok := c.stagedToken()
	if err := c.metaCall(ctx, wire.OpReadDir, req, &resp); err != nil {
		return DirPage{}, fmt.Errorf("readdir inode %d: %w", req.Ino, err)
	}
	page := DirPage{Entries: make([]InodeDirEntry, len(resp.Entries)), Cursor: resp.Cursor, EOF: resp.EOF}
	page.Xattrs = req.Xattr != "" && len(resp.Entries) > 0 && len(resp.Xattrs) == len(resp.Entries)
	for i, e := range resp.Entries {
		page.Entries[i] = InodeDirEntry{Name: e.Name, Ino: e.Ino, Mode: e.Mode}
		if e.Attr != nil {
			c.overlayStagedSince(e.Attr, tok) // this client's staged writes count, as in a lookup
			a := inodeAttr(e.Attr)
			page.Entries[i].Attr = &a
		}
		if page.Xattrs {
			page.Entries[i].Xattr, page.Entries[i].HasXattr = resp.Xattrs[i].Value, resp.Xattrs[i].Has
		}
	}
	return page, nil
}

// GetXattrIno returns the value of extended attribute name of ino.
func (c *Client) GetXattrIno(ctx context.Context, ino uint64, name string) ([]byte, error) {
	var v wire.BytesResp
	if err := c.metaCall(ctx, wire.OpGetXattr, &wire.XattrReq{Ino: ino, Name: name}, &v); err != nil {
		return nil, fmt.Errorf("getxattr inode %d %q: %w", ino, name, err)
	}
	return v.B, nil
}

// SetXattrIno sets extended attribute name of ino (flags: XattrCreate,
// XattrReplace).
func (c *Client) SetXattrIno(ctx context.Context, ino uint64, name string, value []byte, flags uint32) error {
	if err := c.metaCall(ctx, wire.OpSetXattr, &wire.XattrReq{Ino: ino, Name: name, Value: value, Flags: flags}, nil); err != nil {
		return fmt.Errorf("setxattr inode %d %q: %w", ino, name, err)
	}
	return nil
}

// ListXattrIno returns the names of ino's extended attributes.
func (c *Client) ListXattrIno(ctx context.Context, ino uint64) ([]string, error) {
	var n wire.NamesResp
	if err := c.metaCall(ctx, wire.OpListXattr, &wire.InoReq{Ino: ino}, &n); err != nil {
		return nil, fmt.Errorf("listxattr inode %d: %w", ino, err)
	}
	return n.Names, nil
}

// RemoveXattrIno removes extended attribute name of ino.
func (c *Client) RemoveXattrIno(ctx context.Context, ino uint64, name string) error {
	if err := c.metaCall(ctx, wire.OpRemoveXattr, &wire.XattrReq{Ino: ino, Name: name}, nil); err != nil {
		return fmt.Errorf("removexattr inode %d %q: %w", ino, name, err)
	}
	return nil
}

// OpenIno opens regular file ino (flag as for OpenFile, without O_CREATE)
// and returns it with the attributes it was opened with.
func (c *Client) OpenIno(ctx context.Context, ino uint64, flag int) (*File, InodeAttr, error) {
	a, err := c.GetAttrIno(ctx, ino)
	if err != nil {
		return nil, InodeAttr{}, err
	}
	f, err := c.OpenInode(ctx, a, flag)
	return f, a, err
}

// OpenInode opens the regular file whose attributes a came from CreateIno,
// LookupIno, GetAttrIno or a plus listing, without a round trip unless
// flag has O_TRUNC. The File's io-style methods (Read, Write, Close) run
// under ctx without its deadline.
func (c *Client) OpenInode(ctx context.Context, a InodeAttr, flag int) (*File, error) {
	name := fmt.Sprintf("inode %d", a.Ino)
	switch {
	case a.IsDir():
		return nil, opErr("open", name, errs.ErrIsDir)
	case !a.IsRegular():
		return nil, opErr("open", name, errs.New(errs.Invalid, "client: inode %d is not a regular file", a.Ino))
	}
	noStage, noAtime := flag&oNoStage != 0, flag&oNoAtime != 0
	flag &^= oNoStage | oNoAtime
	f := &File{
		c: c, name: name, ino: a.Ino, flag: flag &^ O_CREATE, ctx: context.WithoutCancel(ctx),
		size: int64(a.Size), sem: make(chan struct{}, c.opts.WritesInFlight),
		dirty: make(map[dirtyChunks]map[uint32]bool),
	}
	f.setLayoutAt(a.layout, a.at)
	f.openSize.Store(int64(a.Size))
	f.home.Store(uint64(a.where))
	f.sizeFresh = true
	f.own.start(a.Mtime, a.Size)
	if flag&O_WRONLY == 0 && !noStage && !noAtime {
		// A reader's open (the library's own opens are not: an
		// archive's read, a restore).
		c.noteRead(a.Ino, a.Atime)
	}
	if flag&O_TRUNC != 0 && f.writable() && a.Size > 0 {
		if err := f.Truncate(ctx, 0); err != nil {
			return nil, err
		}
	}
	if !noStage {
		if err := c.stageOpen(ctx, f, 0, false); err != nil {
			return nil, err
		}
	}
	f.recordOpen()
	return f, nil
}

// Seen tells f, which may be shared by several opens (the FUSE mount
// keeps one File per inode), that the caller just got attributes a from
// the metadata service and passes them on (to a new open, or to the
// kernel). If f knows a size at least as large, the first read past it
// trusts it, as after an open; if the file grew, the next read past the
// size asks the metadata service (which a truncate through f meanwhile
// cannot be confused by), so a reader told the larger size reads it all.
// Inline bytes f caches for another size or modification time are dropped.
func (f *File) Seen(a InodeAttr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sizeFresh = int64(a.Size) <= f.size
	if c := f.icache; c != nil && (int64(a.Size) != c.end || a.Mtime != c.mtime) {
		// The inline bytes are of another state of the file (an open
		// filled them, then another client changed it): a read through
		// a descriptor held since must not mix them with newer bytes.
		f.icache = nil
	}
}

// Reopened tells f, which may be shared by several opens (the FUSE mount
// keeps one File per inode), that a new open found the file in state a,
// changed since f last knew it (another client wrote or truncated it:
// close-to-open). f forgets the bytes it cached (read-ahead, inline
// bytes) and, unless it holds writes of its own not yet committed, takes
// a's size as the file's, even a smaller one: a File that outlived the
// previous open (a release the kernel had not yet sent) would otherwise
// go on reading up to the size it knew, past the end another client cut.
//
// since is f.SizeToken() taken before a was asked for (the zero token if f
// did not exist then): the size is lowered only if f made no write or
// truncate since, whose commit a might predate (a reader of this File's
// own data would otherwise find it cut).
func (f *File) Reopened(a InodeAttr, since SizeToken) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropCaches()
	f.openSize.Store(int64(a.Size))
	if since.ok && f.unchangedSinceLocked(since) {
		f.size = int64(a.Size)
		f.truncs++ // a size from a GetAttr sent before this must not raise it
		f.learnHome(a.where)
		if a.layout.StripeSize != 0 && len(a.layout.Chains) > 0 {
			f.setLayoutAt(a.layout, a.at) // a restore moves a file to another data ID
		}
		f.own.start(a.Mtime, a.Size)
	}
	f.sizeFresh = int64(a.Size) <= f.size
}

// unchangedSinceLocked reports whether f made no write or truncate since
// since was taken (the zero token: since f was made) and holds none in
// flight. f.mu is held.
func (f *File) unchangedSinceLocked(since SizeToken) bool {
	// No commit of f's data settled since either: attributes asked for
	// after the token may predate it (a read sends buffered writes and
	// returns before their size commit ends).
	return since.n == f.writes+f.truncs && len(f.buf) == 0 && len(f.sem) == 0 && f.flushing.Load() == 0 && f.stg == nil &&
		f.settled.Load() <= uint64(since.settle)
}

// SizeToken identifies the state of a File's own changes (Reopened).
type SizeToken struct {
	n      uint64
	ok     bool
	settle PendingToken
}

// SizeToken returns the token of f's own writes and truncates so far.
func (f *File) SizeToken() SizeToken {
	f.mu.Lock()
	defer f.mu.Unlock()
	return SizeToken{f.writes + f.truncs, true, f.c.PendingToken()}
}

// KnownSize returns the file's size as this client knows it, including
// data written through this File and not yet flushed.
func (f *File) KnownSize() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.size
}

// Pending reports whether the File holds written data whose size is not
// yet committed to the metadata: buffered, being sent, sent with its
// size commit still in flight, or (under the absorb policy) written to
// its open staging segment, which no attributes show until it is sealed
// (then Client calls overlay the staged size until it drains).
func (f *File) Pending() bool {
	if f.flushing.Load() > 0 {
		return true // without waiting for f.mu, which a read may hold long
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// flushing again, under f.mu: a flush that began while this call
	// waited for the lock moved the buffer into flushing (both under
	// f.mu), and the buffer alone would then look empty.
	return len(f.buf) > 0 || f.flushing.Load() > 0 || (f.stg != nil && f.stg.seg != nil)
}

// PendingToken marks a moment for PendingSince: take it before asking
// the metadata service for attributes that may be passed on with a
// File's pending size (the FUSE mount's replies to the kernel).
type PendingToken uint64

// PendingToken returns the token of now.
func (c *Client) PendingToken() PendingToken { return PendingToken(c.settleSeq.Load()) }

// PendingSince reports whether f held data whose size was not committed
// to the metadata at any moment since tok was taken (Pending, or a commit
// finished since). Attributes asked for after tok may then predate that
// commit and show a smaller size than f's own writes left, even though f
// holds nothing now: a write's background commit can finish while a
// listing or a lookup is in flight.
func (f *File) PendingSince(tok PendingToken) bool {
	// settle stores settled before the data stops counting as pending:
	// a File found not pending has its last settle visible here.
	return f.Pending() || f.settled.Load() > uint64(tok)
}

// Mark returns a token later than every token taken before and earlier
// than every token taken after: a caller that settles state of its own
// (the FUSE mount's held attribute changes, once sent) records when, and
// a token taken before a request then tells whether the request crossed
// it (mark > token).
func (c *Client) Mark() PendingToken { return PendingToken(c.settleSeq.Add(1)) }

// settle records that f's pending data is about to be committed and stop
// counting as pending (PendingSince).
func (f *File) settle() { f.settled.Store(f.c.settleSeq.Add(1)) }

// endFlushing ends a flush counted in f.flushing, after its size commit
// (or its failure).
func (f *File) endFlushing() {
	f.settle()
	f.flushing.Add(-1)
}

// FlushContext sends the data buffered in the File to the targets and
// records the new size in the metadata, as close(2) does for a local file:
// other clients can read it afterwards. Unlike SyncContext, it does not
// wait until the data is durable on the targets' disks.
func (f *File) FlushContext(ctx context.Context) error {
	_, err := f.recorded(ctx, profile.OpSync, 0, 0, func(ctx context.Context) (int, error) { return 0, f.flush(ctx) })
	return err
}

func (f *File) flush(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return opErr("flush", f.name, fs.ErrClosed)
	}
	return opErr("flush", f.name, f.waitFlushesLocked(ctx))
}

// Release flushes and releases the File, like Close, but waits for the
// data to be durable on the targets only if durable is set. Releasing a
// released File does nothing.
func (f *File) Release(ctx context.Context, durable bool) error {
	_, err := f.recorded(ctx, profile.OpClose, 0, 0, func(ctx context.Context) (int, error) { return 0, f.release(ctx, durable) })
	return err
}

func (f *File) release(ctx context.Context, durable bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	var err error
	if f.writable() {
		if durable {
			err = f.syncLocked(ctx)
		} else {
			err = f.waitFlushesLocked(ctx)
		}
	}
	f.closed = true
	f.dropCaches()
	f.closeDirect()
	return opErr("close", f.name, err)
}

// ReadAtParallel reads len(p) bytes at off like ReadAtContext, for callers
// that keep several reads of one file in flight (the kernel's own
// read-ahead): reads are not serialized with each other and do not use the
// File's read-ahead; each goes to the targets straight into p. Writes
// buffered in the File are sent first, so reads see them.
func (f *File) ReadAtParallel(ctx context.Context, p []byte, off int64) (int, error) {
	return f.recorded(ctx, profile.OpRead, off, len(p), func(ctx context.Context) (int, error) { return f.readAtParallel(ctx, p, off) })
}

func (f *File) readAtParallel(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, opErr("read", f.name, errs.ErrInvalid)
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return 0, opErr("read", f.name, fs.ErrClosed)
	}
	if len(f.buf) > 0 || len(f.sem) > 0 {
		if err := f.waitFlushesLocked(ctx); err != nil {
			f.mu.Unlock()
			return 0, opErr("read", f.name, err)
		}
	}
	if err := f.awaitStagedLocked(ctx); err != nil {
		f.mu.Unlock()
		return 0, opErr("read", f.name, err)
	}
	size, truncs := f.size, f.truncs
	if ic := f.icache; ic != nil && (off+int64(len(p)) <= size || ic.fresh) {
		// The inline bytes came with the open (OpenRead): a small
		// file's reads need no request; the first to reach the end
		// trusts the size seen then (close-to-open).
		n := int(max(min(int64(len(p)), size-off), 0))
		if ic.covers(off, n) {
			if off+int64(len(p)) > size {
				ic.fresh = false
			}
			ic.read(p[:n], off)
			f.mu.Unlock()
			if n < len(p) {
				return n, io.EOF
			}
			return n, nil
		}
	}
	trust := false
	if f.sizeFresh && off+int64(len(p)) > size {
		// The size the open found (close-to-open): the first read to
		// reach past it trusts it; later ones ask again.
		f.sizeFresh, trust = false, true
	}
	f.mu.Unlock()
	if off+int64(len(p)) > size && !trust {
		// The file may have grown through another client.
		var a wire.Attr
		if err := f.c.metaCall(ctx, wire.OpGetAttr, &wire.InoReq{Ino: f.ino}, &a); err != nil {
			return 0, opErr("read", f.name, err)
		}
		f.learn(&a)
		f.mu.Lock()
		if f.truncs == truncs {
			f.size = max(f.size, int64(a.Size))
		} // else a truncate ran meanwhile: a may be the size before it
		size = f.size
		f.mu.Unlock()
	}
	if off >= size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), size-off))
	if err := f.readData(ctx, off, p[:n]); err != nil {
		return 0, opErr("read", f.name, err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
