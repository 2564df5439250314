package chunk

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Recycled chunk files (ADR 0024). A removed chunk's two files are not
// unlinked but truncated and kept, up to maxFree of them, under free/; a
// new chunk takes its files from there by rename instead of creating
// them. Creating a file costs an inode allocation, which on some file
// systems is the most expensive thing a small chunk costs (ext4 without a
// journal skips inodes freed in the last minute and reads the inode table
// to find them: 0.5-0.7 ms per file after a burst of removals, where a
// rename from the pool, an open and a 4 KiB write took 24 µs).
//
// Safety:
//   - A file is truncated after it left the chunk's name and before the
//     pool hands it out, so a new chunk never starts with old bytes; the
//     names under free/ at Open are removed (a crash may have left one
//     untruncated), not reused.
//   - A file enters the pool only when nobody outside the store can have
//     it open: OpenData hands descriptors of data files to direct readers
//     (FUSE passthrough), who must keep reading the bytes of the chunk
//     they opened, as they would from an unlinked file. Chunks opened that
//     way are removed by unlink (tracked per chunk; past maxDirect the
//     store stops recycling altogether).
//   - OpenData's in-memory note ends with the process. A data file handed
//     to another process (OpenShared: a separate mount's FUSE passthrough,
//     whose kernel keeps reading the descriptor with no check, across a
//     restart of this process) is marked on disk instead, with the sticky
//     bit, which Linux ignores on regular files, and the store records
//     that it ever did so (sharedMark, a file in its directory): from
//     then on each removal looks at the file's mode, and a marked file is
//     unlinked, never recycled.
//   - A pooled file takes its chunk name with RENAME_NOREPLACE: a name
//     that exists (a data file a crash left behind) keeps the old path of
//     creating the file.

// Precreated files (Options.Precreate): a background goroutine keeps the
// pool at a number of empty files made ahead of need, as Lustre's object
// storage targets precreate objects for the metadata server: a burst of
// new small files then costs a rename per file where it cost a create
// (what removals give the pool, precreation gives a store that has had
// none). Such files are made empty with O_EXCL under free/, so the
// safety rules above hold for them as for recycled ones; the pool is
// emptied at Open, so nothing about them needs to be durable.

// maxFree bounds the pooled files of a store: empty files hold an inode
// each and no blocks, so the pool costs at most this many inodes.
const maxFree = 4096

// maxDirect bounds the chunks remembered as opened by OpenData.
const maxDirect = 1 << 16

// freePool is a store's recycled files.
type freePool struct {
	dir string // <store>/free

	mu      sync.Mutex
	names   []string // truncated files ready to take
	pending int      // files being moved into the pool
	seq     uint64
	direct  map[ID]struct{} // chunks OpenData opened: never recycled
	off     bool            // too many of those: recycle nothing
	// marked: some data file was handed to another process and carries
	// the sticky bit (OpenShared); removals check files' modes.
	marked atomic.Bool
}

// sharedMark is the file, in a store's directory, whose presence says that
// data files were handed to other processes (marked with the sticky bit).
const sharedMark = "shared-files"

// init empties dir (files left by an earlier run may be untruncated).
func (p *freePool) init(dir string) error {
	p.dir = dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	p.direct = make(map[ID]struct{})
	return nil
}

// opened notes that OpenData handed out chunk id's data file.
func (p *freePool) opened(id ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.off {
		return
	}
	if len(p.direct) >= maxDirect {
		p.off, p.direct = true, nil
		return
	}
	p.direct[id] = struct{}{}
}

// reserve returns a new name in the pool for a file of chunk id being
// removed, or false if the file must be unlinked instead.
func (p *freePool) reserve(id ID) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.direct[id]; ok || p.off || p.dir == "" || len(p.names)+p.pending >= maxFree {
		return "", false
	}
	p.pending++
	p.seq++
	return filepath.Join(p.dir, strconv.FormatUint(p.seq, 36)), true
}

// settle ends a reserve: the file at name is empty and may be taken (ok),
// or was dropped.
func (p *freePool) settle(name string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending--
	if ok {
		p.names = append(p.names, name)
	}
}

