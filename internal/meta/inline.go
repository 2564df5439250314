package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Inline data (ADR 0009). A regular file's first bytes may live in the
// metadata engine, in its "D" key, instead of chunks on the targets: a
// small file is then created, written and read with metadata requests
// alone, its writes share the engine's group commit, and removing it frees
// no chunks.
//
// A file starts with no chunks (inoChunks clear): all its bytes are
// inline, and the inline bytes grow with writes up to Options.InlineMax.
// Before a client writes a chunk it calls SetChunks, which sets inoChunks
// and freezes InlineLen: from then on the bytes [0, InlineLen) stay inline
// and every byte after it lives in chunks. Nothing is ever copied between
// the two, so there is no window in which a byte has two homes: a byte's
// home is known from the inode alone. InlineLen only shrinks after that
// (a truncate), which moves the boundary down: the chunks hold nothing
// below the old boundary (no byte there ever lived in chunks) and the
// truncate cut them at the new size, so the bytes that move to chunks read
// as zeros, as they must.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeInline is the "D" value: CRC32C of data, then data.
func encodeInline(data []byte) []byte {
	b := make([]byte, 4, 4+len(data))
	binary.BigEndian.PutUint32(b, crc32.Checksum(data, castagnoli))
	return append(b, data...)
}

// getInline returns inode ino's inline bytes, checking their checksum and
// that there are n of them.
func getInline(tx kv.Txn, ino uint64, n uint32) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	v, err := tx.Get(inlineKey(ino))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, errs.New(errs.Corruption, "meta: inode %d: its %d inline bytes are missing", ino, n)
	}
	if err != nil {
		return nil, err
	}
	if len(v) != 4+int(n) {
		return nil, errs.New(errs.Corruption, "meta: inode %d: inline record of %d bytes, want %d", ino, len(v), 4+n)
	}
	data := v[4:]
	if got, want := crc32.Checksum(data, castagnoli), binary.BigEndian.Uint32(v); got != want {
		return nil, errs.New(errs.Corruption, "meta: inode %d: inline data checksum %08x, want %08x", ino, got, want)
	}
	return data, nil
}

// setInline stores data as n's inline bytes (deleting the key when there
// are none) and sets n.InlineLen; the caller writes n.
func setInline(tx kv.Txn, ino uint64, n *inode, data []byte) {
	if len(data) == 0 {
		if n.InlineLen > 0 {
			tx.Delete(inlineKey(ino))
		}
	} else {
		tx.Set(inlineKey(ino), encodeInline(data))
	}
	n.InlineLen = uint32(len(data))
}

// truncateInline cuts n's inline bytes to size if they pass it. The
// caller writes n.
func truncateInline(tx kv.Txn, ino uint64, n *inode, size uint64) error {
	if uint64(n.InlineLen) <= size {
		return nil
	}
	data, err := getInline(tx, ino, n.InlineLen)
	if err != nil {
		return err
	}
	setInline(tx, ino, n, data[:size])
	return nil
}

func regularFile(n *inode) error {
	switch {
	case n.isDir():
		return errs.New(errs.IsDir, "is a directory")
	case !n.isReg():
		return errs.New(errs.Invalid, "not a regular file (type %#o)", n.Mode&modeType)
	}
	return nil
}

// WriteInline writes req.Data at req.Off into a file's inline bytes (see
// the top of this file). A file without chunks takes the whole write, if
// it ends within InlineMax (else errs.TooBig); a file with chunks takes
// the part below its InlineLen, maybe nothing, and Written says how much.
// The size grows to cover what was written; mtime and ctime become
// req.Mtime (the server's clock if 0).
func (s *Service) WriteInline(ctx context.Context, req *wire.WriteInlineReq) (wire.WriteInlineResp, error) {
	if err := validInlineWrite(req); err != nil {
		return wire.WriteInlineResp{}, inoErr("writeinline", req.Ino, err)
	}
	mtime := s.writeTime(req)
	var r wire.WriteInlineResp
	err := s.update(ctx, func(tx kv.Txn) error {
		written, unchanged, n, err := s.writeInlineTx(tx, req, mtime)
		if err != nil {
			return err
		}
		if written > 0 {
			tx.Set(inodeKey(req.Ino), n.encode())
		}
		r, err = inlineResp(tx, req.Ino, n, written, unchanged)
		return err
	})
	if err != nil {
		return wire.WriteInlineResp{}, inoErr("writeinline", req.Ino, err)
	}
	return r, nil
}

