package client

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pause"
	"github.com/sluice-fs/sluice/internal/wire"
)

// The client side of the checkpoint absorb policy (ADR 0013).
//
// A client with Options.StagingDir writes files created under a directory
// with the absorb policy into its staging area instead of the write-back
// buffer: Sync and Close (and the mount's flush and fsync) return once the
// data and a record of it are durable there, and a background drainer
// writes it to the targets through an ordinary File. The staging area of a
// client is StagingDir/<FSID>/<host>-<random>/, locked (flock) while the
// client lives; a client that starts finds the unlocked areas of clients
// that died on the node, adopts them and drains what they acknowledged.
//
// Lock order: File.mu, then stagedIno.mu, then stager.mu.

// drainPiece is the most a drain reads from a staging file at once: small
// enough that what it read is still in the CPU's cache when the File
// copies it into its write buffer.
const drainPiece = 1 << 20

// drainParallel bounds the segments drained at once.
const drainParallel = 16

// oNoStage is a private OpenInode flag: the drainer's own Files write to
// the targets.
const oNoStage = 1 << 30

// stager is a client's staging area and drainer.
type stager struct {
	c    *Client
	base string // StagingDir/<FSID>
	own  *stageDir
	host string

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{}

	// Writer activity, for drain pacing (drainpace.go).
	lastWrite atomic.Int64 // unix ns of the last staged write or seal
	sealing   atomic.Int32
	holds     atomic.Int32 // HoldDrain calls not released
	waiting   atomic.Int32 // reads waiting for a file's drain (waitIno), writes for room (reserve)

	// drained is signalled when a segment drains: a queued rename may go.
	drained chan struct{}
	// reserved is closed once the reserve is allocated (or never will be).
	reserved chan struct{}

	mu   sync.Mutex
	cond *sync.Cond
	inos map[uint64]*stagedIno
	// The files whose last staged segment drained most recently, with
	// the size it gave them, and the count of such drains (stagedToken,
	// overlayStagedSince).
	recent   [recentDrains]drainedIno
	nDrained uint64
	created  map[uint64]uint64 // file created through this client -> its directory
	renames  []*renameRec      // queued renames, in order
	renaming bool              // a goroutine works through renames
	policy   map[uint64]policyEntry
	stats    StagingStats
	// Drained segments' data files kept for reuse (in memory only), and
	// the bytes they hold; memTotal is the memory file system's size.
	pool      []string
	poolBytes int64
	memTotal  int64
	// The staging limit (stagelimit.go): the bytes staged and not drained
	// yet (open segments included, and room granted to writes in
	// progress), those of them in sealed segments, and the most held.
	limit, held, sealed int64
	// Attempts of queued renames sent and answered, and renames that left
	// the queue (done or failed for good): lookups that map names through
	// the queue check them (absorb.go).
	renameSent, renameAnswered, renameDone int64
	// The staging file system's available space (-1: unknown) when last
	// read (limitNowLocked), and the held and pooled bytes then.
	space, spaceHeld, spacePool int64
	spaceAt                     time.Time
	// The Files with an open segment (stagelimit.go: a writer that
	// waits for room seals those not in use).
	open map[*stagedFile]struct{}
}

// stagedIno is the drain state of one file: its segments not yet drained.
type stagedIno struct {
	// mu orders the file's StagedAdd and StagedDone calls with the
	// counts they follow; held across those calls.
	mu     sync.Mutex
	owners map[string]int // pending segments per staging area; guarded by mu

	pending int           // guarded by stager.mu
	size    int64         // the largest size a pending segment gives the file
	last    chan struct{} // closed when the newest segment is drained
}

// drainedIno is a file's last staged segment drained: the nth drain.
type drainedIno struct {
	ino, n uint64
	size   int64
}

// recentDrains is how many drains a request may cross and still have
// their sizes counted in its attributes (overlayStagedSince).
const recentDrains = 256

type policyEntry struct {
	on bool
	at time.Time
}

// policyTTL is how long a client trusts a directory's absorb policy.
const policyTTL = time.Second

