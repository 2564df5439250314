package kv

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-fs/sluice/internal/errs"
)

// The commit log is the pebble engine's write-ahead log (docs/format.md,
// "Metadata engine files"). It lives in the subdirectory commitLogDir of
// the pebble directory as numbered segments:
//
//	segment: "SLKVLOG\x00" | u32 version (1) | records...
//	record:  u32 CRC32C of (length field | payload) | u32 length | payload
//
// A payload is one committed batch (pebble's batch representation). A
// segment that another follows was synced before the next was created, so
// only the last one can end in a torn or lost record; reading stops there.
// An invalid record in an earlier segment is corruption.
const (
	commitLogDir      = "commitlog"
	commitLogMagic    = "SLKVLOG\x00"
	commitLogVersion  = 1
	segmentHeaderSize = len(commitLogMagic) + 4
	recordHeaderSize  = 8
	maxRecordSize     = 1 << 30
	segmentSuffix     = ".kvlog"

	defaultLogSegmentSize = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// commitLog appends records to the newest segment and syncs it. One
// goroutine at a time (whichever processes a commit group: see committer)
// calls append and rotate; sync may be called by any goroutine at any time.
//
// Lock order: mu, then errMu.
type commitLog struct {
	fs          vfs.FS
	dir         string
	segmentSize int64

	// The committer's own: the record buffer and the size of the segment
	// being written.
	buf  []byte
	size int64
	// reserved is the end of the space allocated ahead of size (reserve).
	reserved int64

	// written counts the bytes appended over all segments.
	written atomic.Int64

	mu struct {
		sync.Mutex // held across a sync, so that rotate cannot close the file under it
		cur        vfs.File
		num        uint64 // cur's segment number
		synced     int64  // written when the last sync started
	}

	errMu sync.Mutex
	err   error // the first failed write or sync; fails everything after
}

// openCommitLog prepares the log in dir, creating it (durably) if needed.
// It writes nothing until start.
func openCommitLog(fs vfs.FS, dir string, segmentSize int64) (*commitLog, error) {
	if segmentSize <= 0 {
		segmentSize = defaultLogSegmentSize
	}
	l := &commitLog{fs: fs, dir: dir, segmentSize: segmentSize}
	if _, err := fs.Stat(dir); err == nil {
		return l, nil
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create commit log dir %s: %w", dir, err)
	}
	if err := syncDir(fs, fs.PathDir(dir)); err != nil {
		return nil, err
	}
	return l, nil
}

func segmentName(num uint64) string { return fmt.Sprintf("%016x%s", num, segmentSuffix) }

// segments lists the segment numbers in dir, ascending.
func (l *commitLog) segments() ([]uint64, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, fmt.Errorf("list commit log %s: %w", l.dir, err)
	}
	var nums []uint64
	for _, n := range names {
		hex, ok := strings.CutSuffix(n, segmentSuffix)
		if !ok {
			continue
		}
		num, err := strconv.ParseUint(hex, 16, 64)
		if err != nil || len(hex) != 16 {
			continue
		}
		nums = append(nums, num)
	}
	slices.Sort(nums)
	return nums, nil
}

// replay calls apply with the payload of every record, oldest first, and
// returns the number of the newest segment (0 if none). Each segment is
// synced before it is read, so that whatever apply makes durable (pebble's
// flush after the replay) never holds a record the log could still lose.
// apply owns the payload.
func (l *commitLog) replay(apply func(payload []byte) error) (last uint64, err error) {
	nums, err := l.segments()
	if err != nil {
		return 0, err
	}
	for i, num := range nums {
		if err := l.replaySegment(num, i == len(nums)-1, apply); err != nil {
			return 0, err
		}
	}
	if len(nums) > 0 {
		last = nums[len(nums)-1]
	}
	return last, nil
}

