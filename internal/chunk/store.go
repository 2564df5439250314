package chunk

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
)

// ID names a chunk: slot Slot of inode Ino (see package placement).
type ID struct {
	Ino  uint64
	Slot uint32
}

func (id ID) String() string { return fmt.Sprintf("ino %d slot %d", id.Ino, id.Slot) }

// Options configure a Store.
type Options struct {
	// Target is the ID of the storage target the directory belongs to. It
	// is recorded in the FORMAT file and named in errors and logs.
	Target placement.TargetID
	// Logger receives corruption reports and recovery notes; nil means
	// slog.Default().
	Logger *slog.Logger
	// MaxOpenChunks bounds the cache of open chunk files (two or three
	// descriptors per chunk). 0 means DefaultMaxOpenChunks.
	MaxOpenChunks int
	// Precreate is the number of empty files the store keeps made ahead
	// of need in its pool (recycle.go), by a background goroutine, so
	// that new chunks take files instead of creating them (0: none; at
	// most maxFree).
	Precreate int
	// FenceGrace, if positive, removes the fence of a frozen chunk once
	// the chunk has been gone (removed) for this long, checked by a
	// background goroutine (fenceexpire.go); 0 keeps fences for good.
	// Clients renew the layouts they use within their lease
	// (client.Options.LayoutLease), so the grace must outlast the longest
	// lease plus the longest a chunk request takes.
	FenceGrace time.Duration
}

// DefaultMaxOpenChunks is the default size of the open-chunk cache.
const DefaultMaxOpenChunks = 1024

// Validate checks the options.
func (o *Options) Validate() error {
	if o.MaxOpenChunks < 0 {
		return errs.New(errs.Invalid, "chunk: MaxOpenChunks %d is negative", o.MaxOpenChunks)
	}
	if o.FenceGrace < 0 {
		return errs.New(errs.Invalid, "chunk: FenceGrace %v is negative", o.FenceGrace)
	}
	if o.Precreate < 0 || o.Precreate > maxFree {
		return errs.New(errs.Invalid, "chunk: Precreate %d is not between 0 and %d", o.Precreate, maxFree)
	}
	return nil
}

// Store is the chunk store of one storage target directory. It is safe for
// concurrent use: operations on different chunks run in parallel, reads of
// one chunk share its lock, writes, truncates and removes of one chunk hold
// it exclusively.
type Store struct {
	dir  string
	opts Options
	log  *slog.Logger

	corruptions atomic.Uint64
	precreated  atomic.Uint64 // files precreate made
	chunks      atomic.Int64
	used        atomic.Int64
	verified    verifiedCache // chunks OpenData checked
	fences      fenceSet      // frozen chunks (fence.go)
	free        freePool      // recycled chunk files (recycle.go)
	// precreateStop ends precreate, which closes precreateDone (nil
	// without Options.Precreate).
	precreateStop, precreateDone chan struct{}
	// fenceStop ends expireLoop, which closes fenceDone (nil without
	// Options.FenceGrace).
	fenceStop, fenceDone chan struct{}

	flushes sync.WaitGroup // flushUnsynced runs, for Close

	// hook, if set (tests only), is called at crash points of a write; if
	// it returns true the write stops right there, as if the process died.
	hook func(p hookPoint) bool

	// Lock order: Store.mu, then handle.mu only for a handle that nobody
	// else can see yet. Never Store.mu while holding a handle.mu except
	// through acquire/release, which take Store.mu briefly. fences.op
	// (Freeze, Thaw) comes before handle.mu; fences.mu is a leaf.
	mu struct {
		sync.Mutex
		open    map[ID]*handle
		closing map[ID]chan struct{} // evicted handles being synced and closed
		syncErr map[ID]error         // failed syncs of evicted handles, for the next Sync
		lru     list.List            // of *handle, most recently used first
		closed  bool
		// unsynced remembers the sync state of chunks evicted with writes
		// not yet durable, so that eviction needs no sync (see
		// closeVictims); acquire gives it back to the chunk's next handle.
		unsynced map[ID]*evictedState
		flushing bool // flushUnsynced runs
	}
}

// evictedState is what an evicted handle knew about its writes that are
// not durable yet (the handle fields of the same names).
type evictedState struct {
	dirty     map[uint32]struct{}
	unsynced  bool
	dirUnsync bool
}