// StagingStats counts a client's staging activity.
type StagingStats struct {
	Segments, StagedBytes   int64 // acknowledged from staging
	Drained, DrainedBytes   int64 // on the targets
	PendingSegments         int64 // not yet drained
	RenamesQueued, Renamed  int64
	DrainErrors, LastErrors int64  // retried drain failures; renames that failed when carried out
	LastError               string // the last of those errors
	Adopted                 int64  // segments and renames found in dead clients' areas
	// InMemory says the staging directory is on a memory file system
	// (tmpfs, ramfs: /dev/shm): staged data survives a kill of the
	// client's process, not a restart of its machine (docs/checkpoint.md).
	InMemory bool
	// Recycled counts segments written into the data file of a drained
	// one, or of the reserve (in memory only: its pages are reused, not
	// allocated again).
	Recycled int64
	// Reserved is the bytes of data files allocated at start for reuse
	// (Options.StagingReserve).
	Reserved int64
	// Limit is the most bytes staged and not drained that the area holds
	// (Options.StagingMax; 0: none); Held is those bytes now and PeakHeld
	// the most they were. Throttled counts the writes that waited for
	// drains to make room, ThrottledTime their waiting in all, and
	// Waiting the writes waiting now.
	Limit, Held, PeakHeld int64
	Throttled, Waiting    int64
	ThrottledTime         time.Duration
}

// stageDir is one staging area: this client's, or a dead client's being
// replayed. left counts its records not yet done.
type stageDir struct {
	path  string
	owner string // host/name, the "S" key's owner
	lock  *os.File
	seq   atomic.Uint64
	left  atomic.Int64
	adopt bool
}

// segment is the staged data written through one File between two seals:
// a sparse data file holding each byte at its file offset.
type segment struct {
	dir   *stageDir
	seq   uint64
	ino   uint64
	dat   *os.File
	ext   []stageExtent
	bytes int64 // the extents' bytes
	size  int64
	prev  chan struct{} // the file's previous segment drained
	done  chan struct{}
}

type renameRec struct {
	dir  *stageDir
	seq  uint64
	req  wire.RenameReq
	done chan struct{}
	// The paths it renames from and to, when the caller named paths (in
	// memory only: waitRenamesPath); "" for a rename by inode or adopted.
	oldPath, newPath string
	// What it moves and replaces, in memory only (lookupPath).
	moved movedInodes
}

func recName(seq uint64) string { return fmt.Sprintf("%016x.rec", seq) }
func datName(seq uint64) string { return fmt.Sprintf("%016x.dat", seq) }

// openStager creates this client's staging area and adopts the areas of
// dead clients.
func openStager(c *Client, dir string) (*stager, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("client: staging: %w", err)
	}
	base := filepath.Join(dir, c.FSID())
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("client: staging: %w", err)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	name := strings.ReplaceAll(host, "/", "_") + "-" + hex.EncodeToString(rnd[:])
	own, err := lockStageDir(base, name, true)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &stager{c: c, base: base, own: own, host: host, ctx: ctx, cancel: cancel,
		sem: make(chan struct{}, drainParallel), inos: make(map[uint64]*stagedIno),
		created: make(map[uint64]uint64), policy: make(map[uint64]policyEntry), drained: make(chan struct{}, 1),
		open:     make(map[*stagedFile]struct{}),
		reserved: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	s.stats.InMemory, s.memTotal = inMemory(base)
	s.limit = stagingLimit(c.opts.StagingMax, availableBytes(base), s.memTotal)
	if err := s.adoptAll(); err != nil {
		// Stop at once: what was adopted stays for the next client.
		done, cancel := context.WithCancel(context.Background())
		cancel()
		s.close(done)
		return nil, err
	}
	if n, size := reservePlan(s.memTotal, c.opts.StagingReserve); n > 0 {
		s.wg.Add(1)
		go s.prepareReserve(n, size)
	} else {
		close(s.reserved)
	}
	return s, nil
}

// Magic numbers of memory file systems (statfs(2)).
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// inMemory reports whether dir is on a memory file system, whose files
// are gone after a restart of the machine, and that file system's size.
func inMemory(dir string) (bool, int64) {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return false, 0
	}
	if st.Type != tmpfsMagic && st.Type != ramfsMagic {
		return false, 0
	}
	return true, int64(st.Blocks) * st.Bsize
}

// Reuse of drained segments' data files in memory. Writing into pages a
// file already has costs half of writing into new ones (tmpfs allocates
// and charges every new page: 2.1-2.2 against 4.0-4.3 GB/s with dd on the
// development VM), so a client staging in memory keeps the data files of
// drained segments, up to poolMax bytes and a quarter of the file
// system, and writes the next segments into them. Only a segment's
// extents are ever read (the drain, an adoption), so the old bytes in the
// rest of a reused file are never seen; a reused file without a record
// is dropped at adoption like any unacknowledged data file, and the pool
// goes with the area when the client closes.
const poolMax = 16 << 30

