package tier

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"path"
	"strconv"
	"strings"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// ImportedGen is the generation of the HSM record of an imported object
// (one Sluice did not write): Sluice never deletes or writes over it.
const ImportedGen = 0

// BlockSize is the unit of the block checksums in an HSM record, and so of
// the ranged GETs of a read of a released file: each block read is checked
// on its own.
const BlockSize = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The object's user metadata (x-amz-meta-*), docs/format.md.
const (
	MetaGen    = "sluice-gen"    // 16 hex digits: the archive's generation
	MetaIno    = "sluice-ino"    // decimal inode number
	MetaSize   = "sluice-size"   // decimal size in bytes
	MetaMtime  = "sluice-mtime"  // decimal ns since the epoch
	MetaSHA256 = "sluice-sha256" // 64 hex digits
	MetaCRC32C = "sluice-crc32c" // 8 hex digits, Castagnoli
)

// ObjectKey is the key (below the backend's prefix) of the object of the
// file at p, an absolute Sluice path. When that key holds another file's
// object (taken), the inode number is appended, so that no archive ever
// writes over the only copy of another file.
func ObjectKey(p string, ino uint64, taken bool) string {
	k := strings.TrimPrefix(path.Clean("/"+p), "/")
	if taken {
		k += fmt.Sprintf(".sluice-%d", ino)
	}
	return k
}

// ObjectMeta is the user metadata written with the object of rec.
func ObjectMeta(rec *wire.HsmRecord, ino uint64) map[string]string {
	return map[string]string{
		MetaGen:    fmt.Sprintf("%016x", rec.Gen),
		MetaIno:    strconv.FormatUint(ino, 10),
		MetaSize:   strconv.FormatUint(rec.Size, 10),
		MetaMtime:  strconv.FormatInt(rec.Mtime, 10),
		MetaSHA256: hex.EncodeToString(rec.SHA256),
		MetaCRC32C: fmt.Sprintf("%08x", rec.CRC32C),
	}
}

// MetaInode returns the inode number an object's metadata names (0 when
// it names none: not written by Sluice).
func MetaInode(meta map[string]string) uint64 {
	n, _ := strconv.ParseUint(meta[MetaIno], 10, 64)
	return n
}

// CheckObject says whether an object's metadata is that of the archive
// rec describes: an object written over it (another generation) must not
// be served as the file's bytes. A record of generation 0 names an object
// that Sluice did not write (`sluice tier import`): its metadata carries
// nothing to check, and its bytes are checked block by block against the
// CRCs taken at import or at its first restore (CheckBlock), or, before
// that, read pinned to the object's ETag; a replaced object fails either.
func CheckObject(rec *wire.HsmRecord, meta map[string]string) error {
	if rec.Gen == ImportedGen {
		return nil
	}
	want := fmt.Sprintf("%016x", rec.Gen)
	if got := meta[MetaGen]; got != want {
		return errs.New(errs.Corruption, "tier: object %s of backend %q is generation %q, the file's copy is %s: it was replaced outside Sluice", rec.Key, rec.Backend, got, want)
	}
	if got := meta[MetaSHA256]; got != hex.EncodeToString(rec.SHA256) {
		return errs.New(errs.Corruption, "tier: object %s of backend %q has SHA-256 %q, the file's copy %x", rec.Key, rec.Backend, got, rec.SHA256)
	}
	return nil
}

// CheckCopy says whether the object that a Head of rec's key found (info,
// meta) is still the copy rec describes, before a release leaves it as the
// file's only bytes: the same size and, for an archive, the same
// generation and SHA-256 (CheckObject); for an object imported from a
// listing, the same ETag (one imported without an ETag: the size alone).
// An object replaced outside Sluice fails with errs.Corruption.
func CheckCopy(rec *wire.HsmRecord, info ObjectInfo, meta map[string]string) error {
	switch {
	case info.Size != int64(rec.Size):
		return errs.New(errs.Corruption, "tier: object %s of backend %q has %d bytes, the file's copy %d: it was replaced outside Sluice", rec.Key, rec.Backend, info.Size, rec.Size)
	case rec.Gen != ImportedGen:
		return CheckObject(rec, meta)
	case rec.ETag != "" && info.ETag != rec.ETag:
		return errs.New(errs.Corruption, "tier: object %s of backend %q has ETag %q, the file's copy %q: it was replaced outside Sluice", rec.Key, rec.Backend, info.ETag, rec.ETag)
	}
	return nil
}

