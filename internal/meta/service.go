package meta

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/pause"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/qos"
)

// RootIno is the inode number of the root directory.
const RootIno = 1

const (
	// MaxNameLen bounds a directory entry's name, in bytes.
	MaxNameLen = 255
	// MaxPathLen bounds a path given to Resolve and a symlink's target.
	MaxPathLen = 4096
	// MaxSymlinks is how many symlinks one Resolve follows before errs.Loop.
	MaxSymlinks = 40
	// MaxXattrName and MaxXattrValue bound extended attributes.
	MaxXattrName  = 255
	MaxXattrValue = 64 << 10
	// DefaultStripeCount is the stripe count used when a layout says 0:
	// min(DefaultStripeCount, number of targets).
	DefaultStripeCount = 4

	inoBlock = 1024 // inode numbers reserved per KV update
)

// Options configures a Service.
type Options struct {
	// DB stores the namespace. Required. The Service does not close it.
	DB kv.DB
	// Targets reaches the storage targets. Required.
	Targets Targets
	// Logger receives background errors; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock for timestamps; nil means time.Now.
	Now func() time.Time
	// DefaultLayout is the layout of files in directories that set none.
	// StripeSize 0 means placement.DefaultStripeSize; StripeCount 0 means
	// min(DefaultStripeCount, number of targets). It names no targets.
	DefaultLayout placement.Layout
	// GCInterval is how often Run retries pending chunk removals
	// (default 10s); removals queued by this Service start at once.
	GCInterval time.Duration
	// InlineMax is the most bytes of a file kept in the metadata (inline
	// data, inline.go): 0 means DefaultInlineMax, negative none.
	InlineMax int
	// NoAudit turns the audit trail off (audit.go): permission, owner and
	// layout changes, removals and renames are then not recorded. The
	// trail already written stays and can still be listed and verified.
	NoAudit bool
	// QosOff serves every namespace request at once, still counting them
	// by class (qosgate.go); QosInService bounds those served at once
	// otherwise (0: DefaultQosInService).
	QosOff       bool
	QosInService int
	// SharedDB says other metadata services change DB too (an etcd
	// engine): the change feed (OpWatch) then reports itself incomplete,
	// and mounts do not lengthen their kernel caches on it.
	SharedDB bool
}

// DefaultInlineMax is Options.InlineMax's default; MaxInlineMax bounds it
// (an inline write rewrites a file's inline bytes in one transaction).
// ADR 0009 measures the choice.
const (
	DefaultInlineMax = 16 << 10
	MaxInlineMax     = 1 << 20
)

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DefaultLayout.StripeSize == 0 {
		o.DefaultLayout.StripeSize = placement.DefaultStripeSize
	}
	if o.GCInterval <= 0 {
		o.GCInterval = 10 * time.Second
	}
	switch {
	case o.InlineMax == 0:
		o.InlineMax = DefaultInlineMax
	case o.InlineMax < 0:
		o.InlineMax = 0
	}
}

// Validate checks the options after defaults are applied (New applies them:
// a zero Logger, Now, DefaultLayout.StripeSize or GCInterval is fine).
func (o Options) Validate() error {
	o.setDefaults()
	if o.DB == nil {
		return errs.New(errs.Invalid, "meta: Options.DB is required")
	}
	if o.Targets == nil {
		return errs.New(errs.Invalid, "meta: Options.Targets is required")
	}
	if len(o.DefaultLayout.Chains) != 0 {
		return errs.New(errs.Invalid, "meta: Options.DefaultLayout must not name chains")
	}
	if err := o.DefaultLayout.Validate(); err != nil {
		return fmt.Errorf("meta: Options.DefaultLayout: %w", err)
	}
	if o.InlineMax > MaxInlineMax {
		return errs.New(errs.Invalid, "meta: Options.InlineMax %d is over the limit of %d", o.InlineMax, MaxInlineMax)
	}
	if o.QosInService < 0 {
		return errs.New(errs.Invalid, "meta: Options.QosInService %d is negative", o.QosInService)
	}
	return nil
}

