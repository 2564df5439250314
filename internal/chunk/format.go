package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/placement"
)

// Format constants. Changing any of them is a format change: bump
// FormatVersion and teach Open to convert or refuse old stores.
const (
	// FormatVersion is the version of the on-disk layout described in doc.go.
	FormatVersion = 1
	// BlockSize is the unit of checksumming: one sidecar entry per block.
	BlockSize = checksum.BlockSize
	// MaxChunkSize bounds a chunk's length (and so the sidecar's size).
	MaxChunkSize = 1 << 40

	entrySize  = 32
	formatSize = 28
	formatName = "FORMAT"

	flagZero = 1 << 0 // entry: the block is cur.n zero bytes; the data file is not consulted

	undoHeaderSize = 24
	undoBlockSize  = 4 + 2*entrySize + 4 + 4 // block, old entry, new entry, off, n
)

var (
	castagnoli  = crc32.MakeTable(crc32.Castagnoli)
	formatMagic = [8]byte{'S', 'L', 'U', 'I', 'C', 'E', 'C', 'S'}
	undoMagic   = [4]byte{'S', 'L', 'U', 'U'}
	zeroBlock   [BlockSize]byte
)

// crc is a block's CRC32C: checksum.BlockCRC, the one clients compute too
// (ChunkInfo's digests are compared with theirs).
func crc(b []byte) uint32                 { return checksum.BlockCRC(b) }
func crcUpdate(c uint32, b []byte) uint32 { return crc32.Update(c, castagnoli, b) }

// crcZeros extends c over n zero bytes.
func crcZeros(c uint32, n int64) uint32 {
	for n > 0 {
		k := min(n, BlockSize)
		c = crcUpdate(c, zeroBlock[:k])
		n -= k
	}
	return c
}

// errBadEntry and friends describe undecodable on-disk bytes; callers wrap
// them into an errs.Corruption error that names the chunk, target and offset.
var (
	errBadEntry  = errors.New("malformed checksum entry")
	errBadFormat = errors.New("malformed FORMAT file")
	errBadUndo   = errors.New("malformed undo record")
)

// state is one version of a block: the CRC32C of its first n bytes.
type state struct {
	crc uint32
	n   uint32
}

// entry is the decoded sidecar entry of one block. An absent entry (all
// zero bytes on disk) is the zero entry: the block is a hole.
type entry struct {
	cur  state
	prev state // the block's last durable state, a fallback after power loss; n == 0: none
	zero bool  // cur is cur.n zero bytes, not stored in the data file
}

func (e entry) present() bool { return e.cur.n > 0 }

// hasData reports whether the block's bytes live in the data file.
func (e entry) hasData() bool { return e.cur.n > 0 && !e.zero }

// putEntry encodes e as the entry of block blk into b[:entrySize]. The zero
// entry encodes as all zeros (a hole), exactly like a never-written entry.
func putEntry(b []byte, blk uint32, e entry) {
	b = b[:entrySize]
	if !e.present() {
		clear(b)
		return
	}
	var flags uint32
	if e.zero {
		flags |= flagZero
	}
	binary.LittleEndian.PutUint32(b[0:], e.cur.crc)
	binary.LittleEndian.PutUint32(b[4:], e.cur.n)
	binary.LittleEndian.PutUint32(b[8:], e.prev.crc)
	binary.LittleEndian.PutUint32(b[12:], e.prev.n)
	binary.LittleEndian.PutUint32(b[16:], flags)
	binary.LittleEndian.PutUint32(b[20:], blk)
	binary.LittleEndian.PutUint32(b[24:], 0)
	binary.LittleEndian.PutUint32(b[28:], crc(b[:28]))
}

