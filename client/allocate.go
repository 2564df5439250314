package client

import (
	"context"
	"io/fs"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// What fallocate(2) asks of a file, for the mount and library users who
// preallocate (fio, rsync --preallocate, download tools, checkpoint
// writers). Sluice reserves no space on the targets: a later write can
// still fail with ENOSPC, and a punched hole is written as zeros, which
// frees nothing (docs/fuse.md, Limitations).

// Allocate makes the file at least end bytes long (fallocate(2) without
// flags): the bytes it adds read as zeros, and a file already as long or
// longer, also because another client wrote meanwhile, keeps its size.
// The file's buffered writes land first.
func (f *File) Allocate(ctx context.Context, end int64) error {
	if end < 0 {
		return opErr("allocate", f.name, errs.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a, err := f.prepareSizeLocked(ctx, "allocate")
	if err != nil {
		return err
	}
	if err := f.growLocked(ctx, &a, end); err != nil {
		return opErr("allocate", f.name, err)
	}
	return nil
}

// ZeroRange makes the n bytes at off read as zeros (fallocate(2) with
// FALLOC_FL_ZERO_RANGE, or FALLOC_FL_PUNCH_HOLE with keepSize). With
// keepSize the file's size stays as it is and bytes past it are left
// alone; without, the file grows to off+n if it is shorter. Bytes within
// the file are written as zeros; those past its end cost only the size.
func (f *File) ZeroRange(ctx context.Context, off, n int64, keepSize bool) error {
	if off < 0 || n <= 0 || off+n < off {
		return opErr("zero range", f.name, errs.ErrInvalid)
	}
	f.mu.Lock()
	a, err := f.prepareSizeLocked(ctx, "zero range")
	f.mu.Unlock()
	if err != nil {
		return err
	}
	end := off + n
	// Zero what the file holds of the range. A write of another client
	// that grows the file meanwhile is ordered after this one: its bytes
	// past the size seen here are left alone, as they would be by a
	// fallocate that came first.
	for at, stop := off, min(end, int64(a.Size)); at < stop; {
		m := min(stop-at, int64(len(zeroBlock)))
		if _, err := f.writeAt(ctx, zeroBlock[:m], at); err != nil {
			return err
		}
		at += m
	}
	if keepSize || end <= int64(a.Size) {
		return f.flush(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.waitFlushesLocked(ctx); err != nil {
		return opErr("zero range", f.name, err)
	}
	if err := f.growLocked(ctx, &a, end); err != nil {
		return opErr("zero range", f.name, err)
	}
	return nil
}

// zeroBlock is what ZeroRange writes, a piece at a time (writes copy it).
var zeroBlock = make([]byte, 1<<20)

// readySizeLocked readies the File for a change of its size or bytes
// that is not a plain write (op names it in errors): its buffered and
// staged writes land and its caches go. f.mu is held.
func (f *File) readySizeLocked(ctx context.Context, op string) error {
	if f.closed {
		return opErr(op, f.name, fs.ErrClosed)
	}
	if !f.writable() {
		return opErr(op, f.name, errs.New(errs.Permission, "client: file not open for writing"))
	}
	if err := f.waitFlushesLocked(ctx); err != nil {
		return opErr(op, f.name, err)
	}
	if err := f.awaitStagedLocked(ctx); err != nil {
		return opErr(op, f.name, err)
	}
	f.dropCaches()
	return nil
}

// prepareSizeLocked is readySizeLocked, and then learns the attributes,
// which it returns. f.mu is held.
func (f *File) prepareSizeLocked(ctx context.Context, op string) (wire.Attr, error) {
	var a wire.Attr
	if err := f.readySizeLocked(ctx, op); err != nil {
		return a, err
	}
	if err := f.c.metaCall(ctx, wire.OpGetAttr, &wire.InoReq{Ino: f.ino}, &a); err != nil {
		return a, opErr(op, f.name, err)
	}
	f.learn(&a)
	return a, nil
}

// growLocked makes the file whose attributes are a at least end bytes
// long, with one size change that the metadata service applies only if
// the file is still shorter (wire.SetSizeGrow): it never cuts a file that
// another client grew meanwhile, whose chunks nobody cut. A released
// file is restored first, as for a truncate. f.mu is held.
func (f *File) growLocked(ctx context.Context, a *wire.Attr, end int64) error {
	if end <= int64(a.Size) {
		f.size = max(f.size, int64(a.Size))
		return nil
	}
	if a.Flags&wire.AttrReleased != 0 {
		if err := f.restoreBeforeWriteLocked(ctx, a); err != nil {
			return err
		}
	}
	req := &wire.SetAttrReq{Ino: f.ino, Valid: wire.SetSize | wire.SetSizeGrow, Size: uint64(end)}
	if err := f.sendSizeLocked(ctx, req, a); err != nil {
		return err
	}
	f.size = max(f.size, int64(a.Size))
	f.truncs++
	return nil
}
