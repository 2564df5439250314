package fsx

import (
	"context"
	"path"

	"github.com/sluice-fs/sluice/client"
)

// Client is a Target of files in directory Dir of a Sluice file system,
// through the Go client library. Its files have no optional operations;
// Datasync is Sync. With Others, each Open uses the next of C and Others
// in turn, so that a file is reopened through another client.
type Client struct {
	C      *client.Client
	Others []*client.Client
	Dir    string
	Ctx    context.Context

	opens int
}

// Name implements Target.
func (c *Client) Name() string { return "client library " + c.Dir }

// Open implements Target.
func (c *Client) Open(name string) (File, error) {
	ctx := c.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	cl := c.C
	if k := c.opens % (1 + len(c.Others)); k > 0 {
		cl = c.Others[k-1]
	}
	c.opens++
	f, err := cl.OpenFile(ctx, path.Join(c.Dir, name), client.O_RDWR|client.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &clientFile{f: f, ctx: ctx}, nil
}

type clientFile struct {
	f   *client.File
	ctx context.Context
}

func (c *clientFile) WriteAt(p []byte, off int64) (int, error) { return c.f.WriteAt(p, off) }
func (c *clientFile) ReadAt(p []byte, off int64) (int, error)  { return c.f.ReadAt(p, off) }
func (c *clientFile) Truncate(size int64) error                { return c.f.Truncate(c.ctx, size) }
func (c *clientFile) Sync() error                              { return c.f.Sync() }
func (c *clientFile) Datasync() error                          { return c.f.Sync() }
func (c *clientFile) Close() error                             { return c.f.Close() }

func (c *clientFile) Size() (int64, error) {
	fi, err := c.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// SeekData and SeekHole implement Seeker with File.SeekData and SeekHole.
func (c *clientFile) SeekData(off int64) (int64, error) { return c.f.SeekData(c.ctx, off) }
func (c *clientFile) SeekHole(off int64) (int64, error) { return c.f.SeekHole(c.ctx, off) }

// Allocate implements Allocator with File.Allocate and File.ZeroRange.
func (c *clientFile) Allocate(mode AllocMode, off, n int64) error {
	switch mode {
	case AllocExtend:
		return c.f.Allocate(c.ctx, off+n)
	case AllocPunch, AllocZeroKeep:
		return c.f.ZeroRange(c.ctx, off, n, true)
	case AllocZero:
		return c.f.ZeroRange(c.ctx, off, n, false)
	}
	return nil // AllocKeepSize: nothing to reserve
}
