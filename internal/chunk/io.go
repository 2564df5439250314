package chunk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/errs"
)

// maxBatch is the most blocks one step of a read or write handles; larger
// requests are cut into steps, so scratch space stays bounded.
const maxBatch = 128

// scratch is per-call working memory, pooled so that the data path does
// not allocate.
type scratch struct {
	oldRaw [maxBatch * entrySize]byte
	newRaw [maxBatch * entrySize]byte
	old    [maxBatch]entry
	new    [maxBatch]entry
	block  [BlockSize]byte
	undo   []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (s *Store) checkRange(op string, id ID, off, n int64) error {
	if off < 0 || n < 0 || off > MaxChunkSize || n > MaxChunkSize-off {
		return errs.New(errs.Invalid, "chunk: %s chunk %v on target %d: range %d+%d is outside 0..%d", op, id, s.opts.Target, off, n, int64(MaxChunkSize))
	}
	return nil
}

// corrupt counts, logs and returns a checksum failure.
func (s *Store) corrupt(id ID, blk int64, off int64, detail string) error {
	s.corruptions.Add(1)
	s.log.Error("chunk: data corruption", "ino", id.Ino, "slot", id.Slot, "offset", off, "block", blk, "detail", detail)
	return errs.New(errs.Corruption, "chunk: corruption in chunk %v on target %d at offset %d (block %d): %s",
		id, s.opts.Target, off, blk, detail)
}

// readEntries reads and decodes the entries of blocks [b0, b0+len(out)).
func (s *Store) readEntries(h *handle, b0 int64, raw []byte, out []entry) error {
	raw = raw[:len(out)*entrySize]
	if err := readFull(h.sum, raw, b0*entrySize); err != nil {
		return fmt.Errorf("chunk: read checksums of chunk %v on target %d at offset %d: %w", h.id, s.opts.Target, b0*BlockSize, ioErr(err))
	}
	for i := range out {
		blk := b0 + int64(i)
		e, err := parseEntry(raw[i*entrySize:], uint32(blk))
		if err != nil {
			return s.corrupt(h.id, blk, blk*BlockSize, "checksum entry: "+err.Error())
		}
		out[i] = e
	}
	return nil
}

// ReadAt reads chunk id at off into p. It returns the number of bytes read
// and the chunk's length. n < len(p) only where the chunk ends; a missing
// chunk reads as empty (n == 0, chunkLen == 0, err == nil), unless it is
// frozen (see Freeze): then errs.Moved; holes read as zeros. Every block
// read is verified against its checksum: a mismatch fails the whole read
// with an errs.Corruption error (p then holds garbage), is logged and
// counted in Corruptions.
func (s *Store) ReadAt(id ID, off int64, p []byte) (n int, chunkLen int64, err error) {
	return s.ReadAtSums(id, off, p, nil)
}

// ReadAtSums is ReadAt that also gives the CRC32C of each piece of the
// bytes read (the range split at every multiple of BlockSize) in
// sums[:checksum.Pieces(off, n)]; sums must have room for checksum.Pieces(off, len(p)). A
// whole block's is the checksum it was verified by, so the pieces' CRC32Cs
// cost a pass only over partial and short blocks: a target sends them with
// a read's data, end to end (wire.ChunkReadResp).
func (s *Store) ReadAtSums(id ID, off int64, p []byte, sums []uint32) (n int, chunkLen int64, err error) {
	if err := s.checkRange("read", id, off, 0); err != nil {
		return 0, 0, err
	}
	h, err := s.lockChunkFor(id, false, false, &span{off, int64(len(p))})
	if err == errNoChunk {
		if s.Frozen(id) {
			return 0, 0, s.moved(id) // gone with its old layout: not a hole
		}
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("chunk: read chunk %v on target %d at offset %d: %w", id, s.opts.Target, off, err)
	}
	defer s.unlock(h, false)
	chunkLen = h.length
	if off >= chunkLen || len(p) == 0 {
		return 0, chunkLen, nil
	}
	n = int(min(int64(len(p)), chunkLen-off))
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	for done := 0; done < n; {
		o := off + int64(done)
		step := min(n-done, int(maxBatch*BlockSize-o%BlockSize))
		var stepSums []uint32
		if sums != nil {
			first := checksum.Pieces(off, done) // pieces of the steps before: steps end on block boundaries
			stepSums = sums[first : first+checksum.Pieces(o, step)]
		}
		if err := s.readSumsLocked(h, sc, o, p[done:done+step], stepSums); err != nil {
			return 0, chunkLen, err
		}
		done += step
	}
	return n, chunkLen, nil
}

// readLocked reads p at off, spanning at most maxBatch blocks. h.mu must be
// held (shared is enough).
func (s *Store) readLocked(h *handle, sc *scratch, off int64, p []byte) error {
	return s.readSumsLocked(h, sc, off, p, nil)
}

// readSumsLocked is readLocked that also fills sums (fillBlocks).
func (s *Store) readSumsLocked(h *handle, sc *scratch, off int64, p []byte, sums []uint32) error {
	end := off + int64(len(p))
	b0, b1 := off/BlockSize, (end-1)/BlockSize
	ents := sc.old[:b1-b0+1]
	if err := s.readEntries(h, b0, sc.oldRaw[:], ents); err != nil {
		return err
	}
	read := func(b []byte, at int64) error {
		if err := readFull(h.data, b, at); err != nil {
			return fmt.Errorf("chunk: read chunk %v on target %d at offset %d: %w", h.id, s.opts.Target, at, ioErr(err))
		}
		return nil
	}
	return fillBlocks(read, sc, off, p, ents, sums, func(blk int64, e entry, b []byte, inEnd int64) (int64, error) {
		// The last durable state of the block, after a power loss that
		// kept a newer entry but not its data, still vouches for its
		// own prefix. Bytes past it cannot be verified.
		bs, v := blk*BlockSize, int64(len(b))
		if e.prev.n == 0 || int64(e.prev.n) > v || crc(b[:e.prev.n]) != e.prev.crc {
			return 0, s.corrupt(h.id, blk, bs, fmt.Sprintf("checksum mismatch over bytes %d..%d", bs, bs+v))
		}
		valid := int64(e.prev.n)
		if inEnd > valid {
			return 0, s.corrupt(h.id, blk, bs+valid, fmt.Sprintf("bytes %d..%d of an interrupted write cannot be verified", bs+valid, bs+v))
		}
		return valid, nil
	})
}

// fillBlocks reads the chunk range at off into p, where ents are the
// entries of its blocks, and makes it the chunk's content: holes and zero
// blocks become zeros, and so do bytes past a block's valid length; every
// block with data is checked against its current entry's CRC32C. A block
// read only in part, or whose bytes do not match, is read again whole
// (its valid prefix) and checked on its own; if it still does not match,
// mismatch (given the block, its entry, its bytes and where the range
// ends in it) returns how many of its bytes are valid, or an error. Both
// the store's reads and direct reads (directread.go) follow these rules.
// If sums is not nil, sums[i] gets the CRC32C of the bytes of p in the
// range's i-th block: the entry's own for a whole block verified by it,
// computed for the others.
func fillBlocks(read func(b []byte, off int64) error, sc *scratch, off int64, p []byte, ents []entry, sums []uint32,
	mismatch func(blk int64, e entry, b []byte, inEnd int64) (int64, error)) error {
	// One pread for the whole range; partial blocks are re-read whole below.
	if err := read(p, off); err != nil {
		return err
	}
	end := off + int64(len(p))
	b0 := off / BlockSize
	for i, e := range ents {
		blk := b0 + int64(i)
		bs := blk * BlockSize
		lo, hi := max(off, bs), min(end, bs+BlockSize)
		dst := p[lo-off : hi-off]
		inOff, inEnd := lo-bs, hi-bs
		if !e.hasData() {
			clear(dst)
			if sums != nil {
				sums[i] = crc(dst)
			}
			continue
		}
		v := int64(e.cur.n)
		if inOff == 0 && inEnd >= v && crc(dst[:v]) == e.cur.crc {
			clear(dst[v:])
			if sums != nil {
				if int64(len(dst)) == v {
					sums[i] = e.cur.crc // the bytes just verified
				} else {
					sums[i] = crc(dst)
				}
			}
			continue
		}
		blkBuf := sc.block[:v]
		if err := read(blkBuf, bs); err != nil {
			return err
		}
		valid := v
		if crc(blkBuf) != e.cur.crc {
			var err error
			if valid, err = mismatch(blk, e, blkBuf, inEnd); err != nil {
				return err
			}
		}
		c := copy(dst, blkBuf[min(inOff, valid):min(inEnd, valid)])
		clear(dst[c:])
		if sums != nil {
			sums[i] = crc(dst)
		}
	}
	return nil
}

// WriteAt writes p at off in chunk id, creating the chunk if needed. With
// sync, the write (and every earlier write to the chunk) is durable when
// WriteAt returns. A failed write leaves the chunk as it was before it,
// except that a failed write larger than maxBatch blocks may have applied
// a prefix of whole steps. A full file system gives errs.NoSpace, a frozen
// chunk (see Freeze) errs.Moved.
func (s *Store) WriteAt(id ID, off int64, p []byte, sync bool) error {
	if err := s.checkRange("write", id, off, int64(len(p))); err != nil {
		return err
	}
	if s.Frozen(id) {
		return s.moved(id) // fast path: creates no chunk
	}
	h, err := s.lockChunk(id, true, true)
	if err != nil {
		return fmt.Errorf("chunk: write chunk %v on target %d at offset %d: %w", id, s.opts.Target, off, err)
	}
	defer s.unlock(h, true)
	if s.Frozen(id) {
		return s.moved(id) // checked under the chunk lock: see Freeze
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	for done := 0; done < len(p); {
		o := off + int64(done)
		step := min(len(p)-done, int(maxBatch*BlockSize-o%BlockSize))
		if err := s.writeLocked(h, sc, o, p[done:done+step], sync); err != nil {
			return err
		}
		done += step
	}
	if sync {
		return s.syncLocked(h)
	}
	s.startWritebackLocked(h, off, len(p))
	return nil
}

// writebackChunk is how many unsynced bytes of a chunk accumulate before
// the store asks the kernel to start writing them out.
const writebackChunk = 8 << 20

// startWritebackLocked starts (but does not wait for) the kernel's
// writeback of data written since the last kick, once writebackChunk bytes
// have accumulated. A large file then reaches the disk while it is still
// arriving, and the fsync at Sync/Close has little left to do. It changes
// no durability promise: only Sync makes data durable. h.mu is held.
func (s *Store) startWritebackLocked(h *handle, off int64, n int) {
	if h.wbBytes == 0 || off < h.wbStart {
		h.wbStart = off
	}
	h.wbBytes += int64(n)
	if h.wbBytes < writebackChunk {
		return
	}
	// Errors are ignored: this is a hint, and Sync reports real failures.
	unix.SyncFileRange(int(h.data.Fd()), h.wbStart, off+int64(n)-h.wbStart, unix.SYNC_FILE_RANGE_WRITE)
	h.wbStart, h.wbBytes = 0, 0
}

// writeLocked writes p (spanning at most maxBatch blocks) at off. h.mu must
// be held exclusively.
//
// An append (no byte that is valid now changes) writes data, then entries:
// a crash in between leaves the old entries, which vouch only for bytes the
// write did not touch. An overwrite first saves what it changes in the
// chunk's undo file, then writes entries, then data, then clears the undo
// file; recovery rolls back a block whose data does not match its new
// entry. See doc.go.
func (s *Store) writeLocked(h *handle, sc *scratch, off int64, p []byte, sync bool) (err error) {
	id := h.id
	end := off + int64(len(p))
	b0, b1 := off/BlockSize, (end-1)/BlockSize
	nb := int(b1 - b0 + 1)
	old, nw := sc.old[:nb], sc.new[:nb]
	if err := s.readEntries(h, b0, sc.oldRaw[:], old); err != nil {
		return fmt.Errorf("chunk: write chunk %v on target %d at offset %d: %w", id, s.opts.Target, off, err)
	}
	wrap := func(what string, err error) error {
		return fmt.Errorf("chunk: write chunk %v on target %d at offset %d: %s: %w", id, s.opts.Target, off, what, ioErr(err))
	}

	overwrite := false
	for i, e := range old {
		if e.hasData() && max(off, (b0+int64(i))*BlockSize)-(b0+int64(i))*BlockSize < int64(e.cur.n) {
			overwrite = true
			break
		}
	}

	// New entries, and for an overwrite the undo record.
	undo := sc.undo[:0]
	if overwrite {
		undo = appendUndoHeader(undo, id, nb)
	}
	// Zero runs the data write must include, before off and after end.
	var headZero, tailZero int64 // chunk offset where the leading zeros start; length of trailing zeros
	headZero = off
	for i, e := range old {
		blk := b0 + int64(i)
		bs := blk * BlockSize
		lo, hi := max(off, bs), min(end, bs+BlockSize)
		piece := p[lo-off : hi-off]
		inOff, inEnd := lo-bs, hi-bs
		var cur state
		switch {
		case !e.hasData(): // hole, or zeros not in the file: write the whole new prefix
			n := max(inEnd, int64(e.cur.n))
			cur.n = uint32(n)
			cur.crc = crcZeros(crcUpdate(crcZeros(0, inOff), piece), n-inEnd)
			if i == 0 {
				headZero = bs
			}
			if i == nb-1 {
				tailZero = n - inEnd
			}
		case inOff >= int64(e.cur.n): // append to the valid prefix
			cur.n = uint32(inEnd)
			cur.crc = crcUpdate(crcZeros(e.cur.crc, inOff-int64(e.cur.n)), piece)
			headZero = bs + int64(e.cur.n)
		case inOff == 0 && inEnd >= int64(e.cur.n): // replaces the whole valid prefix
			cur.n = uint32(inEnd)
			cur.crc = crc(piece)
		default: // changes part of the valid prefix: read, verify, patch
			v := int64(e.cur.n)
			blkBuf := sc.block[:v]
			if err := readFull(h.data, blkBuf, bs); err != nil {
				return wrap("read for update", err)
			}
			if crc(blkBuf) != e.cur.crc {
				return s.corrupt(id, blk, bs, fmt.Sprintf("checksum mismatch over bytes %d..%d (found while updating it)", bs, bs+v))
			}
			n := max(v, inEnd)
			buf := sc.block[:n]
			cur.crc = crcUpdate(crcUpdate(crcUpdate(0, buf[:inOff]), piece), buf[inEnd:n])
			cur.n = uint32(n)
		}
		ne := entry{cur: cur}
		if _, dirty := h.dirty[uint32(blk)]; dirty {
			ne.prev = e.prev // keep the last durable state
		} else if e.hasData() {
			ne.prev = e.cur
		}
		nw[i] = ne
		putEntry(sc.newRaw[i*entrySize:], uint32(blk), ne)
		if overwrite {
			var saved []byte // the valid bytes this write replaces
			if e.hasData() && inOff < int64(e.cur.n) {
				hiOld := min(inEnd, int64(e.cur.n))
				saved = sc.block[inOff:hiOld]
				if inOff == 0 && inEnd >= int64(e.cur.n) {
					// A whole-prefix replacement did not read it above.
					if err := readFull(h.data, saved, bs+inOff); err != nil {
						return wrap("read for undo", err)
					}
				}
			}
			undo = appendUndoBlock(undo, uint32(blk), sc.oldRaw[i*entrySize:], sc.newRaw[i*entrySize:], uint32(inOff), uint32(len(saved)))
			undo = append(undo, saved...)
		}
	}
	tailEnd := end + tailZero
	newRaw := sc.newRaw[:nb*entrySize]
	oldRaw := sc.oldRaw[:nb*entrySize]
	oldLength, oldSum, oldData := h.length, h.sumSize, h.dataSize
	if overwrite {
		undo = finishUndo(undo)
		sc.undo = undo
	}

	// Undo all of it if a step fails, so that a full disk leaves the chunk
	// as it was.
	entriesWritten, dataWritten := false, false
	defer func() {
		if err == nil || errors.Is(err, errStopped) {
			return
		}
		if dataWritten && overwrite {
			s.restoreUndo(h, undo)
		}
		if entriesWritten {
			if _, rerr := h.sum.WriteAt(oldRaw[:max(0, min(int64(len(oldRaw)), oldSum-b0*entrySize))], b0*entrySize); rerr != nil {
				s.log.Error("chunk: rolling back checksums failed", "ino", id.Ino, "slot", id.Slot, "err", rerr)
			}
		}
		if h.sumSize > oldSum {
			h.sum.Truncate(oldSum)
			h.sumSize = oldSum
		}
		if h.dataSize > oldData {
			h.data.Truncate(oldData)
			h.dataSize = oldData
		}
		h.length = oldLength
		if h.undo != nil && overwrite {
			if clearUndo(h.undo) == nil {
				h.undoDirty = false
			}
		}
	}()

	writeEntries := func() error {
		h.unsynced = true
		if _, err := h.sum.WriteAt(newRaw, b0*entrySize); err != nil {
			entriesWritten = true
			h.sumSize = max(h.sumSize, (b0+int64(nb))*entrySize)
			return wrap("write checksums", err)
		}
		entriesWritten = true
		h.sumSize = max(h.sumSize, (b0+int64(nb))*entrySize)
		return nil
	}
	writeData := func(torn bool) error {
		h.unsynced = true
		dataWritten = true
		if headZero < off {
			if _, err := h.data.WriteAt(zeroBlock[:off-headZero], headZero); err != nil {
				h.dataSize = max(h.dataSize, off)
				return wrap("write data", err)
			}
		}
		q := p
		if torn {
			q = p[:len(p)/2]
		}
		_, err := h.data.WriteAt(q, off)
		h.dataSize = max(h.dataSize, end)
		if err != nil {
			return wrap("write data", err)
		}
		if torn {
			return nil
		}
		if tailZero > 0 {
			if _, err := h.data.WriteAt(zeroBlock[:tailZero], end); err != nil {
				h.dataSize = max(h.dataSize, tailEnd)
				return wrap("write data", err)
			}
			h.dataSize = max(h.dataSize, tailEnd)
		}
		return nil
	}

	if !overwrite {
		if err := writeData(false); err != nil {
			return err
		}
		if s.hook != nil && s.hook(hookAppendData) {
			return errStopped
		}
		if err := writeEntries(); err != nil {
			return err
		}
	} else {
		if err := s.writeUndo(h, undo, sync); err != nil {
			return wrap("write undo record", err)
		}
		if err := writeEntries(); err != nil {
			return err
		}
		if s.hook != nil && s.hook(hookOverwriteEntry) {
			return errStopped
		}
		if s.hook != nil && s.hook(hookOverwriteTorn) {
			writeData(true)
			return errStopped
		}
		if err := writeData(false); err != nil {
			return err
		}
		if sync {
			// The undo record must outlive the data it protects.
			if err := s.syncLocked(h); err != nil {
				return err
			}
		}
		if err := clearUndo(h.undo); err != nil {
			return wrap("clear undo record", err)
		}
		h.undoDirty = false
	}
	for i := range nb {
		if h.dirty == nil {
			h.dirty = make(map[uint32]struct{})
		}
		h.dirty[uint32(b0)+uint32(i)] = struct{}{}
	}
	if end > h.length {
		s.used.Add(end - h.length)
		h.length = end
	}
	return nil
}

// errStopped is returned by a write stopped by a test hook.
var errStopped = errors.New("chunk: write stopped by test hook")

// writeUndo stores an undo record in h's undo file, creating it if needed.
func (s *Store) writeUndo(h *handle, rec []byte, sync bool) error {
	if h.undo == nil {
		f, err := os.OpenFile(s.undoPath(h.id), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		h.undo = f
		if sync {
			if err := syncDir(filepath.Dir(f.Name())); err != nil {
				return err
			}
		}
	}
	h.undoDirty = true
	if _, err := h.undo.WriteAt(rec, 0); err != nil {
		return err
	}
	if sync {
		return fdatasync(h.undo)
	}
	return nil
}

// clearUndo invalidates the record in an undo file by zeroing its magic;
// unlike truncating, this keeps the file's pages for the next record.
func clearUndo(f *os.File) error {
	var zero [len(undoMagic)]byte
	_, err := f.WriteAt(zero[:], 0)
	return err
}

// restoreUndo puts back the bytes an undo record saved (after a failed
// overwrite; entries are restored by the caller).
func (s *Store) restoreUndo(h *handle, rec []byte) {
	r, err := parseUndo(rec)
	if err != nil {
		s.log.Error("chunk: broken undo record in memory", "ino", h.id.Ino, "slot", h.id.Slot, "err", err)
		return
	}
	for _, ub := range r.blocks {
		if len(ub.old) == 0 {
			continue
		}
		if _, err := h.data.WriteAt(ub.old, int64(ub.blk)*BlockSize+int64(ub.off)); err != nil {
			s.log.Error("chunk: rolling back data failed", "ino", h.id.Ino, "slot", h.id.Slot, "block", ub.blk, "err", err)
		}
	}
}

// Truncate sets chunk id's length to size, durably: bytes past size are
// gone, and if size grows the new bytes read as zeros. Truncating a missing
// chunk to a positive size creates it; to zero, does nothing. A frozen
// chunk (see Freeze) gives errs.Moved.
func (s *Store) Truncate(id ID, size int64) error {
	if err := s.checkRange("truncate", id, size, 0); err != nil {
		return err
	}
	if s.Frozen(id) {
		return s.moved(id)
	}
	h, err := s.lockChunk(id, size > 0, true)
	if err == errNoChunk {
		if s.Frozen(id) {
			return s.moved(id)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("chunk: truncate chunk %v on target %d to %d: %w", id, s.opts.Target, size, err)
	}
	defer s.unlock(h, true)
	if s.Frozen(id) {
		return s.moved(id) // checked under the chunk lock: see Freeze
	}
	if err := s.truncateLocked(h, size); err != nil {
		return fmt.Errorf("chunk: truncate chunk %v on target %d to %d: %w", id, s.opts.Target, size, err)
	}
	return s.syncLocked(h)
}

func (s *Store) truncateLocked(h *handle, size int64) error {
	oldLen := h.length
	if size == oldLen {
		return nil
	}
	h.unsynced = true
	if size == 0 {
		if err := h.sum.Truncate(0); err != nil {
			return ioErr(err)
		}
		if err := h.data.Truncate(0); err != nil {
			return ioErr(err)
		}
		h.sumSize, h.dataSize, h.length = 0, 0, 0
		s.used.Add(-oldLen)
		return nil
	}
	k := (size - 1) / BlockSize
	bs := k * BlockSize
	v := size - bs
	if size < oldLen && h.sumSize > (k+1)*entrySize {
		// Drop later blocks first: a crash after this leaves a prefix of
		// the old chunk, never a mix.
		if err := h.sum.Truncate((k + 1) * entrySize); err != nil {
			return ioErr(err)
		}
		h.sumSize = (k + 1) * entrySize
	}
	var raw [entrySize]byte
	var ents [1]entry
	if err := s.readEntries(h, k, raw[:], ents[:]); err != nil {
		return err
	}
	e := ents[0]
	var ne entry
	switch {
	case !e.hasData():
		ne = entry{cur: state{n: uint32(v)}, zero: true}
	case int64(e.cur.n) == v:
		ne = e
	case int64(e.cur.n) > v:
		buf := scratchPool.Get().(*scratch)
		defer scratchPool.Put(buf)
		blkBuf := buf.block[:e.cur.n]
		if err := readFull(h.data, blkBuf, bs); err != nil {
			return ioErr(err)
		}
		if crc(blkBuf) != e.cur.crc {
			return s.corrupt(h.id, k, bs, fmt.Sprintf("checksum mismatch over bytes %d..%d (found while truncating)", bs, bs+int64(e.cur.n)))
		}
		ne = entry{cur: state{crc: crc(blkBuf[:v]), n: uint32(v)}}
	default: // grow the block's valid prefix with zeros in the file
		n := int64(e.cur.n)
		if _, err := h.data.WriteAt(zeroBlock[:v-n], bs+n); err != nil {
			if h.dataSize < bs+n {
				h.data.Truncate(h.dataSize)
			}
			return ioErr(err)
		}
		h.dataSize = max(h.dataSize, size)
		ne = entry{cur: state{crc: crcZeros(e.cur.crc, v-n), n: uint32(v)}}
	}
	if ne != e {
		switch _, dirty := h.dirty[uint32(k)]; {
		case ne.zero:
			// A zero block has no fallback.
		case dirty:
			ne.prev = e.prev
		case e.hasData():
			ne.prev = e.cur
		}
		putEntry(raw[:], uint32(k), ne)
		if _, err := h.sum.WriteAt(raw[:], k*entrySize); err != nil {
			if h.sumSize < (k+1)*entrySize {
				h.sum.Truncate(h.sumSize)
			}
			return ioErr(err)
		}
		h.sumSize = max(h.sumSize, (k+1)*entrySize)
	}
	if h.dataSize > size {
		if err := h.data.Truncate(size); err != nil {
			return ioErr(err)
		}
		h.dataSize = size
	}
	h.length = size
	s.used.Add(size - oldLen)
	return nil
}