// Service is the metadata service: the namespace of one file system stored
// in a kv.DB. Its methods are safe for concurrent use. Run drives its
// background work (chunk garbage collection, counter flushes); Close stops it.
type Service struct {
	// tierRemoveHook, if set (tests), runs in a backend's removal between
	// its mark and its scan.
	tierRemoveHook func()

	db      kv.DB
	targets Targets
	log     *slog.Logger
	now     func() time.Time
	defLay  placement.Layout
	gcEvery time.Duration
	fsid    string
	inlMax  int // Options.InlineMax
	auditOn bool
	// auditInline (benchmarks only): chain each entry in the change's
	// transaction instead of through the sealer (appendAuditInline).
	auditInline bool
	// noSealer (benchmarks only): Run does not seal the audit trail.
	noSealer bool

	sealMu     sync.Mutex    // one audit sealing pass at a time
	sealCursor []byte        // guarded by sealMu: the last pending key sealed
	sealKick   chan struct{} // buffered(1): an audited change committed

	alloc struct {
		sync.Mutex
		next, limit uint64 // reserved inode numbers [next, limit)
	}

	// inodes is the inode count last stored under keyInodeCount; delta
	// counts creations minus frees since. Statfs reports their sum.
	inodes     atomic.Int64
	inodeDelta atomic.Int64
	flushMu    sync.Mutex // serializes counter flushes

	places placeCache // the placement view creates reuse (layout.go)

	feed *feed // the namespace change feed (feed.go)
	// shared: other metadata services change db too (Options.SharedDB:
	// etcd, whose transactions are small).
	shared bool

	gate *qos.Gate // QoS scheduling of namespace requests (qosgate.go)

	restores restoreCounters // RestoreTotals (tier.go)
	cuts     cutCounters     // CutTotals (cut.go)

	gcMu   sync.Mutex    // one garbage collection pass at a time
	gcKick chan struct{} // buffered(1): a removal was queued

	closeOnce sync.Once
	closed    chan struct{}
	runWG     sync.WaitGroup
	runMu     sync.Mutex // guards runWG.Add against Close
	isClosed  bool       // guarded by runMu
}

// New opens the file system stored in opts.DB, formatting a new one (root
// directory, FSID) if the database is empty.
func New(ctx context.Context, opts Options) (*Service, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.setDefaults()
	s := &Service{
		db:      opts.DB,
		targets: opts.Targets,
		log:     opts.Logger,
		now:     opts.Now,
		defLay:  opts.DefaultLayout,
		gcEvery: opts.GCInterval,
		inlMax:  opts.InlineMax,
		auditOn: !opts.NoAudit,
		shared:  opts.SharedDB,
		gcKick:  make(chan struct{}, 1),

		sealKick: make(chan struct{}, 1),
		closed:   make(chan struct{}),
		feed:     newFeed(!opts.SharedDB),
		gate:     qos.NewGate(opts.QosOff, cmp.Or(opts.QosInService, DefaultQosInService)),
	}
	if err := s.format(ctx); err != nil {
		return nil, err
	}
	s.reloadQos(ctx)
	return s, nil
}