// keepForReuse decides whether a drained data file of size bytes joins
// the pool, which holds pooled bytes, on a memory file system of memTotal
// bytes (0: not in memory).
func keepForReuse(memTotal, pooled, size int64) bool {
	return memTotal > 0 && size > 0 && pooled+size <= min(poolMax, memTotal/4)
}

func poolName(seq uint64) string { return fmt.Sprintf("%016x.pool", seq) }

// Reserve piece sizes: a segment (a file's writes between two seals) is
// written into one pooled file, what does not fit going to new pages, so
// the reserve is cut in pieces that the writers of one checkpoint can each
// take: eight, for a node's eight ranks writing one shard each (DCP's
// default), so that a reserve of the node's share of a checkpoint holds
// every shard.
const (
	reserveMinPiece = 64 << 20
	reserveMaxPiece = 2 << 30
	reservePieces   = 8
)

// reservePlan decides the data files a client allocates at start for a
// reserve of reserve bytes on a memory file system of memTotal bytes (0:
// not in memory): n files of size bytes, within the pool's cap
// (keepForReuse), an eighth of the reserve each, between 64 MiB and
// 2 GiB (a reserve under 64 MiB is one file).
func reservePlan(memTotal, reserve int64) (n int, size int64) {
	r := min(reserve, poolMax, memTotal/4)
	if memTotal <= 0 || r <= 0 {
		return 0, 0
	}
	size = min(max(r/reservePieces, reserveMinPiece), reserveMaxPiece)
	if size > r {
		return 1, r
	}
	return int(r / size), size
}

// prepareReserve allocates the reserve's files into the pool, one after
// the other, in the background; it stops at the first failure (a full
// file system: what was allocated stays pooled) or when the client closes.
func (s *stager) prepareReserve(n int, size int64) {
	defer s.wg.Done()
	defer close(s.reserved)
	for range n {
		if s.ctx.Err() != nil {
			return
		}
		name := filepath.Join(s.own.path, poolName(s.own.seq.Add(1)))
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
		if err == nil {
			err = syscall.Fallocate(int(f.Fd()), 0, 0, size)
			f.Close()
		}
		s.mu.Lock()
		if err == nil && !keepForReuse(s.memTotal, s.poolBytes, size) {
			err = errors.New("the pool is full")
		}
		if err != nil {
			s.stats.LastError = fmt.Sprintf("client: staging: reserve %s: %v", name, err)
			s.mu.Unlock()
			os.Remove(name)
			return
		}
		s.pool = append(s.pool, name)
		s.poolBytes += size
		s.stats.Reserved += size
		s.mu.Unlock()
	}
}

// lockStageDir locks area base/name. With create it makes the area, its
// LOCK file appearing already locked (locked under a temporary name in
// base, then renamed in), so that a client starting at the same moment
// never takes a new area for a dead one. Without create it returns nil,
// nil when another process holds the area or its LOCK is not there yet.
func lockStageDir(base, name string, create bool) (*stageDir, error) {
	p := filepath.Join(base, name)
	if create {
		if err := os.Mkdir(p, 0o700); err != nil {
			return nil, fmt.Errorf("client: staging: %w", err)
		}
		tmp := filepath.Join(base, "."+name+".lock")
		lf, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
		if err != nil {
			return nil, fmt.Errorf("client: staging: %w", err)
		}
		err = syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			err = os.Rename(tmp, filepath.Join(p, "LOCK"))
		}
		if err == nil {
			err = syncDir(p)
		}
		if err == nil {
			err = syncDir(base)
		}
		if err != nil {
			lf.Close()
			return nil, fmt.Errorf("client: staging: lock %s: %w", p, err)
		}
		return &stageDir{path: p, owner: name, lock: lf}, nil
	}
	lf, err := os.OpenFile(filepath.Join(p, "LOCK"), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client: staging: %w", err)
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lf.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("client: staging: lock %s: %w", p, err)
	}
	return &stageDir{path: p, owner: name, lock: lf}, nil
}

// leftoverAge is how old a half-made area (no LOCK) or a temporary lock
// file must be before a starting client removes it: older than any
// client's start-up.
const leftoverAge = time.Minute

func (s *stager) ownerOf(d *stageDir) string { return d.owner }

