package chunk

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Direct reads (docs/adr/0025-direct-reads.md): a client on the machine
// that holds a chunk reads its two files itself, with descriptors the
// store hands out (OpenDirect), instead of asking the target to read and
// send the bytes. The store's format is the contract between the two; the
// reader verifies every block it returns against the block's current
// checksum entry, read with it, and gives up (ErrDirectUnverified) where
// the store itself would have to decide: a write in progress (entries and
// data disagree until it ends), the state a crash left (a block that only
// its previous entry vouches for), a malformed entry. The caller then reads
// through the target, which waits for the write or reports the
// corruption.

// ErrDirectUnverified says that a direct read found a block it cannot
// verify on its own: read it through the store.
var ErrDirectUnverified = errors.New("chunk: a block read directly does not match its checksum entry")

// ErrDirectGone says that the chunk read directly was removed since its
// files were opened: read through the store.
var ErrDirectGone = errors.New("chunk: the chunk read directly was removed")

// OpenDirect opens chunk id's data and checksum files read-only for a
// direct reader (DirectReader) and returns them. From now on the store
// unlinks the chunk's files when it removes the chunk, never recycles them
// (recycle.go), so the descriptors never show another chunk's bytes. A
// missing chunk gives an errs.NotFound error.
func (s *Store) OpenDirect(id ID) (data, sum *os.File, err error) {
	h, err := s.lockChunk(id, false, false)
	if err == errNoChunk {
		return nil, nil, errs.New(errs.NotFound, "chunk: no chunk %v on target %d", id, s.opts.Target)
	}
	if err != nil {
		return nil, nil, err
	}
	// Held shared: a removal, which needs the chunk exclusively, cannot
	// move the files between the paths below and the opens.
	defer s.unlock(h, false)
	s.free.opened(id)
	dataPath, sumPath := s.Paths(id)
	if data, err = openNoAtime(dataPath, os.O_RDONLY); err != nil {
		return nil, nil, fmt.Errorf("chunk: open chunk %v on target %d: %w", id, s.opts.Target, ioErr(err))
	}
	if sum, err = openNoAtime(sumPath, os.O_RDONLY); err != nil {
		data.Close()
		return nil, nil, fmt.Errorf("chunk: open chunk %v on target %d: %w", id, s.opts.Target, ioErr(err))
	}
	return data, sum, nil
}

// DirectReader reads a chunk from its two files (OpenDirect) in another
// process than the store's. It is safe for concurrent use.
type DirectReader struct {
	data, sum *os.File
}

// NewDirectReader reads the chunk whose data and checksum files are given;
// it owns them from now on.
func NewDirectReader(data, sum *os.File) *DirectReader {
	return &DirectReader{data: data, sum: sum}
}

// Close closes the chunk's files.
func (d *DirectReader) Close() error {
	return errors.Join(d.data.Close(), d.sum.Close())
}

// ReadAt reads the chunk at off into p, as Store.ReadAt does: it returns
// the bytes read, fewer than len(p) only where the chunk ends, and the
// chunk's length; holes read as zeros. Every block it returns matched its
// current checksum entry. ErrDirectGone: the chunk was removed;
// ErrDirectUnverified: a block could not be verified here. After an error
// p holds garbage.
func (d *DirectReader) ReadAt(p []byte, off int64) (n int, chunkLen int64, err error) {
	if off < 0 || off > MaxChunkSize {
		return 0, 0, errs.New(errs.Invalid, "chunk: direct read at offset %d", off)
	}
	// os.File.Stat, not fstat of Fd(): the client may close the reader
	// while this read runs (a bound on the chunks it holds open), and a
	// bare descriptor number could by then name another file.
	fi, err := d.sum.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("chunk: direct read: %w", ioErr(err))
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Nlink == 0 {
		return 0, 0, ErrDirectGone
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	if chunkLen, err = d.length(st.Size, sc); err != nil {
		return 0, 0, err
	}
	if off >= chunkLen || len(p) == 0 {
		return 0, chunkLen, nil
	}
	n = int(min(int64(len(p)), chunkLen-off))
	for done := 0; done < n; {
		o := off + int64(done)
		step := min(n-done, int(maxBatch*BlockSize-o%BlockSize))
		if err := d.read(sc, o, p[done:done+step]); err != nil {
			return 0, chunkLen, err
		}
		done += step
	}
	return n, chunkLen, nil
}

// length is the chunk's length from a checksum file of size bytes: the end
// of its last present entry.
func (d *DirectReader) length(size int64, sc *scratch) (int64, error) {
	b := sc.oldRaw[:entrySize]
	for n := size / entrySize; n > 0; n-- {
		blk := n - 1
		if err := readFull(d.sum, b, blk*entrySize); err != nil {
			return 0, fmt.Errorf("chunk: direct read of checksums: %w", ioErr(err))
		}
		e, err := parseEntry(b, uint32(blk))
		if err != nil {
			return 0, ErrDirectUnverified
		}
		if e.present() {
			return blk*BlockSize + int64(e.cur.n), nil
		}
	}
	return 0, nil
}

// read reads p at off, spanning at most maxBatch blocks (readLocked
// without the store: no fallback to a block's previous state).
func (d *DirectReader) read(sc *scratch, off int64, p []byte) error {
	end := off + int64(len(p))
	b0, b1 := off/BlockSize, (end-1)/BlockSize
	raw := sc.oldRaw[:(b1-b0+1)*entrySize]
	if err := readFull(d.sum, raw, b0*entrySize); err != nil {
		return fmt.Errorf("chunk: direct read of checksums: %w", ioErr(err))
	}
	ents := sc.old[:b1-b0+1]
	for i := range ents {
		e, err := parseEntry(raw[i*entrySize:], uint32(b0+int64(i)))
		if err != nil {
			return ErrDirectUnverified
		}
		ents[i] = e
	}
	read := func(b []byte, at int64) error {
		if err := readFull(d.data, b, at); err != nil {
			return fmt.Errorf("chunk: direct read: %w", ioErr(err))
		}
		return nil
	}
	// No fallback to a block's previous state: only the store may judge
	// what a crash left.
	return fillBlocks(read, sc, off, p, ents, nil, func(int64, entry, []byte, int64) (int64, error) {
		return 0, ErrDirectUnverified
	})
}
