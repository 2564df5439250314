package kvcache

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// A value file (docs/format.md, "KV-cache store"): a header, then the
// value. The header is "SLKV" | u8 version | u8 0 | u16 key length | u64
// value length | i64 created (unix ns) | i64 expires (unix ns, 0 never) |
// [version 2: u64 upload, the number of the put that stored it] | key |
// one u32 CRC32C per blockSize block of the value | u32 CRC32C of the
// header before it. Little-endian. Version 2 (2026-12-03) is written;
// version 1 files are read (their upload is 0, which no put uses).

const (
	fileMagic     = "SLKV"
	fileVersion   = 2
	blockSize     = wire.KVBlockSize
	fixedHeaderV1 = 4 + 1 + 1 + 2 + 8 + 8 + 8
	fixedHeader   = fixedHeaderV1 + 8
	// MaxKey bounds a key's length in bytes.
	MaxKey = 1024
	// MaxValue bounds a value's length.
	MaxValue = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is a value file's header.
type header struct {
	Key     string
	Len     uint64
	Created int64
	Expires int64
	Upload  uint64   // the put that stored it (0: unknown, a version 1 file)
	Sums    []uint32 // per block
}

func blocks(n uint64) int { return int((n + blockSize - 1) / blockSize) }

// headerLen is the encoded length of a header (of the version written)
// for this key and length.
func headerLen(keyLen int, n uint64) int64 { return headerLenOf(fixedHeader, keyLen, n) }

func headerLenOf(fixed, keyLen int, n uint64) int64 {
	return int64(fixed + keyLen + 4*blocks(n) + 4)
}

func (h *header) encode() []byte {
	b := make([]byte, 0, headerLen(len(h.Key), h.Len))
	b = append(b, fileMagic...)
	b = append(b, fileVersion, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(h.Key)))
	b = binary.LittleEndian.AppendUint64(b, h.Len)
	b = binary.LittleEndian.AppendUint64(b, uint64(h.Created))
	b = binary.LittleEndian.AppendUint64(b, uint64(h.Expires))
	b = binary.LittleEndian.AppendUint64(b, h.Upload)
	b = append(b, h.Key...)
	for _, s := range h.Sums {
		b = binary.LittleEndian.AppendUint32(b, s)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeHeader decodes the header at the start of b (which may hold more)
// and returns it with its length.
func decodeHeader(b []byte) (header, int64, error) {
	bad := func(why string) (header, int64, error) {
		return header{}, 0, errs.New(errs.Corruption, "kvcache: value file header: %s", why)
	}
	if len(b) < fixedHeaderV1 || string(b[:4]) != fileMagic {
		return bad("no magic")
	}
	fixed := fixedHeader
	switch {
	case b[5] != 0 || (b[4] != 1 && b[4] != fileVersion):
		return bad("unknown version")
	case b[4] == 1:
		fixed = fixedHeaderV1
	case len(b) < fixedHeader:
		return bad("short")
	}
	kl := int(binary.LittleEndian.Uint16(b[6:]))
	n := binary.LittleEndian.Uint64(b[8:])
	if kl == 0 || kl > MaxKey || n > MaxValue {
		return bad("key or value length out of range")
	}
	hl := headerLenOf(fixed, kl, n)
	if int64(len(b)) < hl {
		return bad("short")
	}
	if crc32.Checksum(b[:hl-4], castagnoli) != binary.LittleEndian.Uint32(b[hl-4:]) {
		return bad("checksum mismatch")
	}
	h := header{
		Len:     n,
		Created: int64(binary.LittleEndian.Uint64(b[16:])),
		Expires: int64(binary.LittleEndian.Uint64(b[24:])),
		Key:     string(b[fixed : fixed+kl]),
		Sums:    make([]uint32, blocks(n)),
	}
	if fixed == fixedHeader {
		h.Upload = binary.LittleEndian.Uint64(b[fixedHeaderV1:])
	}
	for i := range h.Sums {
		h.Sums[i] = binary.LittleEndian.Uint32(b[fixed+kl+4*i:])
	}
	return h, hl, nil
}
