package bench

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/sluice-fs/sluice/client"
)

// FS is the file system a benchmark runs against. Paths are slash-separated
// and relative to the FS's root. Implementations must be safe for
// concurrent use; each File is used by one goroutine at a time.
type FS interface {
	// Name describes the FS in reports ("dir /mnt/x", "sluice 127.0.0.1:9400").
	Name() string
	MkdirAll(ctx context.Context, p string) error
	// Create creates or truncates p for writing.
	Create(ctx context.Context, p string) (File, error)
	// OpenWrite opens an existing p for writing without truncating it, so
	// that several writers can share it.
	OpenWrite(ctx context.Context, p string) (File, error)
	Open(ctx context.Context, p string) (File, error)
	// Stat returns p's size.
	Stat(ctx context.Context, p string) (int64, error)
	Remove(ctx context.Context, p string) error
	RemoveAll(ctx context.Context, p string) error
	Rename(ctx context.Context, oldpath, newpath string) error
	ReadDir(ctx context.Context, p string) ([]Entry, error)
	// SyncDir makes the entries of directory p durable (a no-op where the
	// FS's metadata operations are durable when they return).
	SyncDir(ctx context.Context, p string) error
}

// File is an open file of an FS. Close after writing returns when the data
// is written back; Sync makes it durable.
type File interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Close() error
}

// Entry is a directory entry.
type Entry struct {
	Name  string
	IsDir bool
}

// DirFS is a directory of the local file system (a FUSE mount, a local
// disk, any other mounted file system).
type DirFS struct{ Root string }

func (d DirFS) abs(p string) string { return filepath.Join(d.Root, filepath.FromSlash(p)) }

func (d DirFS) Name() string { return "dir " + d.Root }

func (d DirFS) MkdirAll(_ context.Context, p string) error { return os.MkdirAll(d.abs(p), 0o755) }

func (d DirFS) Create(_ context.Context, p string) (File, error) {
	return os.OpenFile(d.abs(p), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (d DirFS) OpenWrite(_ context.Context, p string) (File, error) {
	return os.OpenFile(d.abs(p), os.O_WRONLY, 0)
}

func (d DirFS) Open(_ context.Context, p string) (File, error) { return os.Open(d.abs(p)) }

func (d DirFS) Stat(_ context.Context, p string) (int64, error) {
	fi, err := os.Stat(d.abs(p))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (d DirFS) Remove(_ context.Context, p string) error    { return os.Remove(d.abs(p)) }
func (d DirFS) RemoveAll(_ context.Context, p string) error { return os.RemoveAll(d.abs(p)) }
func (d DirFS) Rename(_ context.Context, o, n string) error { return os.Rename(d.abs(o), d.abs(n)) }

func (d DirFS) ReadDir(_ context.Context, p string) ([]Entry, error) {
	ents, err := os.ReadDir(d.abs(p))
	out := make([]Entry, len(ents))
	for i, e := range ents {
		out[i] = Entry{Name: e.Name(), IsDir: e.IsDir()}
	}
	return out, err
}

func (d DirFS) SyncDir(_ context.Context, p string) error {
	f, err := os.Open(d.abs(p))
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	// Some file systems (FUSE without fsyncdir) do not sync directories.
	if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, os.ErrInvalid) {
		return nil
	}
	return err
}

// ClientFS runs natively through the Sluice client library, under Root (a
// Sluice path).
type ClientFS struct {
	Client *client.Client
	Root   string
	// Addr names the server in reports.
	Addr string
}

func (c ClientFS) abs(p string) string { return path.Join("/", c.Root, p) }

func (c ClientFS) Name() string { return "sluice " + c.Addr + ":" + path.Join("/", c.Root) }

func (c ClientFS) MkdirAll(ctx context.Context, p string) error {
	return c.Client.MkdirAll(ctx, c.abs(p), 0o755)
}

func (c ClientFS) Create(ctx context.Context, p string) (File, error) {
	return c.Client.Create(ctx, c.abs(p))
}

func (c ClientFS) OpenWrite(ctx context.Context, p string) (File, error) {
	return c.Client.OpenFile(ctx, c.abs(p), client.O_WRONLY, 0)
}

func (c ClientFS) Open(ctx context.Context, p string) (File, error) {
	return c.Client.Open(ctx, c.abs(p))
}

func (c ClientFS) Stat(ctx context.Context, p string) (int64, error) {
	fi, err := c.Client.Stat(ctx, c.abs(p))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (c ClientFS) Remove(ctx context.Context, p string) error {
	return c.Client.Remove(ctx, c.abs(p))
}

func (c ClientFS) RemoveAll(ctx context.Context, p string) error {
	err := c.Client.RemoveAll(ctx, c.abs(p))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (c ClientFS) Rename(ctx context.Context, o, n string) error {
	return c.Client.Rename(ctx, c.abs(o), c.abs(n))
}

func (c ClientFS) ReadDir(ctx context.Context, p string) ([]Entry, error) {
	var out []Entry
	for e, err := range c.Client.ReadDir(ctx, c.abs(p)) {
		if err != nil {
			return out, err
		}
		out = append(out, Entry{Name: e.Name, IsDir: e.Mode.IsDir()})
	}
	return out, nil
}

// SyncDir is a no-op: Sluice metadata operations are durable when they return.
func (c ClientFS) SyncDir(context.Context, string) error { return nil }

// Drainer is an FS that acknowledges writes before they are durable where
// they finally live (Sluice's absorb policy): WaitDrained returns once
// everything acknowledged so far is.
type Drainer interface {
	WaitDrained(ctx context.Context) error
}

// WaitDrained waits for the client's staged data and queued renames.
func (c ClientFS) WaitDrained(ctx context.Context) error { return c.Client.WaitStaged(ctx) }