// CheckBlock checks the bytes of block i of rec's object (the whole block:
// BlockSize bytes, or what is left of the file for the last).
func CheckBlock(rec *wire.HsmRecord, i int, data []byte) error {
	if i < 0 || i >= len(rec.BlockCRCs) {
		return errs.New(errs.Internal, "tier: block %d of an object of %d blocks", i, len(rec.BlockCRCs))
	}
	if want := BlockLen(rec, i); int64(len(data)) != want {
		return errs.New(errs.Internal, "tier: block %d has %d bytes, want %d", i, len(data), want)
	}
	if got := crc32.Checksum(data, castagnoli); got != rec.BlockCRCs[i] {
		return errs.New(errs.Corruption, "tier: object %s of backend %q: block %d (bytes %d-%d) has CRC32C %08x, want %08x",
			rec.Key, rec.Backend, i, int64(i)*int64(rec.BlockSize), int64(i)*int64(rec.BlockSize)+int64(len(data)), got, rec.BlockCRCs[i])
	}
	return nil
}

// Blocks is the number of blocks of rec's object.
func Blocks(rec *wire.HsmRecord) int64 {
	if rec.BlockSize == 0 {
		return 0
	}
	return (int64(rec.Size) + int64(rec.BlockSize) - 1) / int64(rec.BlockSize)
}

// BlockSums sets sums[i] to the CRC32C of each whole block i of rec's
// object in data, the object's bytes at off (a multiple of the block
// size).
func BlockSums(rec *wire.HsmRecord, off int64, data []byte, sums []uint32) {
	bs := int64(rec.BlockSize)
	for i := off / bs; i < int64(len(sums)); i++ {
		lo := i*bs - off
		hi := lo + BlockLen(rec, int(i))
		if lo >= int64(len(data)) || hi > int64(len(data)) {
			return
		}
		sums[i] = crc32.Checksum(data[lo:hi], castagnoli)
	}
}

// BlockLen is the length of block i of rec's object.
func BlockLen(rec *wire.HsmRecord, i int) int64 {
	start := int64(i) * int64(rec.BlockSize)
	return min(int64(rec.BlockSize), int64(rec.Size)-start)
}

// Summer computes the checksums of an archive as its bytes stream past:
// CRC32C and SHA-256 of the whole content and CRC32C of each block.
type Summer struct {
	blockSize uint32
	whole     uint32
	sha       hash.Hash
	blocks    []uint32
	cur       uint32 // CRC32C of the block being filled
	curLen    uint32
	n         uint64
}

// NewSummer returns a Summer for blocks of blockSize bytes.
func NewSummer(blockSize uint32) *Summer {
	return &Summer{blockSize: blockSize, sha: sha256.New()}
}

// Write adds p (never fails).
func (s *Summer) Write(p []byte) (int, error) {
	n := len(p)
	s.whole = crc32.Update(s.whole, castagnoli, p)
	s.sha.Write(p)
	s.n += uint64(n)
	for len(p) > 0 {
		k := min(uint32(len(p)), s.blockSize-s.curLen)
		s.cur = crc32.Update(s.cur, castagnoli, p[:k])
		s.curLen += k
		p = p[k:]
		if s.curLen == s.blockSize {
			s.blocks = append(s.blocks, s.cur)
			s.cur, s.curLen = 0, 0
		}
	}
	return n, nil
}

// Fill sets the checksum fields of rec (and its Size, BlockSize).
func (s *Summer) Fill(rec *wire.HsmRecord) {
	rec.Size = s.n
	rec.BlockSize = s.blockSize
	rec.CRC32C = s.whole
	rec.SHA256 = s.sha.Sum(nil)
	rec.BlockCRCs = append([]uint32(nil), s.blocks...)
	if s.curLen > 0 {
		rec.BlockCRCs = append(rec.BlockCRCs, s.cur)
	}
}

// SameImport says whether an imported file's record cur and fresh, a
// record made of the listing as it is now, name the same version of the
// object: by ETag where both have one, else by size and mtime (the
// metadata service's refresh and the client's check before asking it
// both decide by it).
func SameImport(cur, fresh wire.HsmRecord) bool {
	if cur.Size != fresh.Size {
		return false
	}
	if cur.ETag != "" && fresh.ETag != "" {
		return cur.ETag == fresh.ETag
	}
	return cur.Mtime == fresh.Mtime
}