// adoptAll replays the staging areas whose owner died: their segments are
// drained and their renames carried out, in each area's order, before any
// record of this client that depends on them.
func (s *stager) adoptAll() error {
	ents, err := os.ReadDir(s.base)
	if err != nil {
		return fmt.Errorf("client: staging: %w", err)
	}
	for _, e := range ents {
		p := filepath.Join(s.base, e.Name())
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > leftoverAge {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".lock") {
				os.Remove(p) // a client died making its area
				continue
			}
			if _, err := os.Stat(filepath.Join(p, "LOCK")); e.IsDir() && errors.Is(err, fs.ErrNotExist) {
				os.Remove(p) // empty: nothing was ever staged there
				continue
			}
		}
		if !e.IsDir() || e.Name() == filepath.Base(s.own.path) {
			continue
		}
		d, err := lockStageDir(s.base, e.Name(), false)
		if err != nil {
			return err
		}
		if d == nil {
			continue // a live client's, or one being made
		}
		d.adopt = true
		if err := s.adopt(d); err != nil {
			d.lock.Close()
			if errors.Is(err, fs.ErrNotExist) && isGone(d.path) {
				// Another client starting beside this one adopted the
				// area, drained it and removed it before this one got
				// the lock: nothing is left to adopt.
				continue
			}
			return err
		}
	}
	return nil
}

// isGone reports whether the staging area at p no longer exists.
func isGone(p string) bool {
	_, err := os.Stat(p)
	return errors.Is(err, fs.ErrNotExist)
}

func (s *stager) adopt(d *stageDir) error {
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return fmt.Errorf("client: staging: adopt %s: %w", d.path, err)
	}
	var recs []stageRec
	recSeen := make(map[uint64]bool)
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, ".rec") {
			b, err := os.ReadFile(filepath.Join(d.path, n))
			if err != nil {
				return fmt.Errorf("client: staging: adopt: %w", err)
			}
			r, err := decodeStageRec(b)
			if err != nil {
				return fmt.Errorf("client: staging: adopt %s: %w", filepath.Join(d.path, n), err)
			}
			recs = append(recs, r)
			recSeen[r.Seq] = true
		}
	}
	// Data files without a record and temporary files were never
	// acknowledged.
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, ".tmp") {
			os.Remove(filepath.Join(d.path, n))
		}
		if strings.HasSuffix(n, ".dat") {
			if seq, err := strconv.ParseUint(strings.TrimSuffix(n, ".dat"), 16, 64); err != nil || !recSeen[seq] {
				os.Remove(filepath.Join(d.path, n))
			}
		}
	}
	slices.SortFunc(recs, func(a, b stageRec) int { return cmp.Compare(a.Seq, b.Seq) })
	d.left.Add(int64(len(recs)) + 1) // +1 until the loop below is done
	for _, r := range recs {
		s.mu.Lock()
		s.stats.Adopted++
		s.mu.Unlock()
		switch r.Kind {
		case recSegment:
			dat, err := os.Open(filepath.Join(d.path, datName(r.Seq)))
			if err != nil {
				return fmt.Errorf("client: staging: adopt segment %d of %s: %w", r.Seq, d.path, err)
			}
			seg := &segment{dir: d, seq: r.Seq, ino: r.Ino, dat: dat, ext: r.Extents, size: r.Size, done: make(chan struct{})}
			for _, x := range r.Extents {
				seg.bytes += x.Len
			}
			s.mu.Lock()
			s.held += seg.bytes // on the staging disk until drained, as this client's own
			s.noteHeldLocked()
			s.mu.Unlock()
			if err := s.commit(s.ctx, seg); err != nil {
				return err
			}
		case recRename:
			s.queueRename(&renameRec{dir: d, seq: r.Seq, req: r.Rename, done: make(chan struct{})})
		}
	}
	s.doneRec(d)
	return nil
}

// doneRec counts a record of d done; an adopted area with none left is
// removed.
func (s *stager) doneRec(d *stageDir) {
	if d.left.Add(-1) != 0 || !d.adopt {
		return
	}
	os.RemoveAll(d.path)
	syncDir(s.base)
	d.lock.Close()
}

// writeRec writes a record durably: a temporary file, synced, renamed
// into place, and the directory synced.
func writeRec(dir string, r *stageRec) error {
	name := filepath.Join(dir, recName(r.Seq))
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(r.encode())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return stagingErr("write record "+name, err)
	}
	return nil
}

func syncDir(p string) error {
	d, err := os.Open(p)
	if err != nil {
		return err
	}
	err = d.Sync()
	d.Close()
	return err
}