// maxUnsyncedEvicted bounds the evicted chunks whose sync state is kept in
// memory: past it, one syncfs(2) makes them all durable (flushUnsynced);
// past twice it, evicted chunks are synced one by one before they are
// closed, as a chunk evicted when the flush cannot keep up.
const maxUnsyncedEvicted = 1 << 16

type hookPoint int

const (
	hookAppendData     hookPoint = iota + 1 // append: data written, entries not
	hookOverwriteEntry                      // overwrite: undo and entries written, data not
	hookOverwriteTorn                       // overwrite: entries and the first half of the data written
)

// handle is an open chunk.
type handle struct {
	id ID

	// Guarded by Store.mu.
	refs int
	elem *list.Element

	// mu is the chunk lock. All fields below are guarded by it (written
	// with it held exclusively; the files themselves are used under both).
	mu        sync.RWMutex
	gone      bool // removed, or failed to open: retry the lookup
	data, sum *os.File
	undo      *os.File // created on the first in-place overwrite
	undoDirty bool     // the undo file may hold a live record: keep it on close
	length    int64    // logical length
	dataSize  int64    // size of the data file
	sumSize   int64    // size of the sidecar
	// dirty holds the blocks whose entry changed since the last fdatasync:
	// their entry's prev already names the last durable state and is kept.
	dirty     map[uint32]struct{}
	unsynced  bool // some write since the last sync
	dirUnsync bool // the chunk's files were created and the directory is not synced
	// wbStart and wbBytes track data written since writeback was last
	// started (startWritebackLocked).
	wbStart, wbBytes int64
}

var (
	errNoChunk = errs.New(errs.NotFound, "chunk: no such chunk")
	errClosed  = errs.New(errs.Unavailable, "chunk: store is closed")
)

