package fsx

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Dir is a Target of files in a directory of the local file system: a
// Sluice FUSE mount, or a local directory as a control. Its files have
// every optional operation.
type Dir string

// Name implements Target.
func (d Dir) Name() string { return "dir " + string(d) }

// Open implements Target.
func (d Dir) Open(name string) (File, error) {
	f, err := os.OpenFile(filepath.Join(string(d), name), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

// List implements Lister: the names and sizes (-1: a directory, -2: a
// symbolic link) of a listing of the directory (on a FUSE mount,
// READDIRPLUS where the kernel asks for it, then a stat of each name).
func (d Dir) List() (map[string]int64, error) {
	ents, err := os.ReadDir(string(d))
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		out[e.Name()] = fi.Size()
		switch {
		case fi.IsDir():
			out[e.Name()] = -1
		case fi.Mode()&os.ModeSymlink != 0:
			out[e.Name()] = -2
		}
	}
	return out, nil
}

type osFile struct {
	f      *os.File
	direct *os.File // opened with O_DIRECT on first use
}

func (o *osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o *osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o *osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o *osFile) Sync() error                              { return o.f.Sync() }
func (o *osFile) Datasync() error                          { return unix.Fdatasync(int(o.f.Fd())) }

func (o *osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (o *osFile) Close() error {
	if o.direct != nil {
		o.direct.Close()
	}
	return o.f.Close()
}

// mapRange maps the pages holding [off, off+n) and returns the mapping and
// the range's start in it.
func (o *osFile) mapRange(off int64, n int, prot int) ([]byte, int, error) {
	page := int64(os.Getpagesize())
	start := off &^ (page - 1)
	m, err := unix.Mmap(int(o.f.Fd()), start, int(off-start)+n, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, 0, fmt.Errorf("mmap: %w", err)
	}
	return m, int(off - start), nil
}

func (o *osFile) MmapWrite(p []byte, off int64) error {
	m, at, err := o.mapRange(off, len(p), unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return err
	}
	copy(m[at:], p)
	err = unix.Msync(m, unix.MS_SYNC)
	if uerr := unix.Munmap(m); err == nil {
		err = uerr
	}
	if err != nil {
		return fmt.Errorf("msync/munmap: %w", err)
	}
	return nil
}

func (o *osFile) MmapRead(p []byte, off int64) error {
	m, at, err := o.mapRange(off, len(p), unix.PROT_READ)
	if err != nil {
		return err
	}
	copy(p, m[at:])
	return unix.Munmap(m)
}

func (o *osFile) CopyRange(src File, srcOff, off int64, n int) (int, error) {
	s, ok := src.(*osFile)
	if !ok {
		return 0, fmt.Errorf("copy_file_range: source is not a file of this directory")
	}
	return unix.CopyFileRange(int(s.f.Fd()), &srcOff, int(o.f.Fd()), &off, n, 0)
}

func (o *osFile) DirectRead(p []byte, off int64) (int, error) {
	if o.direct == nil {
		f, err := os.OpenFile(o.f.Name(), os.O_RDONLY|unix.O_DIRECT, 0)
		if err != nil {
			return 0, err
		}
		o.direct = f
	}
	// O_DIRECT wants an aligned buffer.
	buf := alignedBuf(len(p))
	done := 0
	for done < len(p) {
		n, err := unix.Pread(int(o.direct.Fd()), buf[done:], off+int64(done))
		if err != nil {
			return done, fmt.Errorf("pread O_DIRECT: %w", err)
		}
		if n == 0 {
			break
		}
		done += n
	}
	copy(p, buf[:done])
	return done, nil
}

func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	a := int(uintptr(unsafe.Pointer(&b[0])) & 4095)
	if a != 0 {
		a = 4096 - a
	}
	return b[a : a+n]
}

// SeekData and SeekHole implement Seeker with lseek(2) (ENXIO: io.EOF).
func (o *osFile) SeekData(off int64) (int64, error) { return o.seek(off, unix.SEEK_DATA) }
func (o *osFile) SeekHole(off int64) (int64, error) { return o.seek(off, unix.SEEK_HOLE) }

func (o *osFile) seek(off int64, whence int) (int64, error) {
	at, err := unix.Seek(int(o.f.Fd()), off, whence)
	if errors.Is(err, unix.ENXIO) {
		return 0, io.EOF
	}
	if err != nil {
		return 0, fmt.Errorf("lseek: %w", err)
	}
	return at, nil
}

// Allocate implements Allocator with fallocate(2).
func (o *osFile) Allocate(mode AllocMode, off, n int64) error {
	var flags uint32
	switch mode {
	case AllocKeepSize:
		flags = unix.FALLOC_FL_KEEP_SIZE
	case AllocPunch:
		flags = unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE
	case AllocZero:
		flags = unix.FALLOC_FL_ZERO_RANGE
	case AllocZeroKeep:
		flags = unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE
	}
	if err := unix.Fallocate(int(o.f.Fd()), flags, off, n); err != nil {
		return fmt.Errorf("fallocate %s: %w", mode, err)
	}
	return nil
}