// stagedFile is the staging state of a File under the absorb policy
// (guarded by File.mu).
type stagedFile struct {
	s   *stager
	f   *File
	seg *segment // the segment being written, nil until the next write
	// err is a failed seal's: the segment's writes were dropped, so every
	// later Sync and Close of the File fails with it.
	err error
}

// write stores p at off in the File's open segment, within the staging
// limit (stagelimit.go): each piece gets its room first (reserve), and
// the segment is sealed when sealEarly says so. size is the File's size
// before the write.
func (sf *stagedFile) write(ctx context.Context, ino uint64, p []byte, off, size int64) (int, error) {
	written := 0
	for len(p) > 0 {
		room, err := sf.reserve(ctx, int64(len(p)), size)
		if err != nil {
			return written, err
		}
		n, grew, err := sf.writeSeg(ino, p[:room], off)
		sf.s.unhold(room - grew)
		written, p, off = written+n, p[n:], off+int64(n)
		size = max(size, off)
		if err != nil {
			return written, err
		}
		if sf.seg != nil && sf.s.sealEarly(sf.seg.bytes) {
			if err := sf.seal(ctx, size); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// writeSeg stores p at off in the open segment, which it starts if there
// is none; grew is how many bytes the segment's extents grew by (the
// bytes held, which a grant counted).
func (sf *stagedFile) writeSeg(ino uint64, p []byte, off int64) (n int, grew int64, err error) {
	if sf.seg == nil {
		d := sf.s.own
		seq := d.seq.Add(1)
		dat, err := sf.s.reuse(filepath.Join(d.path, datName(seq)))
		if err != nil {
			dat, err = os.OpenFile(filepath.Join(d.path, datName(seq)), os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o600)
		}
		if err != nil {
			return 0, 0, stagingErr("create", err)
		}
		sf.seg = &segment{dir: d, seq: seq, ino: ino, dat: dat, done: make(chan struct{})}
		sf.s.mu.Lock()
		sf.s.open[sf] = struct{}{}
		sf.s.mu.Unlock()
	}
	seg := sf.seg
	sf.s.lastWrite.Store(time.Now().UnixNano())
	n, err = seg.dat.WriteAt(p, off)
	if n > 0 {
		seg.ext, grew = addExtent(seg.ext, off, int64(n))
		seg.bytes += grew
	}
	if err != nil {
		return n, grew, stagingErr("write", err)
	}
	return n, grew, nil
}

// reuse renames a pooled data file to name and opens it, or fails when
// the pool is empty.
func (s *stager) reuse(name string) (*os.File, error) {
	s.mu.Lock()
	if len(s.pool) == 0 {
		s.mu.Unlock()
		return nil, fs.ErrNotExist
	}
	p := s.pool[len(s.pool)-1]
	s.pool = s.pool[:len(s.pool)-1]
	s.mu.Unlock()
	var size int64
	if fi, err := os.Stat(p); err == nil {
		size = fi.Size()
	}
	err := os.Rename(p, name)
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(name, os.O_RDWR, 0o600)
	}
	s.mu.Lock()
	s.poolBytes -= size
	if err == nil {
		s.stats.Recycled++
	}
	s.mu.Unlock()
	if err != nil {
		os.Remove(p)
		os.Remove(name)
		return nil, err
	}
	return f, nil
}

// stagingErr classes an error of the staging disk: a full one is
// errs.NoSpace (ENOSPC to the application), as a full target would be.
func stagingErr(op string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return errs.New(errs.NoSpace, "client: staging: %s: %v", op, err)
	}
	return fmt.Errorf("client: staging: %s: %w", op, err)
}

// seal makes the open segment durable in the staging area, marks the file
// staged in the metadata and hands the segment to the drainer. size is
// the File's size.
func (sf *stagedFile) seal(ctx context.Context, size int64) error {
	if sf.err != nil {
		return sf.err
	}
	seg := sf.seg
	if seg == nil {
		return nil
	}
	sf.seg = nil
	sf.s.mu.Lock()
	delete(sf.s.open, sf)
	sf.s.mu.Unlock()
	seg.size = size
	sf.s.sealing.Add(1)
	defer func() {
		sf.s.lastWrite.Store(time.Now().UnixNano())
		sf.s.sealing.Add(-1)
	}()
	drop := func(err error) error {
		seg.dat.Close()
		os.Remove(seg.dat.Name())
		sf.s.unhold(seg.bytes)
		sf.err = err
		return err
	}
	if err := seg.dat.Sync(); err != nil {
		return drop(stagingErr("sync "+seg.dat.Name(), err))
	}
	rec := stageRec{Kind: recSegment, Seq: seg.seq, Ino: seg.ino, Size: size, Extents: seg.ext}
	if err := writeRec(seg.dir.path, &rec); err != nil {
		return drop(err)
	}
	seg.dir.left.Add(1)
	if err := sf.s.commit(ctx, seg); err != nil {
		// The record stays: the next client to start on this node
		// drains it.
		return err
	}
	sf.s.mu.Lock()
	sf.s.stats.Segments++
	sf.s.stats.StagedBytes += seg.bytes
	sf.s.mu.Unlock()
	return nil
}

// commit marks seg's file staged (the first pending segment of the file
// tells the metadata service) and starts its drain after the file's
// previous segment.
func (s *stager) commit(ctx context.Context, seg *segment) error {
	s.mu.Lock()
	st := s.inos[seg.ino]
	if st == nil {
		st = &stagedIno{owners: make(map[string]int)}
		s.inos[seg.ino] = st
	}
	st.pending++
	st.size = max(st.size, seg.size)
	seg.prev, st.last = st.last, seg.done
	s.stats.PendingSegments++
	s.sealed += seg.bytes
	s.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.owners[seg.dir.owner]++
	if st.owners[seg.dir.owner] == 1 {
		err := s.c.metaCall(ctx, wire.OpStagedAdd, &wire.StagedReq{Ino: seg.ino, Owner: s.ownerOf(seg.dir)}, nil)
		if err != nil && errs.CodeOf(err) != errs.NotFound {
			// The segment stays queued and drains; only the guard
			// against an early commit is missing, so say so.
			s.startDrain(seg)
			return fmt.Errorf("client: staging: mark inode %d staged: %w", seg.ino, err)
		}
	}
	s.startDrain(seg)
	return nil
}

func (s *stager) startDrain(seg *segment) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if seg.prev != nil {
			select {
			case <-seg.prev:
			case <-s.ctx.Done():
				return
			}
		}
		select {
		case s.sem <- struct{}{}:
		case <-s.ctx.Done():
			return
		}
		err := s.drainRetry(seg)
		<-s.sem
		if err != nil {
			return // closing: the record stays for the next client
		}
		s.finish(seg)
	}()
}