// parseEntry decodes the entry of block blk from b[:entrySize].
func parseEntry(b []byte, blk uint32) (entry, error) {
	if len(b) < entrySize {
		return entry{}, fmt.Errorf("%w: %d bytes", errBadEntry, len(b))
	}
	b = b[:entrySize]
	if isZero(b) {
		return entry{}, nil
	}
	if got, want := binary.LittleEndian.Uint32(b[28:]), crc(b[:28]); got != want {
		return entry{}, fmt.Errorf("%w: entry checksum %#08x, computed %#08x", errBadEntry, got, want)
	}
	e := entry{
		cur:  state{crc: binary.LittleEndian.Uint32(b[0:]), n: binary.LittleEndian.Uint32(b[4:])},
		prev: state{crc: binary.LittleEndian.Uint32(b[8:]), n: binary.LittleEndian.Uint32(b[12:])},
	}
	flags := binary.LittleEndian.Uint32(b[16:])
	e.zero = flags&flagZero != 0
	switch {
	case flags&^flagZero != 0:
		return entry{}, fmt.Errorf("%w: unknown flags %#x", errBadEntry, flags)
	case binary.LittleEndian.Uint32(b[20:]) != blk:
		return entry{}, fmt.Errorf("%w: entry is for block %d, not %d", errBadEntry, binary.LittleEndian.Uint32(b[20:]), blk)
	case binary.LittleEndian.Uint32(b[24:]) != 0:
		return entry{}, fmt.Errorf("%w: reserved field is set", errBadEntry)
	case e.cur.n == 0 || e.cur.n > BlockSize || e.prev.n > BlockSize:
		return entry{}, fmt.Errorf("%w: lengths %d/%d out of range", errBadEntry, e.cur.n, e.prev.n)
	}
	return e, nil
}

func isZero(b []byte) bool {
	for len(b) > 0 {
		k := min(len(b), BlockSize)
		if !bytes.Equal(b[:k], zeroBlock[:k]) {
			return false
		}
		b = b[k:]
	}
	return true
}

// formatInfo is the content of a store's FORMAT file.
type formatInfo struct {
	Version uint32
	Target  placement.TargetID
}

func encodeFormat(f formatInfo) []byte {
	b := make([]byte, formatSize)
	copy(b, formatMagic[:])
	binary.LittleEndian.PutUint32(b[8:], f.Version)
	binary.LittleEndian.PutUint32(b[12:], uint32(f.Target))
	binary.LittleEndian.PutUint32(b[16:], BlockSize)
	binary.LittleEndian.PutUint32(b[20:], entrySize)
	binary.LittleEndian.PutUint32(b[24:], crc(b[:24]))
	return b
}

// parseFormat decodes a FORMAT file. It checks the magic and checksum; the
// caller checks the version and target. Block and entry size are part of
// the version, and are checked here so that a mismatch cannot slip through.
func parseFormat(b []byte) (formatInfo, error) {
	if len(b) != formatSize {
		return formatInfo{}, fmt.Errorf("%w: %d bytes, want %d", errBadFormat, len(b), formatSize)
	}
	if [8]byte(b[:8]) != formatMagic {
		return formatInfo{}, fmt.Errorf("%w: bad magic %q", errBadFormat, b[:8])
	}
	if got, want := binary.LittleEndian.Uint32(b[24:]), crc(b[:24]); got != want {
		return formatInfo{}, fmt.Errorf("%w: checksum %#08x, computed %#08x", errBadFormat, got, want)
	}
	f := formatInfo{
		Version: binary.LittleEndian.Uint32(b[8:]),
		Target:  placement.TargetID(binary.LittleEndian.Uint32(b[12:])),
	}
	if f.Version == FormatVersion {
		bs, es := binary.LittleEndian.Uint32(b[16:]), binary.LittleEndian.Uint32(b[20:])
		if bs != BlockSize || es != entrySize {
			return formatInfo{}, fmt.Errorf("%w: block size %d / entry size %d, want %d / %d", errBadFormat, bs, es, BlockSize, entrySize)
		}
	}
	return f, nil
}

// undoBlock is one block of an undo record: the entry before and after the
// write, and the bytes [off, off+len(old)) of the block before the write.
type undoBlock struct {
	blk      uint32
	oldEntry [entrySize]byte
	newEntry [entrySize]byte
	off      uint32
	old      []byte
}