// Open opens (creating if needed) the chunk store in dir. A new or empty
// directory is formatted; an existing store must have the same format
// version and target ID. Open finishes any overwrite interrupted by a crash
// (see doc.go) before it returns.
func Open(dir string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.MaxOpenChunks == 0 {
		opts.MaxOpenChunks = DefaultMaxOpenChunks
	}
	s := &Store{dir: dir, opts: opts, log: opts.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("target", uint32(opts.Target))
	s.mu.open = make(map[ID]*handle)
	s.mu.closing = make(map[ID]chan struct{})
	s.mu.unsynced = make(map[ID]*evictedState)
	s.mu.syncErr = make(map[ID]error)
	if err := s.checkFormat(); err != nil {
		return nil, err
	}
	if err := s.makeDirs(); err != nil {
		return nil, err
	}
	if err := s.free.init(filepath.Join(dir, "free")); err != nil {
		return nil, fmt.Errorf("chunk: open target %d: %w", opts.Target, ioErr(err))
	}
	if _, err := os.Stat(filepath.Join(dir, sharedMark)); err == nil {
		s.free.marked.Store(true) // data files were handed to other processes
	}
	if err := s.loadFences(); err != nil {
		return nil, err
	}
	// After a crash, writes acknowledged without sync may still be only in
	// the page cache; make them durable once, so that every entry's cur
	// state is durable and the dirty sets start empty (see handle.dirty).
	if err := syncFS(dir); err != nil {
		return nil, fmt.Errorf("chunk: open target %d: %w", opts.Target, err)
	}
	if err := s.recoverAll(); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.scan(); err != nil {
		s.Close()
		return nil, err
	}
	if opts.Precreate > 0 {
		s.precreateStop = make(chan struct{})
		s.precreateDone = make(chan struct{})
		go s.precreate(opts.Precreate)
	}
	if opts.FenceGrace > 0 {
		s.fenceStop = make(chan struct{})
		s.fenceDone = make(chan struct{})
		go s.expireLoop(opts.FenceGrace)
	}
	return s, nil
}

// Target returns the ID of the target the store belongs to.
func (s *Store) Target() placement.TargetID { return s.opts.Target }

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Paths returns the data file and checksum sidecar of a chunk, for tools
// (fsck, tests) that inspect the store on disk.
func (s *Store) Paths(id ID) (data, sums string) {
	base := filepath.Join(s.dir, "chunks", fmt.Sprintf("%02x", id.Ino&0xff), fmt.Sprintf("%016x.%08x", id.Ino, id.Slot))
	return base + ".dat", base + ".sum"
}

func (s *Store) undoPath(id ID) string {
	return filepath.Join(s.dir, "undo", fmt.Sprintf("%016x.%08x", id.Ino, id.Slot))
}

func parseName(name string) (ID, bool) {
	ino, slot, ok := strings.Cut(name, ".")
	if !ok || len(ino) != 16 || len(slot) != 8 {
		return ID{}, false
	}
	i, err1 := strconv.ParseUint(ino, 16, 64)
	sl, err2 := strconv.ParseUint(slot, 16, 32)
	if err1 != nil || err2 != nil {
		return ID{}, false
	}
	return ID{Ino: i, Slot: uint32(sl)}, true
}

func (s *Store) checkFormat() error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("chunk: create target %d directory: %w", s.opts.Target, ioErr(err))
	}
	path := filepath.Join(s.dir, formatName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		ents, err := os.ReadDir(s.dir)
		if err != nil {
			return fmt.Errorf("chunk: open target %d: %w", s.opts.Target, ioErr(err))
		}
		for _, e := range ents {
			if e.Name() != "lost+found" && e.Name() != formatName+".tmp" {
				return errs.New(errs.Invalid, "chunk: %s is not empty and has no %s file: not a chunk store of target %d", s.dir, formatName, s.opts.Target)
			}
		}
		tmp := path + ".tmp"
		if err := writeFileSync(tmp, encodeFormat(formatInfo{Version: FormatVersion, Target: s.opts.Target})); err != nil {
			return fmt.Errorf("chunk: format target %d in %s: %w", s.opts.Target, s.dir, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("chunk: format target %d in %s: %w", s.opts.Target, s.dir, ioErr(err))
		}
		return syncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("chunk: open target %d: %w", s.opts.Target, ioErr(err))
	}
	f, err := parseFormat(b)
	switch {
	case err != nil:
		return errs.New(errs.Corruption, "chunk: %s of target %d: %v", path, s.opts.Target, err)
	case f.Version != FormatVersion:
		return errs.New(errs.NotSupported, "chunk: %s has format version %d; this build reads version %d", path, f.Version, FormatVersion)
	case f.Target != s.opts.Target:
		return errs.New(errs.Invalid, "chunk: %s belongs to target %d, not target %d", s.dir, f.Target, s.opts.Target)
	}
	return nil
}

func (s *Store) makeDirs() error {
	// The store's directory and chunks/ spread their new subdirectories
	// over the file system's block groups (spread.go).
	if _, err := spreadSubdirs(s.dir); err != nil {
		s.log.Warn("chunk: cannot mark the store directory for spread placement", "dir", s.dir, "err", err)
	}
	for _, d := range []string{"chunks", "undo"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			return fmt.Errorf("chunk: open target %d: %w", s.opts.Target, ioErr(err))
		}
	}
	if _, err := spreadSubdirs(filepath.Join(s.dir, "chunks")); err != nil {
		s.log.Warn("chunk: cannot mark the chunk directory for spread placement", "dir", filepath.Join(s.dir, "chunks"), "err", err)
	}
	for i := range 256 {
		if err := os.MkdirAll(filepath.Join(s.dir, "chunks", fmt.Sprintf("%02x", i)), 0o755); err != nil {
			return fmt.Errorf("chunk: open target %d: %w", s.opts.Target, ioErr(err))
		}
	}
	for _, d := range []string{filepath.Join(s.dir, "chunks"), s.dir} {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// scan counts the chunks and their bytes, and removes data files whose
// sidecar does not exist (a create or remove cut short by a crash).
func (s *Store) scan() error {
	for i := range 256 {
		dir := filepath.Join(s.dir, "chunks", fmt.Sprintf("%02x", i))
		ents, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("chunk: scan target %d: %w", s.opts.Target, ioErr(err))
		}
		sums := make(map[string]bool)
		for _, e := range ents {
			if base, ok := strings.CutSuffix(e.Name(), ".sum"); ok {
				sums[base] = true
			}
		}
		for _, e := range ents {
			name := e.Name()
			if base, ok := strings.CutSuffix(name, ".dat"); ok && !sums[base] {
				s.log.Info("chunk: removing orphaned data file", "file", filepath.Join(dir, name))
				if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("chunk: scan target %d: %w", s.opts.Target, ioErr(err))
				}
				continue
			}
			base, ok := strings.CutSuffix(name, ".sum")
			if !ok {
				continue
			}
			id, ok := parseName(base)
			if !ok {
				s.log.Warn("chunk: ignoring unknown file", "file", filepath.Join(dir, name))
				continue
			}
			f, err := openNoAtime(filepath.Join(dir, name), os.O_RDONLY)
			if err != nil {
				return fmt.Errorf("chunk: scan chunk %v on target %d: %w", id, s.opts.Target, ioErr(err))
			}
			n, err := s.chunkLength(id, f)
			f.Close()
			if err != nil {
				return err
			}
			s.chunks.Add(1)
			s.used.Add(n)
		}
	}
	return nil
}