// WriteInlineAttr is WriteInline of req.Write and then, in the same
// transaction, the change req.Attr of the same file's mode, owner, group
// and times, as SetAttr makes it (with its audit entry). The write must
// land whole (a file without chunks, or one whose inline part covers it):
// else nothing is changed and the error is errs.TooBig, and the client
// sends the two requests apart.
func (s *Service) WriteInlineAttr(ctx context.Context, req *wire.WriteInlineAttrReq) (wire.WriteInlineResp, error) {
	w, ch := &req.Write, &req.Attr
	if err := validInlineWrite(w); err != nil {
		return wire.WriteInlineResp{}, inoErr("writeinline", w.Ino, err)
	}
	if err := attrWithWrite(w.Ino, ch); err != nil {
		return wire.WriteInlineResp{}, inoErr("writeinline", w.Ino, err)
	}
	mtime := s.writeTime(w)
	var r wire.WriteInlineResp
	audited := false
	err := s.update(ctx, func(tx kv.Txn) error {
		audited = false
		written, unchanged, n, err := s.writeInlineTx(tx, w, mtime)
		if err != nil {
			return err
		}
		if int(written) != len(w.Data) {
			return errs.New(errs.TooBig, "%d of the write's %d bytes go inline", written, len(w.Data))
		}
		if audited, err = s.changeWithWrite(ctx, tx, ch, n); err != nil {
			return err
		}
		tx.Set(inodeKey(w.Ino), n.encode())
		r, err = inlineResp(tx, w.Ino, n, written, unchanged)
		return err
	})
	if err != nil {
		return wire.WriteInlineResp{}, inoErr("writeinline", w.Ino, err)
	}
	if audited {
		s.audited()
	}
	return r, nil
}

// attrWithWrite checks an attribute change sent with a write of inode
// ino (OpWriteInlineAttr, OpCommitWriteAttr): the same file, and only its
// mode, owner, group and times.
func attrWithWrite(ino uint64, ch *wire.SetAttrReq) error {
	if ch.Ino != ino {
		return errs.New(errs.Invalid, "the attribute change names inode %d", ch.Ino)
	}
	if ch.Valid&^(wire.SetMode|wire.SetUid|wire.SetGid|wire.SetAtime|wire.SetMtime) != 0 {
		return errs.New(errs.Invalid, "a write changes only mode, owner, group and times with it (valid %#x)", ch.Valid)
	}
	return nil
}

// changeWithWrite applies to n, in tx, the attribute change ch sent with
// a write (attrWithWrite checked it): mode, owner and group as SetAttr
// makes them, with their audit entry, the times, and the ctime now.
func (s *Service) changeWithWrite(ctx context.Context, tx kv.Txn, ch *wire.SetAttrReq, n *inode) (audited bool, err error) {
	now := s.nowNs()
	if audited, err = s.changeOwnership(ctx, tx, ch, n, now); err != nil {
		return false, err
	}
	if ch.Valid&wire.SetMtime != 0 {
		n.Mtime = ch.Mtime
	}
	n.Ctime = now
	return audited, nil
}

func validInlineWrite(req *wire.WriteInlineReq) error {
	if req.Off+uint64(len(req.Data)) < req.Off {
		return errs.ErrInvalid
	}
	return nil
}

// writeTime is an inline write's modification time: the client's, or the
// server's clock if it sent none.
func (s *Service) writeTime(req *wire.WriteInlineReq) int64 {
	if req.Mtime != 0 {
		return req.Mtime
	}
	return s.nowNs()
}

