// Package checksum defines the checksums that the chunk store keeps and
// that clients compare copies by: the CRC32C of a block (CRC-32 with the
// Castagnoli polynomial, as hash/crc32 computes it) and the content digest
// of a chunk, an FNV-1a hash over its blocks' CRC32Cs and sizes. The chunk
// store (internal/chunk) reports a chunk's digest from the checksums it
// keeps, without reading the bytes; a client that read or wrote the bytes
// computes the same digest from them (client/migrate.go).
package checksum

import (
	"encoding/binary"
	"hash"
	"hash/crc32"
	"hash/fnv"
)

// BlockSize is the unit of the chunk store's checksums: a chunk's bytes
// are checked 64 KiB block by block.
const BlockSize = 64 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BlockCRC returns the CRC32C of a block's logical bytes (holes read as
// zeros).
func BlockCRC(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Pieces returns how many pieces the range of n bytes at off of a chunk
// has, split at every multiple of BlockSize: a chunk read's reply carries
// the CRC32C of each (chunk.Store.ReadAtSums, wire.ChunkReadResp).
func Pieces(off int64, n int) int {
	if n <= 0 {
		return 0
	}
	return int((off+int64(n)-1)/BlockSize - off/BlockSize + 1)
}

// DataCRC is the CRC32C of the bytes of pieces, in order: the check that a
// chunk write's or read's data carries on the wire, end to end
// (wire.ChunkWriteReq, wire.ChunkReadResp).
func DataCRC(pieces ...[]byte) uint32 {
	var c uint32
	for _, p := range pieces {
		c = crc32.Update(c, castagnoli, p)
	}
	return c
}

// Digester computes a chunk's content digest: give it each block's CRC32C
// and size (the chunk's block size, less for its last), in order, up to
// the chunk's length. Two chunks with the same length and digest read the
// same, however their bytes are laid out on disk.
type Digester struct {
	h   hash.Hash64
	rec [8]byte
}

// NewDigester returns a Digester with nothing given yet.
func NewDigester() *Digester { return &Digester{h: fnv.New64a()} }

// Block adds the next block: its CRC32C and its size.
func (d *Digester) Block(crc uint32, size int64) {
	binary.LittleEndian.PutUint32(d.rec[:], crc)
	binary.LittleEndian.PutUint32(d.rec[4:], uint32(size))
	d.h.Write(d.rec[:])
}

// Sum64 returns the digest of the blocks given.
func (d *Digester) Sum64() uint64 { return d.h.Sum64() }