// undoRecord is the content of an undo file: what an in-place overwrite of
// one chunk is about to change, so that recovery can roll a torn overwrite
// back.
type undoRecord struct {
	id     ID
	blocks []undoBlock
}

// appendUndoHeader starts an undo record for id with count blocks.
func appendUndoHeader(b []byte, id ID, count int) []byte {
	b = append(b, undoMagic[:]...)
	b = binary.LittleEndian.AppendUint32(b, FormatVersion)
	b = binary.LittleEndian.AppendUint64(b, id.Ino)
	b = binary.LittleEndian.AppendUint32(b, id.Slot)
	return binary.LittleEndian.AppendUint32(b, uint32(count))
}

// appendUndoBlock adds a block to an undo record; old is appended by the
// caller right after (n bytes).
func appendUndoBlock(b []byte, blk uint32, oldEntry, newEntry []byte, off, n uint32) []byte {
	b = binary.LittleEndian.AppendUint32(b, blk)
	b = append(b, oldEntry[:entrySize]...)
	b = append(b, newEntry[:entrySize]...)
	b = binary.LittleEndian.AppendUint32(b, off)
	return binary.LittleEndian.AppendUint32(b, n)
}

// finishUndo appends the record's checksum.
func finishUndo(b []byte) []byte { return binary.LittleEndian.AppendUint32(b, crc(b)) }

// parseUndo decodes an undo record. The blocks' old bytes alias b.
func parseUndo(b []byte) (undoRecord, error) {
	if len(b) < undoHeaderSize+4 {
		return undoRecord{}, fmt.Errorf("%w: %d bytes", errBadUndo, len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if [4]byte(b[:4]) != undoMagic {
		return undoRecord{}, fmt.Errorf("%w: bad magic %q", errBadUndo, b[:4])
	}
	if got := crc(body); got != sum {
		return undoRecord{}, fmt.Errorf("%w: checksum %#08x, computed %#08x", errBadUndo, sum, got)
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != FormatVersion {
		return undoRecord{}, fmt.Errorf("%w: version %d", errBadUndo, v)
	}
	r := undoRecord{id: ID{Ino: binary.LittleEndian.Uint64(b[8:]), Slot: binary.LittleEndian.Uint32(b[16:])}}
	count := binary.LittleEndian.Uint32(b[20:])
	rest := body[undoHeaderSize:]
	if uint64(count) > uint64(len(rest)/undoBlockSize) {
		return undoRecord{}, fmt.Errorf("%w: %d blocks in %d bytes", errBadUndo, count, len(rest))
	}
	r.blocks = make([]undoBlock, count)
	for i := range r.blocks {
		if len(rest) < undoBlockSize {
			return undoRecord{}, fmt.Errorf("%w: truncated block %d", errBadUndo, i)
		}
		ub := &r.blocks[i]
		ub.blk = binary.LittleEndian.Uint32(rest)
		copy(ub.oldEntry[:], rest[4:])
		copy(ub.newEntry[:], rest[4+entrySize:])
		ub.off = binary.LittleEndian.Uint32(rest[4+2*entrySize:])
		n := binary.LittleEndian.Uint32(rest[8+2*entrySize:])
		rest = rest[undoBlockSize:]
		if uint64(ub.off)+uint64(n) > BlockSize || uint64(n) > uint64(len(rest)) {
			return undoRecord{}, fmt.Errorf("%w: block %d range %d+%d is out of bounds", errBadUndo, i, ub.off, n)
		}
		if _, err := parseEntry(ub.oldEntry[:], ub.blk); err != nil {
			return undoRecord{}, fmt.Errorf("%w: old entry of block %d: %v", errBadUndo, ub.blk, err)
		}
		if _, err := parseEntry(ub.newEntry[:], ub.blk); err != nil {
			return undoRecord{}, fmt.Errorf("%w: new entry of block %d: %v", errBadUndo, ub.blk, err)
		}
		ub.old = rest[:n:n]
		rest = rest[n:]
	}
	if len(rest) != 0 {
		return undoRecord{}, fmt.Errorf("%w: %d trailing bytes", errBadUndo, len(rest))
	}
	return r, nil
}
