package fusefs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluice-fs/sluice/client"
)

// dirPageSize is how many entries one listing request fetches.
const dirPageSize = 512

// dirHandle is an open directory: a window of its listing, fetched a page
// at a time from the metadata service. A FUSE directory offset is a
// position in the stream ".", "..", entries in name order; the window
// holds the entries from position base+2 on.
type dirHandle struct {
	ino uint64

	mu      sync.Mutex
	base    uint64 // entry index (after "." and "..") of ents[0]
	ents    []client.InodeDirEntry
	cursor  string              // continues the listing after the last entry fetched
	gen     uint64              // the feed generation before the oldest page of ents was fetched
	tok     client.PendingToken // the pending token then (fileSystem.adjust)
	eof     bool                // nothing after the last entry fetched
	started bool
}

func (d *dirHandle) resetLocked() {
	d.base, d.ents, d.cursor, d.eof = 0, nil, "", false
}

func (fs *fileSystem) OpenDir(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	out.Fh = fs.addHandle(&handle{dir: &dirHandle{ino: in.NodeId}})
	return fuse.OK
}

func (fs *fileSystem) ReleaseDir(in *fuse.ReleaseIn) { fs.removeHandle(in.Fh) }

func (fs *fileSystem) ReadDir(intr <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.readDir(intr, in, out, false)
}

func (fs *fileSystem) ReadDirPlus(intr <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.readDir(intr, in, out, true)
}

func (fs *fileSystem) readDir(intr <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	h := fs.handle(in.Fh)
	if h == nil || h.dir == nil {
		return fuse.EBADF
	}
	d := h.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	ctx, cancel := fs.op(intr, in.Pid)
	defer cancel()

	pos := in.Offset
	if pos == 0 && d.started {
		d.resetLocked() // rewinddir: list afresh
	}
	d.started = true
	add := func(e fuse.DirEntry, a *client.InodeAttr) bool {
		if !plus {
			return out.AddDirEntry(e)
		}
		eo := out.AddDirLookupEntry(e)
		if eo == nil {
			return false
		}
		if a != nil {
			attr := *a
			fs.fillEntry(d.gen, d.tok, &attr, eo)
		} // else node ID 0: the kernel takes the name only
		return true
	}
	for ; pos < 2; pos++ {
		name := "."
		if pos == 1 {
			name = ".."
		}
		if !add(fuse.DirEntry{Name: name, Ino: d.ino, Mode: syscall.S_IFDIR, Off: pos + 1}, nil) {
			return fuse.OK
		}
	}
	idx := pos - 2
	if idx < d.base {
		d.resetLocked() // seekdir backwards out of the window
	}
	added := false
	for {
		// Slide the window to idx, fetching pages as needed.
		for idx >= d.base+uint64(len(d.ents)) {
			if d.eof {
				return fuse.OK
			}
			d.base += uint64(len(d.ents))
			d.ents = nil
			if err := fs.fetchLocked(ctx, d, plus); err != nil {
				if added {
					return fuse.OK // the kernel asks again from here
				}
				return fs.status(ctx, "readdir", err)
			}
		}
		if k := idx - d.base; k > 0 {
			d.base, d.ents = idx, d.ents[k:]
		}
		e := d.ents[0]
		if !add(fuse.DirEntry{Name: e.Name, Ino: e.Ino, Mode: e.Mode, Off: idx + 3}, e.Attr) {
			return fuse.OK
		}
		added = true
		idx++
	}
}

// fetchLocked appends the next page of the listing to the window. d.mu is
// held.
func (fs *fileSystem) fetchLocked(ctx context.Context, d *dirHandle, plus bool) error {
	if len(d.ents) == 0 {
		d.gen, d.tok = fs.gen(), fs.c.PendingToken()
	}
	for {
		page, err := fs.c.ReadDirPage(ctx, d.ino, d.cursor, dirPageSize, plus)
		if err != nil {
			return err
		}
		for _, e := range page.Entries {
			if !fs.reserved(d.ino, e.Name) {
				d.ents = append(d.ents, e)
			}
		}
		d.cursor = page.Cursor
		d.eof = page.EOF || len(page.Entries) == 0
		if len(d.ents) > 0 || d.eof {
			return nil
		}
	}
}