// format loads the superblock, or writes a new file system if there is none.
func (s *Service) format(ctx context.Context) error {
	var sb superblock
	var count uint64
	now := s.nowNs()
	err := s.update(ctx, func(tx kv.Txn) error {
		v, err := tx.Get(keySuper)
		switch {
		case err == nil:
			if sb, err = decodeSuperblock(v); err != nil {
				return err
			}
			switch sb.Version {
			case FormatVersion:
			case 1:
				// Version 2 only added records; version-1 inodes read as
				// files with chunks (decodeInode).
				sb.Version = FormatVersion
				tx.Set(keySuper, sb.encode())
			default:
				return errs.New(errs.Corruption, "meta: database has metadata format version %d, this build reads %d (and 1)", sb.Version, FormatVersion)
			}
			if v, err := tx.Get(keyInodeCount); err == nil {
				count, err = parseU64(v, "inode counter")
				return err
			} else if !errors.Is(err, kv.ErrNotFound) {
				return err
			}
			return nil
		case !errors.Is(err, kv.ErrNotFound):
			return err
		}
		var id [16]byte
		if _, err := crand.Read(id[:]); err != nil {
			return fmt.Errorf("meta: generate FSID: %w", err)
		}
		sb = superblock{Version: FormatVersion, FSID: hex.EncodeToString(id[:])}
		tx.RequireSync() // targets get stamped with the FSID
		root := &inode{Mode: modeDir | 0o755, Nlink: 2, Atime: now, Mtime: now, Ctime: now, Parent: RootIno, Flags: newInodeFlags}
		tx.Set(keySuper, sb.encode())
		tx.Set(inodeKey(RootIno), root.encode())
		tx.Set(dirTimeKey(RootIno), dirTimes{now, now}.encode())
		tx.Set(keyNextIno, u64Value(RootIno+1))
		tx.Set(keyInodeCount, u64Value(1))
		count = 1
		return nil
	})
	if err != nil {
		return fmt.Errorf("meta: open file system: %w", err)
	}
	s.fsid = sb.FSID
	s.inodes.Store(int64(count))
	return nil
}

// FSID returns the file system's identifier.
func (s *Service) FSID() string { return s.fsid }

// Run does the background work until ctx is done or Close is called:
// retrying queued chunk removals (at once when one is queued, and every
// GCInterval), storing the inode counter and sealing the audit trail. It returns nil when stopped.
func (s *Service) Run(ctx context.Context) error {
	s.runMu.Lock()
	if s.isClosed {
		s.runMu.Unlock()
		return nil
	}
	s.runWG.Add(1)
	s.runMu.Unlock()
	defer s.runWG.Done()

	ctx, cancel := context.WithCancel(ctx)
	var watch sync.WaitGroup
	defer watch.Wait()
	defer cancel()
	watch.Go(func() { // cancels work in flight on Close
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	})
	if !s.noSealer {
		watch.Go(func() { s.runSealer(ctx) })
	}
	t := time.NewTicker(s.gcEvery)
	defer t.Stop()
	// Migrations whose lease ran out hold writers back: look for them
	// every second (an empty scan when there are none).
	mt := time.NewTicker(time.Second)
	defer mt.Stop()
	var last time.Time // start of the last pass
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-mt.C:
			if err := s.abortExpiredMigrations(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("meta: aborting migrations whose lease ran out failed; will retry", "err", err)
			}
			if err := s.thawExpiredReleases(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("meta: thawing releases whose lease ran out failed; will retry", "err", err)
			}
			s.reloadQos(ctx)
			continue
		case <-t.C:
		case <-s.gcKick:
			// Under a stream of unlinks, passes wait for each other a
			// little, so that each takes a batch of files rather than one
			// (every pass commits its dequeue and the inode counter).
			if d := gcPace - time.Since(last); d > 0 {
				if pause.For(ctx, d) != nil {
					return nil
				}
			}
		}
		last = time.Now()
		if err := s.CollectGarbage(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("meta: chunk garbage collection incomplete; will retry", "err", err)
		}
		if err := s.flushCounters(ctx, true); err != nil && ctx.Err() == nil {
			s.log.Warn("meta: storing the inode counter failed", "err", err)
		}
	}
}

// Close stops Run, waits for it, and stores the inode counter. It does not
// close the DB or the Targets. It is idempotent.
func (s *Service) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.runMu.Lock()
		s.isClosed = true
		s.runMu.Unlock()
		close(s.closed)
		s.runWG.Wait()
		s.gate.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = s.flushCounters(ctx, false)
	})
	return err
}

