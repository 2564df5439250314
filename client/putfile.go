package client

import (
	"context"
	"io/fs"
	"path"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// PutOptions says how PutFile writes a file.
type PutOptions struct {
	// Xattrs are extended attributes the new file gets.
	Xattrs map[string][]byte
	// NoReplace fails with fs.ErrExist if the name exists.
	NoReplace bool
	// Sync returns only once the file is durable (as SyncMeta after it
	// would, sharing the metadata service's group sync).
	Sync bool
	// Mtime is the file's modification time (zero: now).
	Mtime time.Time
}

// InlineMax is the size up to which a file's bytes can be kept in the
// metadata service (the smaller of the service's --inline-max and
// Options.InlineMax; 0 if inline data is off): the largest PutFile.
func (c *Client) InlineMax() int64 { return c.inlineMax() }

// PutFile makes p a new regular file holding data, with perm and the
// options' xattrs, in one request to the metadata service: the file is
// created whole and takes p's name atomically, replacing a file (not a
// directory) there as a rename of a complete temporary file would: a
// reader sees the old file or the new one, never a part, and handles open
// on the old file keep reading it. The directory must exist.
//
// Only a file small enough to be kept inline fits (InlineMax): a larger
// data fails with an error whose errs.Code is errs.TooBig, before any
// request, and the caller writes the file the usual way.
func (c *Client) PutFile(ctx context.Context, p string, data []byte, perm fs.FileMode, o PutOptions) (InodeAttr, error) {
	p = clean(p)
	if int64(len(data)) > c.inlineMax() {
		return InodeAttr{}, opErr("put", p, errs.New(errs.TooBig, "client: %d bytes do not fit in the %d a file may keep inline", len(data), c.inlineMax()))
	}
	if p == "/" {
		return InodeAttr{}, opErr("put", p, errs.ErrIsDir)
	}
	if err := c.waitRenamesPath(ctx, p); err != nil { // read-your-renames (absorb.go)
		return InodeAttr{}, opErr("put", p, err)
	}
	dir, name := path.Split(p)
	req := &wire.PutFileReq{Dir: clean(dir), Name: name, Mode: uint32(perm.Perm()), Cred: c.cred(), Data: data}
	if o.NoReplace {
		req.Flags |= wire.PutNoReplace
	}
	if o.Sync {
		req.Flags |= wire.PutSync
	}
	if !o.Mtime.IsZero() {
		req.Mtime = o.Mtime.UnixNano()
	}
	for k, v := range o.Xattrs {
		req.Xattrs = append(req.Xattrs, wire.XattrPair{Name: k, Value: v})
	}
	var r wire.EntryResp
	if err := c.metaCall(ctx, wire.OpPutFile, req, &r); err != nil {
		return InodeAttr{}, opErr("put", p, err)
	}
	c.dirChanged(r.Dir)
	return inodeAttr(&r.Attr), nil
}