// writeInlineTx applies an inline write to tx: the file's inline bytes,
// and its size and times in n, which it returns unwritten (the caller
// writes the inode, once, after any other change it makes). written is
// how many bytes went inline; unchanged says whether the file was in the
// state the write's If fields name.
func (s *Service) writeInlineTx(tx kv.Txn, req *wire.WriteInlineReq, mtime int64) (written uint32, unchanged bool, n *inode, err error) {
	end := req.Off + uint64(len(req.Data))
	if n, err = getInode(tx, req.Ino); err != nil {
		return 0, false, nil, err
	}
	if err := regularFile(n); err != nil {
		return 0, false, nil, err
	}
	unchanged = unchangedSince(n, req.IfMtime, req.IfSize)
	p := req.Data
	if n.hasChunks() {
		switch {
		case req.Off >= uint64(n.InlineLen):
			p = nil
		case end > uint64(n.InlineLen):
			p = p[:uint64(n.InlineLen)-req.Off]
		}
	} else if end > uint64(s.inlMax) {
		return 0, false, nil, errs.New(errs.TooBig, "a write up to byte %d does not fit in the %d bytes a file may keep inline", end, s.inlMax)
	}
	if len(p) > 0 {
		if err := hsmWrite(tx, req.Ino, n); err != nil {
			return 0, false, nil, err
		}
		cur, err := getInline(tx, req.Ino, n.InlineLen)
		if err != nil {
			return 0, false, nil, err
		}
		newLen := max(uint64(len(cur)), req.Off+uint64(len(p)))
		data := make([]byte, newLen)
		copy(data, cur)
		copy(data[req.Off:], p)
		setInline(tx, req.Ino, n, data)
		n.Size = max(n.Size, req.Off+uint64(len(p)))
		n.Mtime, n.Ctime = mtime, mtime
	}
	return uint32(len(p)), unchanged, n, nil
}

// inlineResp is the reply to an inline write that left inode ino as n.
func inlineResp(tx kv.Txn, ino uint64, n *inode, written uint32, unchanged bool) (wire.WriteInlineResp, error) {
	r := wire.WriteInlineResp{Written: written}
	var err error
	r.Attr, err = attrOf(tx, ino, n)
	if unchanged {
		r.Attr.Flags |= wire.AttrUnchanged
	}
	return r, err
}

// ReadInline reads up to req.Len inline bytes of a file at req.Off: fewer
// (maybe none) where the range passes its InlineLen. The attributes in
// the reply say where the rest of the range lives.
func (s *Service) ReadInline(ctx context.Context, req *wire.ReadInlineReq) (wire.ReadInlineResp, error) {
	var r wire.ReadInlineResp
	err := s.db.View(ctx, func(tx kv.Txn) error {
		r = wire.ReadInlineResp{}
		n, err := getInode(tx, req.Ino)
		if err != nil {
			return err
		}
		if err := regularFile(n); err != nil {
			return err
		}
		if req.Off < uint64(n.InlineLen) {
			data, err := getInline(tx, req.Ino, n.InlineLen)
			if err != nil {
				return err
			}
			end := min(req.Off+uint64(req.Len), uint64(n.InlineLen))
			r.Data = append([]byte(nil), data[req.Off:end]...)
		}
		r.Attr, err = attrOf(tx, req.Ino, n)
		return err
	})
	if err != nil {
		return wire.ReadInlineResp{}, inoErr("readinline", req.Ino, err)
	}
	return r, nil
}

// SetChunks marks a regular file as having chunks, freezing its inline
// bytes where they end: a client calls it before it writes the file's
// first chunk. It is idempotent.
func (s *Service) SetChunks(ctx context.Context, ino uint64) (wire.Attr, error) {
	var a wire.Attr
	err := s.update(ctx, func(tx kv.Txn) error {
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		if err := regularFile(n); err != nil {
			return err
		}
		if !n.hasChunks() {
			n.Flags |= inoChunks
			tx.Set(inodeKey(ino), n.encode())
		}
		a, err = attrOf(tx, ino, n)
		return err
	})
	if err != nil {
		return wire.Attr{}, inoErr("setchunks", ino, err)
	}
	return a, nil
}