// reserveNew returns a new name in the pool for a file to precreate, or
// false if the pool holds want files (with those being moved in), is
// full, or is off.
func (p *freePool) reserveNew(want int) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.off || p.dir == "" || len(p.names)+p.pending >= min(want, maxFree) {
		return "", false
	}
	p.pending++
	p.seq++
	return filepath.Join(p.dir, "p"+strconv.FormatUint(p.seq, 36)), true
}

// precreateBatch is how many files precreate makes before it looks for
// its stop again.
const precreateBatch = 64

// precreate keeps want empty files in the pool until the store closes:
// it fills the pool, then looks every precreatePeriod whether new chunks
// took files.
func (s *Store) precreate(want int) {
	defer close(s.precreateDone)
	t := time.NewTicker(precreatePeriod)
	defer t.Stop()
	for {
		more := true // the pool wants more files and they can be made
		for made := 0; made < precreateBatch && more; made++ {
			name, ok := s.free.reserveNew(want)
			if !ok {
				more = false
				break
			}
			// openFD, not an os.File: see openNoAtime.
			fd, err := openFD(name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY)
			if err == nil {
				err = unix.Close(fd)
			}
			if err != nil {
				// A full disk or inode table: try again later.
				os.Remove(name)
				s.free.settle(name, false)
				more = false
				break
			}
			s.free.settle(name, true)
			s.precreated.Add(1)
		}
		select {
		case <-s.precreateStop:
			return
		default:
		}
		if more {
			continue // not full yet: the next batch at once
		}
		select {
		case <-s.precreateStop:
			return
		case <-t.C:
		}
	}
}

// precreatePeriod is how often a full pool is looked at again.
const precreatePeriod = 100 * time.Millisecond

// forget drops what the pool remembers of a removed chunk.
func (p *freePool) forget(id ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.direct, id)
}

// take returns a pooled empty file, or false.
func (p *freePool) take() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.names)
	if n == 0 {
		return "", false
	}
	name := p.names[n-1]
	p.names = p.names[:n-1]
	return name, true
}

// put gives back a file taken and not used.
func (p *freePool) put(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names = append(p.names, name)
}

// size returns the number of pooled files.
func (p *freePool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.names)
}

// removeFile removes one of chunk id's files (path): into the pool,
// truncated, when it may be recycled, else by unlink. A missing file is
// an fs.ErrNotExist error, as from os.Remove.
func (s *Store) removeFile(id ID, path string) error {
	name, ok := s.free.reserve(id)
	if ok && s.free.marked.Load() {
		if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSticky != 0 {
			// Another process may read it (OpenShared), or it is not
			// there: unlink, never recycle.
			s.free.settle(name, false)
			ok = false
		}
	}
	if !ok {
		return os.Remove(path)
	}
	if err := os.Rename(path, name); err != nil {
		s.free.settle(name, false)
		return err
	}
	// The file has left the chunk: whatever happens now, the chunk is
	// removed. A file that cannot be emptied is dropped.
	if err := os.Truncate(name, 0); err != nil {
		os.Remove(name)
		s.free.settle(name, false)
		return nil
	}
	s.free.settle(name, true)
	return nil
}

// createFile creates path, a file of a new chunk, for reading and
// writing, from the pool if it has a file, else by O_CREAT (with extra
// flags, O_TRUNC or O_EXCL).
func (s *Store) createFile(path string, extra int) (*os.File, error) {
	if name, ok := s.free.take(); ok {
		err := unix.Renameat2(unix.AT_FDCWD, name, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE)
		switch {
		case err == nil:
			f, err := openNoAtime(path, os.O_RDWR)
			if err == nil {
				return f, nil
			}
			os.Remove(path) // an empty file no one opened
			return nil, err
		case errors.Is(err, unix.EEXIST):
			s.free.put(name) // the name exists (a file left behind): create as before
		default:
			// The pooled file cannot be used (gone, or not movable):
			// drop it rather than hand it out again, and create as before.
			os.Remove(name)
		}
	}
	return openNoAtime(path, os.O_RDWR|os.O_CREATE|extra)
}