// chunkLength derives a chunk's length from its sidecar: the end of the
// last present entry. A corrupt last entry counts as a full block, so that
// reading it reports the corruption.
func (s *Store) chunkLength(id ID, sum *os.File) (int64, error) {
	fi, err := sum.Stat()
	if err != nil {
		return 0, fmt.Errorf("chunk: stat chunk %v on target %d: %w", id, s.opts.Target, ioErr(err))
	}
	return s.chunkLengthOf(id, sum, fi.Size())
}

// chunkLengthOf is chunkLength for a sidecar of sumSize bytes.
func (s *Store) chunkLengthOf(id ID, sum *os.File, sumSize int64) (int64, error) {
	var b [entrySize]byte
	for n := sumSize / entrySize; n > 0; n-- {
		blk := n - 1
		if _, err := sum.ReadAt(b[:], blk*entrySize); err != nil {
			return 0, fmt.Errorf("chunk: read checksums of chunk %v on target %d: %w", id, s.opts.Target, ioErr(err))
		}
		e, err := parseEntry(b[:], uint32(blk))
		if err != nil {
			return n * BlockSize, nil
		}
		if e.present() {
			return blk*BlockSize + int64(e.cur.n), nil
		}
	}
	return 0, nil
}

// span is a byte range of a chunk that a read is about to read.
type span struct{ off, n int64 }

// acquire returns the open handle of chunk id, opening (with create:
// creating; for a read of span read: starting its data's read-ahead) the
// chunk if it is not open. The caller must lock the handle, check gone,
// and release it. A missing chunk gives errNoChunk.
func (s *Store) acquire(id ID, create bool, read *span) (*handle, error) {
	for {
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			return nil, errClosed
		}
		if h, ok := s.mu.open[id]; ok {
			h.refs++
			s.mu.lru.MoveToFront(h.elem)
			s.mu.Unlock()
			return h, nil
		}
		if ch, ok := s.mu.closing[id]; ok {
			s.mu.Unlock()
			<-ch
			continue
		}
		h := &handle{id: id, refs: 1}
		h.mu.Lock() // nobody can see h yet
		h.elem = s.mu.lru.PushFront(h)
		s.mu.open[id] = h
		st := s.mu.unsynced[id]
		if st != nil {
			delete(s.mu.unsynced, id)
			h.dirty, h.unsynced, h.dirUnsync = st.dirty, st.unsynced, st.dirUnsync
		}
		victims := s.evictLocked()
		s.mu.Unlock()
		s.closeVictims(victims)

		err := s.openFiles(h, create, read)
		if err != nil {
			h.gone = true
			s.mu.Lock()
			s.dropLocked(h)
			h.refs--
			if st != nil {
				s.mu.unsynced[id] = st // still not durable
			}
			s.mu.Unlock()
			h.mu.Unlock()
			return nil, err
		}
		h.mu.Unlock()
		return h, nil
	}
}

// dropLocked takes h out of the cache. s.mu must be held.
func (s *Store) dropLocked(h *handle) {
	if s.mu.open[h.id] == h {
		delete(s.mu.open, h.id)
		s.mu.lru.Remove(h.elem)
	}
}