// drainRetry drains seg until it succeeds or the stager closes: the data
// is safe in the staging area meanwhile.
func (s *stager) drainRetry(seg *segment) error {
	backoff := 10 * time.Millisecond
	for {
		err := s.drain(s.ctx, seg)
		if err == nil {
			return nil
		}
		if s.ctx.Err() != nil {
			return err
		}
		s.mu.Lock()
		s.stats.DrainErrors++
		s.stats.LastError = err.Error()
		s.mu.Unlock()
		if pause.For(s.ctx, backoff) != nil {
			return err
		}
		backoff = min(2*backoff, time.Second)
	}
}

// drain writes seg's extents to the file on the targets and syncs them.
// A file removed meanwhile needs nothing.
func (s *stager) drain(ctx context.Context, seg *segment) error {
	var wa wire.Attr // not GetAttrIno: no staged size overlaid
	err := s.c.metaCall(ctx, wire.OpGetAttr, &wire.InoReq{Ino: seg.ino}, &wa)
	if errs.CodeOf(err) == errs.NotFound {
		return nil
	}
	if err != nil {
		return err
	}
	a := inodeAttr(&wa)
	if !a.IsRegular() {
		return nil // the inode number is never reused: not this file
	}
	f, err := s.c.OpenInode(ctx, a, O_WRONLY|oNoStage)
	if err != nil {
		return err
	}
	bufSize := min(s.c.opts.WriteBuffer, drainPiece)
	buf := make([]byte, bufSize)
	var waited time.Duration // yielded to writers, in all
	for _, x := range seg.ext {
		for off := x.Off; off < x.Off+x.Len; {
			n := int(min(int64(bufSize), x.Off+x.Len-off))
			if m, err := seg.dat.ReadAt(buf[:n], off); err != nil && (!errors.Is(err, io.EOF) || m < n) {
				// A data file shorter than its extents: never drain what
				// the buffer held before.
				f.Release(ctx, false)
				return fmt.Errorf("client: staging: read %s: %d of %d bytes at %d: %w", seg.dat.Name(), m, n, off, err)
			}
			if err := s.pace(ctx, &waited); err != nil {
				f.Release(ctx, false)
				return err
			}
			if _, err := f.WriteAtContext(ctx, buf[:n], off); err != nil {
				f.Release(ctx, false)
				return err
			}
			off += int64(n)
		}
	}
	err = f.Release(ctx, true)
	if errs.CodeOf(err) == errs.NotFound {
		return nil // removed while draining
	}
	return err
}