func (s *Service) nowNs() int64 { return s.now().UnixNano() }

// Sync returns once every operation that returned before the call is
// durable against a crash of the machine (kv.DB.Sync): fsync, fsyncdir,
// syncfs and the close of a synchronous file through the mount, the
// client library's File.Sync and Close, and S3 PUTs ask for it. It is
// cheap when there is nothing to sync, and returns at once on engines that
// sync every commit.
func (s *Service) Sync(ctx context.Context) error {
	if err := s.db.Sync(ctx); err != nil {
		return fmt.Errorf("meta: sync: %w", err)
	}
	return nil
}

// update runs fn in a KV transaction. The engine retries conflicts itself;
// if it gives up, update tries again a few times after a random pause so
// that heavy contention on one directory does not surface as an error.
func (s *Service) update(ctx context.Context, fn func(tx kv.Txn) error) error {
	var ft *feedTxn
	if s.feed.watched(time.Now()) {
		// Note what the transaction changes for the feed's watchers; a
		// retried function starts its notes again.
		inner := fn
		fn = func(tx kv.Txn) error {
			ft = &feedTxn{Txn: tx}
			return inner(ft)
		}
	}
	for attempt := 0; ; attempt++ {
		err := s.db.Update(ctx, fn)
		if err == nil && ft != nil {
			s.feed.publish(originOf(ctx), ft.changes)
		}
		if err == nil || attempt >= 10 || !errors.Is(err, errs.ErrConflict) {
			return err
		}
		d := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6)))
		if pause.For(ctx, d) != nil {
			return err
		}
	}
}

// allocIno returns a new inode number. Numbers are reserved from the KV in
// blocks and never reused, even across restarts, so that a chunk ID
// (ino, slot) names one file's data forever.
func (s *Service) allocIno(ctx context.Context) (uint64, error) {
	s.alloc.Lock()
	defer s.alloc.Unlock()
	if s.alloc.next == s.alloc.limit {
		var start uint64
		err := s.update(ctx, func(tx kv.Txn) error {
			// Durable before any number of the block is used: a power
			// loss must not hand the same numbers out again, since chunks
			// of the lost files may be on the targets.
			tx.RequireSync()
			v, err := tx.Get(keyNextIno)
			if err != nil {
				return fmt.Errorf("meta: read inode allocator: %w", err)
			}
			if start, err = parseU64(v, "inode allocator"); err != nil {
				return err
			}
			tx.Set(keyNextIno, u64Value(start+inoBlock))
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("meta: reserve inode numbers: %w", err)
		}
		s.alloc.next, s.alloc.limit = start, start+inoBlock
	}
	ino := s.alloc.next
	s.alloc.next++
	return ino, nil
}

// flushCounters adds the inode count delta to the stored counter. A crash
// loses the delta since the last flush: the counter is approximate.
//
// It also reloads the stored counter, so that Statfs counts the inodes that
// other services sharing the DB created and stored; with no delta it only
// does that, and only if reload is set.
func (s *Service) flushCounters(ctx context.Context, reload bool) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	d := s.inodeDelta.Swap(0)
	if d == 0 && !reload {
		return nil
	}
	var stored uint64
	err := s.update(ctx, func(tx kv.Txn) error {
		stored = 0
		v, err := tx.Get(keyInodeCount)
		if err == nil {
			if stored, err = parseU64(v, "inode counter"); err != nil {
				return err
			}
		} else if !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		stored = uint64(max(int64(stored)+d, 0))
		if d != 0 {
			tx.Set(keyInodeCount, u64Value(stored))
		}
		return nil
	})
	if err != nil {
		s.inodeDelta.Add(d)
		return fmt.Errorf("meta: store inode counter: %w", err)
	}
	s.inodes.Store(int64(stored))
	return nil
}

func (s *Service) kickGC() {
	select {
	case s.gcKick <- struct{}{}:
	default:
	}
}