// release gives back a reference from acquire; the last reference to a
// handle that left the cache closes its files.
func (s *Store) release(h *handle) {
	s.mu.Lock()
	h.refs--
	last := h.refs == 0 && h.gone
	s.mu.Unlock()
	if last {
		h.closeFiles()
	}
}

// lockChunk acquires and locks chunk id (exclusively if write).
func (s *Store) lockChunk(id ID, create, write bool) (*handle, error) {
	return s.lockChunkFor(id, create, write, nil)
}

// lockChunkFor is lockChunk for a read of span read (nil: not a read),
// which a chunk that must be opened starts fetching from disk at once.
func (s *Store) lockChunkFor(id ID, create, write bool, read *span) (*handle, error) {
	for {
		h, err := s.acquire(id, create, read)
		if err != nil {
			return nil, err
		}
		if write {
			h.mu.Lock()
		} else {
			h.mu.RLock()
		}
		if !h.gone {
			return h, nil
		}
		s.unlock(h, write)
	}
}

func (s *Store) unlock(h *handle, write bool) {
	if write {
		h.mu.Unlock()
	} else {
		h.mu.RUnlock()
	}
	s.release(h)
}

// evictLocked picks idle handles beyond the cache bound and moves them to
// the closing set. s.mu must be held.
func (s *Store) evictLocked() []*handle {
	var victims []*handle
	for e := s.mu.lru.Back(); e != nil && len(s.mu.open) > s.opts.MaxOpenChunks; {
		h := e.Value.(*handle)
		e = e.Prev()
		if h.refs > 0 {
			continue
		}
		s.dropLocked(h)
		s.mu.closing[h.id] = make(chan struct{})
		victims = append(victims, h)
	}
	return victims
}

// closeVictims closes evicted handles. A handle with writes that are not
// durable yet is not synced: its sync state (dirty set, unsynced,
// dirUnsync) goes to s.mu.unsynced, where the chunk's next handle takes it
// back and where Sync and Close find it, so the rule of prev (see
// handle.dirty) holds as if the handle had stayed open. A sync at each
// eviction cost small-file writes most of their time (three journal
// commits per chunk). Only when too many such chunks wait (twice
// maxUnsyncedEvicted) is a victim synced before it is closed. Until a
// victim is closed, acquire of the same chunk waits.
func (s *Store) closeVictims(victims []*handle) {
	for _, h := range victims {
		keep := h.data != nil && (h.unsynced || h.dirUnsync)
		s.mu.Lock()
		n := len(s.mu.unsynced)
		s.mu.Unlock()
		var err error
		if keep && n >= 2*maxUnsyncedEvicted {
			keep = false
			if err = s.syncLocked(h); err != nil {
				s.log.Error("chunk: sync on eviction failed", "ino", h.id.Ino, "slot", h.id.Slot, "err", err)
			}
		}
		var st *evictedState
		if keep {
			st = &evictedState{dirty: h.dirty, unsynced: h.unsynced, dirUnsync: h.dirUnsync}
		}
		h.closeFiles()
		s.mu.Lock()
		if st != nil {
			s.mu.unsynced[h.id] = st
		}
		if err != nil {
			s.mu.syncErr[h.id] = err
		}
		close(s.mu.closing[h.id])
		delete(s.mu.closing, h.id)
		flush := len(s.mu.unsynced) >= maxUnsyncedEvicted && !s.mu.flushing && !s.mu.closed
		if flush {
			s.mu.flushing = true
			s.flushes.Add(1) // under s.mu, before Close can see closed
		}
		s.mu.Unlock()
		if flush {
			go s.flushUnsynced()
		}
	}
}