// pace waits while drainGate says the writers need the node; *waited
// accumulates the segment's waiting.
func (s *stager) pace(ctx context.Context, waited *time.Duration) error {
	start := time.Now()
	for {
		now := time.Now()
		busy := int(s.sealing.Load() + s.holds.Load())
		ok, retry := drainGate(now, time.Unix(0, s.lastWrite.Load()), busy, int(s.waiting.Load()), *waited+now.Sub(start))
		if ok {
			*waited += now.Sub(start)
			return nil
		}
		if err := pause.For(ctx, retry); err != nil {
			*waited += time.Since(start)
			return err
		}
	}
}

// finish retires a drained segment: the file's staged mark goes with its
// last segment, then the record and the data file.
func (s *stager) finish(seg *segment) {
	bytes := seg.bytes
	s.mu.Lock()
	st := s.inos[seg.ino]
	s.mu.Unlock()
	st.mu.Lock()
	st.owners[seg.dir.owner]--
	cleared := true
	if st.owners[seg.dir.owner] == 0 {
		backoff := 10 * time.Millisecond
		for {
			err := s.c.metaCall(s.ctx, wire.OpStagedDone, &wire.StagedReq{Ino: seg.ino, Owner: s.ownerOf(seg.dir)}, nil)
			if err == nil {
				break
			}
			if s.ctx.Err() != nil {
				cleared = false // the record stays: the next client drains it again
				break
			}
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
		}
	}
	if !cleared {
		st.owners[seg.dir.owner]++ // still marked; the record stays
	}
	s.mu.Lock()
	st.pending--
	if st.pending == 0 && s.inos[seg.ino] == st {
		delete(s.inos, seg.ino)
		s.noteDrainedLocked(seg.ino, st.size)
	}
	s.stats.Drained++
	s.stats.DrainedBytes += bytes
	s.stats.PendingSegments--
	s.held -= bytes
	s.sealed -= bytes
	s.mu.Unlock()
	st.mu.Unlock()

	var size int64
	if fi, err := seg.dat.Stat(); err == nil {
		size = fi.Size()
	}
	seg.dat.Close()
	if cleared {
		os.Remove(filepath.Join(seg.dir.path, recName(seg.seq)))
		s.mu.Lock()
		keep := seg.dir == s.own && keepForReuse(s.memTotal, s.poolBytes, size)
		if keep {
			s.poolBytes += size // counted now, so that finishes in parallel stay under the cap
		}
		s.mu.Unlock()
		if keep {
			pooled := filepath.Join(seg.dir.path, poolName(seg.seq))
			if err := os.Rename(seg.dat.Name(), pooled); err == nil {
				s.mu.Lock()
				s.pool = append(s.pool, pooled)
				s.mu.Unlock()
			} else {
				os.Remove(seg.dat.Name())
				s.mu.Lock()
				s.poolBytes -= size
				s.mu.Unlock()
			}
		} else {
			os.Remove(seg.dat.Name())
		}
		syncDir(seg.dir.path)
	}
	close(seg.done)
	select {
	case s.drained <- struct{}{}:
	default:
	}
	s.mu.Lock()
	s.cond.Broadcast()
	s.mu.Unlock()
	if cleared {
		s.doneRec(seg.dir)
	}
}

// queueRename adds r to the rename queue and starts its worker.
func (s *stager) queueRename(r *renameRec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renames = append(s.renames, r)
	s.stats.RenamesQueued++
	if !s.renaming {
		s.renaming = true
		s.wg.Add(1)
		go s.runRenames()
	}
}

// deferRename records a rename durably and queues it: it is carried out
// after every rename queued before it, once the metadata service accepts
// it (no staged file left in the scope it commits).
func (s *stager) deferRename(req *wire.RenameReq, oldPath, newPath string, moved movedInodes) error {
	d := s.own
	r := &renameRec{dir: d, seq: d.seq.Add(1), req: *req, done: make(chan struct{}), oldPath: oldPath, newPath: newPath, moved: moved}
	if err := writeRec(d.path, &stageRec{Kind: recRename, Seq: r.seq, Rename: *req}); err != nil {
		return err
	}
	d.left.Add(1)
	s.queueRename(r)
	return nil
}