func (l *commitLog) replaySegment(num uint64, isLast bool, apply func([]byte) error) (err error) {
	name := l.fs.PathJoin(l.dir, segmentName(num))
	f, err := l.fs.Open(name)
	if err != nil {
		return fmt.Errorf("open commit log segment %s: %w", name, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync commit log segment %s: %w", name, err)
	}
	r := bufio.NewReaderSize(f, 256<<10)
	torn := func(off int64, why string) error {
		if isLast {
			return nil // the end of what was written, or a crash's torn tail
		}
		return errs.New(errs.Corruption, "kv: commit log segment %s: %s at offset %d, and later segments follow", name, why, off)
	}
	var hdr [segmentHeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return torn(0, "no header")
		}
		return fmt.Errorf("read commit log segment %s: %w", name, err)
	}
	if string(hdr[:len(commitLogMagic)]) != commitLogMagic {
		return torn(0, "bad magic")
	}
	if v := binary.LittleEndian.Uint32(hdr[len(commitLogMagic):]); v != commitLogVersion {
		return errs.New(errs.Corruption, "kv: commit log segment %s has version %d, this build reads %d", name, v, commitLogVersion)
	}
	off := int64(segmentHeaderSize)
	for {
		var rh [recordHeaderSize]byte
		if _, err := io.ReadFull(r, rh[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return torn(off, "short record header")
			}
			return fmt.Errorf("read commit log segment %s: %w", name, err)
		}
		sum := binary.LittleEndian.Uint32(rh[0:4])
		n := binary.LittleEndian.Uint32(rh[4:8])
		if n == 0 || n > maxRecordSize {
			return torn(off, fmt.Sprintf("record length %d", n))
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return torn(off, "short record")
			}
			return fmt.Errorf("read commit log segment %s: %w", name, err)
		}
		if crc32.Update(crc32.Checksum(rh[4:8], castagnoli), castagnoli, payload) != sum {
			return torn(off, "checksum mismatch")
		}
		if err := apply(payload); err != nil {
			return fmt.Errorf("replay commit log segment %s at offset %d: %w", name, off, err)
		}
		off += recordHeaderSize + int64(n)
	}
}

// start creates segment num and makes it the one appended to.
func (l *commitLog) start(num uint64) error {
	f, err := l.create(num)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.mu.cur, l.mu.num = f, num
	l.mu.Unlock()
	l.size = int64(segmentHeaderSize)
	l.reserved = 0
	l.reserve()
	return nil
}

// create makes segment num with its header, durably named in the
// directory.
func (l *commitLog) create(num uint64) (vfs.File, error) {
	name := l.fs.PathJoin(l.dir, segmentName(num))
	f, err := l.fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("create commit log segment %s: %w", name, err)
	}
	hdr := make([]byte, segmentHeaderSize)
	copy(hdr, commitLogMagic)
	binary.LittleEndian.PutUint32(hdr[len(commitLogMagic):], commitLogVersion)
	if _, err := f.Write(hdr); err != nil {
		f.Close()
		// No record can be in it: remove it, so that the log stays a
		// list of segments with whole headers.
		l.fs.Remove(name)
		return nil, fmt.Errorf("write commit log segment %s: %w", name, err)
	}
	if err := l.syncDir(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (l *commitLog) syncDir() error { return syncDir(l.fs, l.dir) }

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// failed returns the error that failed the log, if any.
func (l *commitLog) failed() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.err
}

// fail makes err the log's failure (the first one wins) and returns it.
func (l *commitLog) fail(err error) error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if l.err == nil {
		l.err = fmt.Errorf("kv: commit log failed, reopen the store: %w", err)
	}
	return l.err
}

// append writes one record with one write(2): when it returns nil the
// record is in the operating system and survives a crash of the process.
// Only the committer calls it.
func (l *commitLog) append(payload []byte) error {
	if err := l.failed(); err != nil {
		return err
	}
	if len(payload) == 0 || len(payload) > maxRecordSize {
		return fmt.Errorf("kv: commit log record of %d bytes: %w", len(payload), errs.ErrInvalid)
	}
	n := recordHeaderSize + len(payload)
	if cap(l.buf) < n {
		l.buf = make([]byte, n, max(n, 64<<10))
	}
	b := l.buf[:n]
	binary.LittleEndian.PutUint32(b[4:8], uint32(len(payload)))
	copy(b[recordHeaderSize:], payload)
	binary.LittleEndian.PutUint32(b[0:4], crc32.Update(crc32.Checksum(b[4:8], castagnoli), castagnoli, payload))
	// cur changes only in rotate, called by the same processor of groups.
	if _, err := l.mu.cur.Write(b); err != nil {
		// A part of the record may be in the file: nothing may follow it,
		// unless it is cut off again. A full disk then fails this commit
		// only, and the log goes on when space is freed.
		if l.rollback() {
			return fmt.Errorf("kv: commit log: write: %w", err)
		}
		return l.fail(fmt.Errorf("write: %w", err))
	}
	if cap(l.buf) > 1<<20 {
		l.buf = nil // do not keep a huge batch's buffer
	}
	l.size += int64(n)
	l.written.Add(int64(n))
	l.reserve()
	return nil
}

