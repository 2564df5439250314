package chunk

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/sluice-fs/sluice/internal/errs"
)

// fileStamp identifies one state of a chunk's two files: it changes when
// either file is written, truncated or replaced (modification times are
// only as fine as the kernel's clock tick, so the sizes and inode numbers
// are part of it).
type fileStamp struct {
	dataIno, sumIno     uint64
	dataSize, sumSize   int64
	dataMtime, sumMtime int64
}

// verifiedCache remembers the chunks whose every block OpenData checked,
// by the state of their files at that moment.
type verifiedCache struct {
	mu sync.Mutex
	m  map[ID]fileStamp
}

// forget drops a removed chunk's stamp: its files may be recycled for
// another chunk (recycle.go), whose stamp must not match by chance.
func (v *verifiedCache) forget(id ID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, id)
}

// maxVerified bounds verifiedCache; when full it is cleared, which only
// costs a re-verification.
const maxVerified = 1 << 16

func stampOf(data, sum *os.File) (fileStamp, error) {
	var d, s syscall.Stat_t
	if err := syscall.Fstat(int(data.Fd()), &d); err != nil {
		return fileStamp{}, err
	}
	if err := syscall.Fstat(int(sum.Fd()), &s); err != nil {
		return fileStamp{}, err
	}
	return fileStamp{
		dataIno: d.Ino, sumIno: s.Ino,
		dataSize: d.Size, sumSize: s.Size,
		dataMtime: d.Mtim.Nano(), sumMtime: s.Mtim.Nano(),
	}, nil
}

// OpenData opens chunk id's data file read-only for a reader that reads
// it directly (FUSE passthrough), bypassing ReadAt and its checksums. It
// succeeds only when the file's bytes are exactly the chunk's content:
// every block holds stored data (no hole and no zero-flagged block, whose
// bytes in the data file may be stale), every block but the last is full,
// and the data file ends where the chunk ends. Every block is first
// verified against its checksum, unless OpenData verified the chunk before
// and neither of its files has changed since.
//
// It returns the file and the chunk's length. A missing chunk gives an
// errs.NotFound error, one that does not qualify errs.NotSupported, a
// checksum mismatch errs.Corruption. Writes made to the chunk after
// OpenData returns are visible through the file, unchecked.
// OpenShared is OpenData for another process (a separate mount's FUSE
// passthrough, over the direct-read socket: ADR 0025): the data file is
// marked on disk so that it is never recycled, even by a later run of the
// store that knows nothing of the descriptor (recycle.go).
func (s *Store) OpenShared(id ID) (*os.File, int64, error) {
	if !s.free.marked.Load() {
		if err := s.markShared(); err != nil {
			return nil, 0, err
		}
	}
	f, n, err := s.OpenData(id)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err == nil && fi.Mode()&os.ModeSticky == 0 {
		err = f.Chmod(fi.Mode().Perm() | os.ModeSticky)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("chunk: mark chunk %v on target %d as shared: %w", id, s.opts.Target, ioErr(err))
	}
	return f, n, nil
}

// markShared records, durably, that the store hands data files to other
// processes (sharedMark), before the first one is marked.
func (s *Store) markShared() error {
	p := filepath.Join(s.dir, sharedMark)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("chunk: store %s: %w", s.dir, ioErr(err))
	}
	s.free.marked.Store(true)
	return nil
}

func (s *Store) OpenData(id ID) (*os.File, int64, error) {
	// Opened cold, the data's read starts with the open (as for ReadAt):
	// the check below reads it all.
	h, err := s.lockChunkFor(id, false, false, &span{0, maxBatch * BlockSize})
	if err != nil {
		return nil, 0, err
	}
	defer s.unlock(h, false)
	notPlain := func(why string) error {
		return errs.New(errs.NotSupported, "chunk: chunk %v on target %d cannot be read directly: %s", id, s.opts.Target, why)
	}
	if h.length == 0 {
		return nil, 0, notPlain("it is empty")
	}
	st, err := stampOf(h.data, h.sum)
	if err != nil {
		return nil, 0, fmt.Errorf("chunk: stat chunk %v on target %d: %w", id, s.opts.Target, ioErr(err))
	}
	if st.dataSize != h.length {
		return nil, 0, notPlain(fmt.Sprintf("its data file has %d bytes for a length of %d", st.dataSize, h.length))
	}
	// The shape is checked at every open, also of a chunk verified before:
	// a file stamp is only as fine as the clock tick, and a stale stamp may
	// cost a skipped re-verification of correctly written bytes, never a
	// reader handed bytes that are not the chunk's.
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	nblk := (h.length + BlockSize - 1) / BlockSize
	for b0 := int64(0); b0 < nblk; b0 += maxBatch {
		ents := sc.old[:min(maxBatch, nblk-b0)]
		if err := s.readEntries(h, b0, sc.oldRaw[:], ents); err != nil {
			return nil, 0, err
		}
		for i, e := range ents {
			blk := b0 + int64(i)
			if !e.hasData() {
				return nil, 0, notPlain(fmt.Sprintf("block %d is a hole", blk))
			}
			if blk < nblk-1 && e.cur.n != BlockSize {
				return nil, 0, notPlain(fmt.Sprintf("block %d is partial", blk))
			}
		}
	}

	s.verified.mu.Lock()
	known := s.verified.m[id] == st
	s.verified.mu.Unlock()
	if !known {
		var buf []byte
		if n := min(h.length, maxBatch*BlockSize); n <= verifyPooled {
			bp := verifyBufs.Get().(*[]byte)
			defer verifyBufs.Put(bp)
			buf = (*bp)[:n]
		} else {
			buf = make([]byte, n)
		}
		for off := int64(0); off < h.length; off += int64(len(buf)) {
			if err := s.readLocked(h, sc, off, buf[:min(int64(len(buf)), h.length-off)]); err != nil {
				return nil, 0, err
			}
		}
		s.verified.mu.Lock()
		if s.verified.m == nil || len(s.verified.m) >= maxVerified {
			s.verified.m = make(map[ID]fileStamp)
		}
		s.verified.m[id] = st
		s.verified.mu.Unlock()
	}

	// A descriptor of its own: the store closes its handles when it
	// evicts them, the direct reader keeps this one as long as it needs.
	dataPath, _ := s.Paths(id)
	// Its files are never recycled now (recycle.go): the reader keeps the
	// bytes it opened, as from an unlinked file.
	s.free.opened(id)
	f, err := openNoAtime(dataPath, os.O_RDONLY)
	if err != nil {
		return nil, 0, fmt.Errorf("chunk: open chunk %v on target %d: %w", id, s.opts.Target, ioErr(err))
	}
	return f, h.length, nil
}

// verifyPooled is the largest chunk whose check at OpenData reads into a
// pooled buffer (verifyBufs) rather than a new one.
const verifyPooled = 16 * BlockSize

var verifyBufs = sync.Pool{New: func() any { b := make([]byte, verifyPooled); return &b }}
