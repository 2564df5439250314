package chunk

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/internal/pagecache"
)

// FileRange is a range of a chunk's bytes as they lie in its data file,
// for a sender that passes them on without reading them (sendfile(2)).
type FileRange struct {
	// F is a duplicate of the data file's descriptor: the caller closes it.
	F *os.File
	// Off and N are the range in F (a chunk's offsets are its data file's).
	Off int64
	N   int
	// Sums are the CRC32C each block of the range was stored with, in
	// order: the pieces' sums of checksum.Pieces(Off, N), since the range
	// covers whole blocks.
	Sums []uint32
	// ChunkLen is the chunk's length when the range was taken.
	ChunkLen int64
}

// ReadFileRange returns the bytes of chunk id from off, at most n of them,
// as a range of its data file together with the CRC32C each of their
// blocks was stored with, without reading or verifying them, when it can:
// off is on a block boundary, every block of the range has its bytes in the
// data file, the range covers exactly the bytes each block's entry vouches
// for (whole blocks, and the chunk's last block up to its length), and the
// page cache holds every one of them (cachestat(2); a sender of a cold
// range would wait for the disk where a read in the request's handler
// waits in parallel with others). Otherwise, and for a missing chunk or any
// error, ok is false: read with ReadAtSums, which reports errors.
//
// The bytes are not verified here, and a write may change them before they
// are sent: whoever receives them must check them against Sums and, on a
// mismatch, read again with ReadAtSums, whose verification tells damage
// at rest (errs.Corruption) from a garbled transfer or a write in between.
func (s *Store) ReadFileRange(id ID, off int64, n int) (r FileRange, ok bool) {
	if off%BlockSize != 0 || n <= 0 || s.checkRange("read", id, off, 0) != nil {
		return r, false
	}
	h, err := s.lockChunkFor(id, false, false, &span{off, int64(n)})
	if err != nil {
		return r, false
	}
	defer s.unlock(h, false)
	if off >= h.length {
		return r, false
	}
	n = int(min(int64(n), h.length-off))
	end := off + int64(n)
	b0, b1 := off/BlockSize, (end-1)/BlockSize
	if b1-b0+1 > maxBatch {
		return r, false
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	ents := sc.old[:b1-b0+1]
	if s.readEntries(h, b0, sc.oldRaw[:], ents) != nil {
		return r, false
	}
	sums := make([]uint32, len(ents))
	for i, e := range ents {
		bs := (b0 + int64(i)) * BlockSize
		if !e.hasData() || bs+int64(e.cur.n) != min(end, bs+BlockSize) {
			return r, false
		}
		sums[i] = e.cur.crc
	}
	fd := h.data.Fd()
	if !pagecache.Cached(fd, off, int64(n)) {
		return r, false
	}
	dup, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return r, false
	}
	return FileRange{F: os.NewFile(uintptr(dup), h.data.Name()), Off: off, N: n, Sums: sums, ChunkLen: h.length}, true
}