// flushUnsynced makes the evicted chunks in s.mu.unsynced durable with one
// syncfs(2) of the store's file system and forgets their sync state. A
// failure is reported by the next Sync of each of them. s.mu.flushing is
// set by the caller.
func (s *Store) flushUnsynced() {
	s.mu.Lock()
	snap := maps.Clone(s.mu.unsynced)
	s.mu.Unlock()
	err := syncFS(s.dir)
	if err != nil {
		s.log.Error("chunk: sync of evicted chunks failed", "chunks", len(snap), "err", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, st := range snap {
		// A chunk opened again since has its state in its handle; one
		// evicted again has a new state: leave both.
		if s.mu.unsynced[id] == st {
			delete(s.mu.unsynced, id)
			if err != nil {
				s.mu.syncErr[id] = err
			}
		}
	}
	s.mu.flushing = false
	s.flushes.Done()
}

// openNoAtime opens (with O_CREATE in flag, creates) a chunk file whose
// reads do not update its access time (O_NOATIME): with relatime, the
// first read of a chunk written since would otherwise dirty its inode, an
// inode write for nothing (no one reads a chunk file's atime). The flag
// needs the file's owner (or CAP_FOWNER): a store whose files belong to
// another user opens them without it.
//
// The descriptor is opened with open(2) and wrapped by os.NewFile: an
// os.OpenFile of a regular file also tries to register it with the
// runtime's poller (two fcntls to set O_NONBLOCK, an epoll_ctl that
// fails, two fcntls to clear it), five system calls per file that a
// chunk's two files paid at every cold open.
func openNoAtime(path string, flag int) (*os.File, error) {
	fd, err := openFD(path, flag|syscall.O_NOATIME)
	if err == syscall.EPERM {
		fd, err = openFD(path, flag)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openFD is open(2) of path with O_CLOEXEC, retried on EINTR.
func openFD(path string, flag int) (int, error) {
	for {
		fd, err := unix.Open(path, flag|unix.O_CLOEXEC, 0o644)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// openFiles opens (or, with create, makes) h's files. For a read of span
// read it asks the kernel to start reading that range of the data file
// before it reads the sidecar: a chunk opened cold then costs the
// latency of one disk read for its data and sidecar together, not of
// two in turn.
func (s *Store) openFiles(h *handle, create bool, read *span) error {
	dataPath, sumPath := s.Paths(h.id)
	sum, err := openNoAtime(sumPath, os.O_RDWR)
	if errors.Is(err, fs.ErrNotExist) {
		if !create {
			return errNoChunk
		}
		if s.Frozen(h.id) {
			return s.moved(h.id) // a frozen chunk is never created again
		}
		// The data file first: a sidecar always has its data file.
		if h.data, err = s.createFile(dataPath, os.O_TRUNC); err != nil {
			return fmt.Errorf("chunk: create chunk %v on target %d: %w", h.id, s.opts.Target, ioErr(err))
		}
		if h.sum, err = s.createFile(sumPath, os.O_EXCL); err != nil {
			h.data.Close()
			os.Remove(dataPath)
			return fmt.Errorf("chunk: create chunk %v on target %d: %w", h.id, s.opts.Target, ioErr(err))
		}
		h.dirUnsync = true
		s.chunks.Add(1)
		return nil
	}
	if err != nil {
		return fmt.Errorf("chunk: open chunk %v on target %d: %w", h.id, s.opts.Target, ioErr(err))
	}
	h.sum = sum
	if h.data, err = openNoAtime(dataPath, os.O_RDWR|os.O_CREATE); err != nil {
		sum.Close()
		return fmt.Errorf("chunk: open chunk %v on target %d: %w", h.id, s.opts.Target, ioErr(err))
	}
	if read != nil && read.n > 0 {
		// Only a hint: a failure changes nothing but the timing.
		unix.Fadvise(int(h.data.Fd()), read.off, read.n, unix.FADV_WILLNEED)
	}
	fail := func(err error) error {
		h.data.Close()
		h.sum.Close()
		return err
	}
	fi, err := sum.Stat()
	if err != nil {
		return fail(fmt.Errorf("chunk: stat chunk %v on target %d: %w", h.id, s.opts.Target, ioErr(err)))
	}
	h.sumSize = fi.Size()
	if h.length, err = s.chunkLengthOf(h.id, sum, h.sumSize); err != nil {
		return fail(err)
	}
	if fi, err = h.data.Stat(); err != nil {
		return fail(fmt.Errorf("chunk: stat chunk %v on target %d: %w", h.id, s.opts.Target, ioErr(err)))
	}
	h.dataSize = fi.Size()
	return nil
}

// closeFiles closes a handle nobody uses any more. Its undo file is
// removed unless it may hold a live record.
func (h *handle) closeFiles() {
	if h.data != nil {
		h.data.Close()
		h.sum.Close()
		h.data, h.sum = nil, nil
	}
	if h.undo != nil {
		path := h.undo.Name()
		h.undo.Close()
		h.undo = nil
		if !h.undoDirty {
			os.Remove(path)
		}
	}
}

// Sync makes every write to the named chunks done so far durable, as far
// as the local file system keeps its fsync promises.
func (s *Store) Sync(ids ...ID) error {
	for _, id := range ids {
		s.mu.Lock()
		ch, evicting := s.mu.closing[id]
		s.mu.Unlock()
		if evicting {
			<-ch // eviction syncs
		}
		s.mu.Lock()
		h, ok := s.mu.open[id]
		if ok {
			h.refs++
		}
		// A failed sync at eviction is reported once, here: the data it
		// covered may be lost whatever happened since.
		evictErr, failed := s.mu.syncErr[id]
		delete(s.mu.syncErr, id)
		s.mu.Unlock()
		if failed {
			if ok {
				s.release(h)
			}
			return evictErr
		}
		if !ok {
			if err := s.syncEvicted(id); err != nil {
				return err
			}
			continue
		}
		h.mu.Lock()
		var err error
		if !h.gone {
			err = s.syncLocked(h)
		}
		s.unlock(h, true)
		if err != nil {
			return err
		}
	}
	return nil
}

// syncEvicted makes the writes to chunk id durable if it was evicted
// with writes that are not (s.mu.unsynced): it opens the chunk again,
// which takes its sync state back, and syncs it.
func (s *Store) syncEvicted(id ID) error {
	s.mu.Lock()
	_, tracked := s.mu.unsynced[id]
	s.mu.Unlock()
	if !tracked {
		return nil // never written since Open, or durable already
	}
	h, err := s.lockChunk(id, false, true)
	if err == errNoChunk {
		return nil
	}
	if err != nil {
		return err
	}
	err = s.syncLocked(h)
	s.unlock(h, true)
	return err
}

// syncLocked makes h's writes durable: data, then checksums, then the
// directory if the chunk was created. h.mu must be held exclusively (or h
// otherwise unreachable).
func (s *Store) syncLocked(h *handle) error {
	if h.data == nil {
		return nil
	}
	if !h.unsynced {
		clear(h.dirty) // everything is durable already
	}
	if h.unsynced {
		if err := fdatasync(h.data); err != nil {
			return fmt.Errorf("chunk: sync data of chunk %v on target %d: %w", h.id, s.opts.Target, err)
		}
		if err := fdatasync(h.sum); err != nil {
			return fmt.Errorf("chunk: sync checksums of chunk %v on target %d: %w", h.id, s.opts.Target, err)
		}
		h.unsynced = false
		clear(h.dirty)
	}
	if h.dirUnsync {
		dataPath, _ := s.Paths(h.id)
		if err := syncDir(filepath.Dir(dataPath)); err != nil {
			return fmt.Errorf("chunk: sync directory of chunk %v on target %d: %w", h.id, s.opts.Target, err)
		}
		h.dirUnsync = false
	}
	return nil
}

// Remove removes the chunks of inode ino in the given slots, durably.
// Missing chunks are not an error.
func (s *Store) Remove(ino uint64, slots []uint32) error {
	removed := false
	for _, slot := range slots {
		id := ID{Ino: ino, Slot: slot}
		h, err := s.lockChunk(id, false, true)
		if err == errNoChunk {
			continue
		}
		if err != nil {
			return fmt.Errorf("chunk: remove chunk %v on target %d: %w", id, s.opts.Target, err)
		}
		dataPath, sumPath := s.Paths(id)
		// The sidecar first: without it the chunk does not exist, and
		// Open removes a data file left behind. Both go to the pool of
		// recycled files when they may (recycle.go).
		err = s.removeFile(id, sumPath)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			err = s.removeFile(id, dataPath)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.unlock(h, true)
			return fmt.Errorf("chunk: remove chunk %v on target %d: %w", id, s.opts.Target, ioErr(err))
		}
		if h.undo != nil {
			h.undoDirty = false
		} else {
			os.Remove(s.undoPath(id))
		}
		h.gone = true
		s.free.forget(id)
		s.verified.forget(id)
		s.chunks.Add(-1)
		s.used.Add(-h.length)
		s.mu.Lock()
		s.dropLocked(h)
		s.mu.Unlock()
		s.unlock(h, true)
		removed = true
	}
	if !removed {
		return nil
	}
	dataPath, _ := s.Paths(ID{Ino: ino})
	if err := syncDir(filepath.Dir(dataPath)); err != nil {
		return fmt.Errorf("chunk: remove chunks of ino %d on target %d: %w", ino, s.opts.Target, err)
	}
	return nil
}

// Stat reports the target's file system capacity and free bytes, and the
// logical bytes and number of its chunks.
func (s *Store) Stat() (capacity, used, free int64, chunks uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.dir, &st); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("chunk: stat target %d: %w", s.opts.Target, ioErr(&fs.PathError{Op: "statfs", Path: s.dir, Err: err}))
	}
	capacity = int64(st.Blocks) * int64(st.Bsize)
	free = int64(st.Bavail) * int64(st.Bsize)
	return capacity, s.used.Load(), free, uint64(max(s.chunks.Load(), 0)), nil
}

// Precreated returns the number of empty files made ahead of need since
// Open (Options.Precreate), and the number in the pool now.
func (s *Store) Precreated() (made uint64, pooled int) {
	return s.precreated.Load(), s.free.size()
}

// Corruptions returns the number of checksum failures seen since Open.
func (s *Store) Corruptions() uint64 { return s.corruptions.Load() }

// Close syncs and closes every open chunk. It is idempotent; operations
// after Close fail with errs.Unavailable.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	if s.precreateStop != nil {
		close(s.precreateStop)
	}
	if s.fenceStop != nil {
		close(s.fenceStop)
	}
	var hs []*handle
	for _, h := range s.mu.open {
		hs = append(hs, h)
	}
	closing := make([]chan struct{}, 0, len(s.mu.closing))
	for _, ch := range s.mu.closing {
		closing = append(closing, ch)
	}
	s.mu.Unlock()
	for _, ch := range closing {
		<-ch
	}
	var first error
	for _, h := range hs {
		h.mu.Lock()
		if err := s.syncLocked(h); err != nil && first == nil {
			first = err
		}
		h.gone = true
		h.mu.Unlock()
		s.mu.Lock()
		s.dropLocked(h)
		last := h.refs == 0
		s.mu.Unlock()
		if last {
			h.closeFiles()
		}
	}
	s.flushes.Wait()
	if s.precreateDone != nil {
		<-s.precreateDone
	}
	if s.fenceDone != nil {
		<-s.fenceDone
	}
	s.mu.Lock()
	evicted := len(s.mu.unsynced)
	clear(s.mu.unsynced)
	s.mu.Unlock()
	if evicted > 0 {
		// The evicted chunks' writes, like the open ones'.
		if err := syncFS(s.dir); err != nil && first == nil {
			first = fmt.Errorf("chunk: close target %d: %w", s.opts.Target, err)
		}
	}
	return first
}

// abandon drops every open file without syncing or cleaning up, as a crash
// would (tests only).
func (s *Store) abandon() {
	s.mu.Lock()
	s.mu.closed = true
	for _, h := range s.mu.open {
		h.data.Close()
		h.sum.Close()
		if h.undo != nil {
			h.undo.Close()
		}
	}
	s.mu.open = nil
	s.mu.Unlock()
}

// ioErr classifies a local file system error: a full disk becomes
// errs.NoSpace (keeping the system's text), everything else stays as is.
func ioErr(err error) error {
	var en syscall.Errno
	if errors.As(err, &en) && (en == syscall.ENOSPC || en == syscall.EDQUOT) {
		return &errs.Error{Code: errs.NoSpace, Msg: err.Error()}
	}
	return err
}

func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return ioErr(&fs.PathError{Op: "fdatasync", Path: f.Name(), Err: err})
		}
		return nil
	}
}

func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return ioErr(err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return ioErr(&fs.PathError{Op: "syncfs", Path: dir, Err: err})
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return ioErr(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return ioErr(err)
	}
	return nil
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return ioErr(err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return ioErr(err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return ioErr(err)
	}
	return ioErr(f.Close())
}

// readFull reads len(p) bytes at off, zero-filling past the end of file.
func readFull(f *os.File, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if err == io.EOF {
		clear(p[n:])
		return nil
	}
	return err
}