// logReserve is how much disk space the log keeps allocated ahead of its
// end (fallocate, keeping the file's size): when the storage targets fill
// the disk the metadata can still commit that much, enough for the
// removals that free space again.
const logReserve = 4 << 20

// reserve extends the space allocated ahead of the log's end when less
// than half of logReserve is left. A failure (a full disk, a file system
// without fallocate) is not an error: the reserve is best effort.
func (l *commitLog) reserve() {
	if l.size+logReserve/2 <= l.reserved {
		return
	}
	if err := l.mu.cur.Preallocate(l.size, logReserve); err == nil {
		l.reserved = l.size + logReserve
	}
}

// rollback cuts the current segment back to its last whole record after a
// failed write, and reports whether it could.
func (l *commitLog) rollback() bool {
	fd := l.mu.cur.Fd()
	if fd == vfs.InvalidFd {
		return false
	}
	// The file offset moved past what the failed write wrote: set it
	// back too, or the next record would follow a hole.
	if syscall.Ftruncate(int(fd), l.size) != nil {
		return false
	}
	off, err := syscall.Seek(int(fd), l.size, io.SeekStart)
	return err == nil && off == l.size
}

// due reports whether the segment is full, so that rotate should run.
func (l *commitLog) due() bool { return l.size >= l.segmentSize }

// sync makes every record appended before the call durable.
func (l *commitLog) sync() error {
	if err := l.failed(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.written.Load()
	if w == l.mu.synced || l.mu.cur == nil {
		return nil
	}
	if err := l.mu.cur.SyncData(); err != nil {
		return l.fail(fmt.Errorf("sync: %w", err))
	}
	l.mu.synced = w
	return nil
}

// rotate syncs and closes the current segment and starts the next one. It
// returns the new segment's number: every older segment may be removed
// once pebble has flushed the commits applied so far. Only the committer
// calls it.
func (l *commitLog) rotate() (next uint64, err error) {
	if err := l.failed(); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.written.Load()
	if w != l.mu.synced {
		if err := l.mu.cur.SyncData(); err != nil {
			return 0, l.fail(fmt.Errorf("sync: %w", err))
		}
		l.mu.synced = w
	}
	next = l.mu.num + 1
	f, err := l.create(next)
	if err != nil {
		// The current segment goes on (a full disk: appends use its
		// reserve); a later rotation tries again.
		return 0, err
	}
	old := l.mu.cur
	l.mu.cur, l.mu.num = f, next
	l.size = int64(segmentHeaderSize)
	l.reserved = 0
	l.reserve()
	if err := old.Close(); err != nil {
		return 0, l.fail(fmt.Errorf("close segment: %w", err))
	}
	return next, nil
}

// removeBefore deletes the segments numbered below num.
func (l *commitLog) removeBefore(num uint64) error {
	nums, err := l.segments()
	if err != nil {
		return err
	}
	var failed []error
	for _, n := range nums {
		if n >= num {
			break
		}
		name := l.fs.PathJoin(l.dir, segmentName(n))
		if err := l.fs.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			failed = append(failed, fmt.Errorf("remove commit log segment %s: %w", name, err))
		}
	}
	return errors.Join(failed...)
}

// close syncs and closes the current segment; later appends fail.
func (l *commitLog) close() error {
	err := l.sync()
	l.mu.Lock()
	f := l.mu.cur
	l.mu.cur = nil
	l.mu.Unlock()
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	l.fail(ErrClosed)
	return err
}
