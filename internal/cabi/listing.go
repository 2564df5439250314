package cabi

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/sluice-fs/sluice/client"
)

// Entry is one entry of a listing or a file set, as packed for C.
type Entry struct {
	Ino   uint64
	Size  int64  // -1 when not known (a listing without attributes, a file set entry that failed)
	Mtime int64  // nanoseconds since the Unix epoch; 0 when not known
	Mode  uint32 // st_mode: type bits, and permission bits when known
	Chain uint32 // chain (or target) holding the file's first stripe; 0 when not known
	Name  string
}

// EntryHeader is the size of an entry's fixed part in PackEntries.
const EntryHeader = 36

// PackEntries encodes entries for C, each as little-endian
// u64 ino, i64 size, i64 mtime_ns, u32 st_mode, u32 chain, u32 name length,
// then the name's bytes (docs/python.md).
func PackEntries(es []Entry) []byte {
	n := 0
	for _, e := range es {
		n += EntryHeader + len(e.Name)
	}
	b := make([]byte, 0, n)
	for _, e := range es {
		b = binary.LittleEndian.AppendUint64(b, e.Ino)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.Size))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.Mtime))
		b = binary.LittleEndian.AppendUint32(b, e.Mode)
		b = binary.LittleEndian.AppendUint32(b, e.Chain)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e.Name)))
		b = append(b, e.Name...)
	}
	return b
}

// UnpackEntries decodes what PackEntries encoded.
func UnpackEntries(b []byte) ([]Entry, error) {
	var es []Entry
	for len(b) > 0 {
		if len(b) < EntryHeader {
			return nil, fmt.Errorf("cabi: entry header cut short: %d bytes", len(b))
		}
		e := Entry{
			Ino:   binary.LittleEndian.Uint64(b),
			Size:  int64(binary.LittleEndian.Uint64(b[8:])),
			Mtime: int64(binary.LittleEndian.Uint64(b[16:])),
			Mode:  binary.LittleEndian.Uint32(b[24:]),
			Chain: binary.LittleEndian.Uint32(b[28:]),
		}
		n := int(binary.LittleEndian.Uint32(b[32:]))
		b = b[EntryHeader:]
		if len(b) < n {
			return nil, fmt.Errorf("cabi: entry name of %d bytes cut short: %d bytes", n, len(b))
		}
		e.Name, b = string(b[:n]), b[n:]
		es = append(es, e)
	}
	return es, nil
}

// listPage is the page size of directory listings.
const listPage = 1024

// ListDir lists directory path in name order. With plus, each entry
// carries its size, mtime, permission bits and (for a regular file) the
// chain of its first stripe, from the same listing calls.
func (l *Lib) ListDir(h int64, path string, plus bool) ([]Entry, error) {
	cn, err := l.conn(h)
	if err != nil {
		return nil, err
	}
	var out []Entry
	err = cn.do("readdir", path, 0, func(ctx context.Context) error {
		var err error
		out, err = listDir(ctx, cn.c, path, plus, func(client.InodeDirEntry) bool { return true })
		return err
	})
	return out, err
}

// listDir lists the entries of directory path that keep accepts.
func listDir(ctx context.Context, c *client.Client, path string, plus bool, keep func(client.InodeDirEntry) bool) ([]Entry, error) {
	fi, err := c.Stat(ctx, path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: path, Err: client.ErrNotDir}
	}
	var out []Entry
	cursor := ""
	for {
		page, err := c.ReadDirPage(ctx, fi.Attr().Ino, cursor, listPage, plus)
		if err != nil {
			return nil, &fs.PathError{Op: "readdir", Path: path, Err: err}
		}
		for _, de := range page.Entries {
			if keep(de) {
				out = append(out, entryFrom(de))
			}
		}
		if page.EOF || len(page.Entries) == 0 {
			return out, nil
		}
		cursor = page.Cursor
	}
}

func entryFrom(de client.InodeDirEntry) Entry {
	e := Entry{Ino: de.Ino, Size: -1, Mode: de.Mode, Name: de.Name}
	if a := de.Attr; a != nil {
		e.Size, e.Mtime, e.Mode = int64(a.Size), a.Mtime, a.Mode
	}
	return e
}

func isDir(mode uint32) bool { return mode&syscall.S_IFMT == syscall.S_IFDIR }