func (s *stager) runRenames() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if len(s.renames) == 0 || s.ctx.Err() != nil {
			s.renaming = false
			s.mu.Unlock()
			return
		}
		r := s.renames[0]
		s.mu.Unlock()
		backoff := 5 * time.Millisecond
		var err error
		for {
			// Lookups that map names through the queue (absorb.go) learn of
			// each attempt in flight and of its outcome: a rename that
			// happened leaves the queue as it answers.
			s.mu.Lock()
			s.renameSent++
			s.mu.Unlock()
			err = s.c.metaCall(s.ctx, wire.OpRename, &r.req, nil)
			final := errs.CodeOf(err) != errs.Busy && errs.CodeOf(err) != errs.Unavailable
			s.mu.Lock()
			s.renameAnswered++
			if final {
				s.renames = s.renames[1:]
				s.renameDone++
			}
			s.cond.Broadcast()
			s.mu.Unlock()
			if final {
				break
			}
			// Retry when a segment of this client drains, or after a
			// backoff for those of other clients.
			select {
			case <-s.drained:
			case <-time.After(backoff):
			case <-s.ctx.Done():
				s.mu.Lock()
				s.renaming = false
				s.mu.Unlock()
				return // the record stays for the next client
			}
			backoff = min(2*backoff, 200*time.Millisecond)
		}
		os.Remove(filepath.Join(r.dir.path, recName(r.seq)))
		syncDir(r.dir.path)
		s.mu.Lock()
		s.stats.Renamed++
		if err != nil {
			// The source vanished or the target cannot be replaced:
			// what rename(2) would have said, too late to say it.
			s.stats.LastErrors++
			s.stats.LastError = err.Error()
		}
		close(r.done)
		s.cond.Broadcast()
		s.mu.Unlock()
		s.doneRec(r.dir)
	}
}

// idle reports whether nothing is staged or queued.
func (s *stager) idleLocked() bool { return len(s.inos) == 0 && len(s.renames) == 0 }

// wakeOnDone wakes the waiters on s.cond when ctx ends, so that each
// sees ctx.Err(); stop ends the watch.
func (s *stager) wakeOnDone(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
}

// wait returns when nothing is staged or queued, or ctx ends.
func (s *stager) wait(ctx context.Context) error {
	defer s.wakeOnDone(ctx)()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.idleLocked() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.cond.Wait()
	}
	return nil
}

// waitIno returns when file ino has no segment left to drain.
func (s *stager) waitIno(ctx context.Context, ino uint64) error {
	s.mu.Lock()
	st := s.inos[ino]
	var last chan struct{}
	if st != nil {
		last = st.last
	}
	s.mu.Unlock()
	if last == nil {
		return nil
	}
	s.waiting.Add(1) // the drains stop yielding to writers
	defer s.waiting.Add(-1)
	select {
	case <-last:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stagedSize returns the size file ino has once its staged data drains.
func (s *stager) stagedSize(ino uint64) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.inos[ino]; st != nil {
		return st.size, true
	}
	return 0, false
}

// noteDrainedLocked records that ino's last staged segment drained,
// giving it size. s.mu is held.
func (s *stager) noteDrainedLocked(ino uint64, size int64) {
	s.nDrained++
	s.recent[s.nDrained%recentDrains] = drainedIno{ino: ino, n: s.nDrained, size: size}
}

// drainedSince returns the largest size drains after the token n
// (stagedToken) gave ino; ok is false if none did. Only the last
// recentDrains drains are remembered: a request that crossed more may miss
// one.
func (s *stager) drainedSince(ino, n uint64) (size int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nDrained == n {
		return 0, false
	}
	for _, d := range s.recent {
		if d.ino == ino && d.n > n {
			size, ok = max(size, d.size), true
		}
	}
	return size, ok
}

func (s *stager) queuedRenames() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.renames)
}

// close waits (until ctx ends) for the drains and renames, then stops
// the rest, which stay in the staging area for the next client.
func (s *stager) close(ctx context.Context) {
	s.wait(ctx)
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	idle := s.idleLocked()
	s.mu.Unlock()
	if idle && s.own.left.Load() == 0 {
		os.RemoveAll(s.own.path)
		syncDir(s.base)
	}
	s.own.lock.Close()
}
