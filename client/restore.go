package client

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pause"
	"github.com/sluice-fs/sluice/internal/tier"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Restores of released files (ADR 0016, docs/tier.md): the first read of a
// released file starts one in the background, a write or truncate waits
// for one, `sluice hsm restore` runs one. Reads keep going to the bucket
// until the restore's commit makes the file archived, so a reader never
// sees chunks half written. Across clients, the restore lease in the file's
// HSM record (OpHsmClaim) picks one restorer; the others wait for it and
// take over if its lease expires (a dead client). The decisions are the
// pure functions below; the rest moves bytes.

// restoreAction is what a client does next with a released file's restore.
type restoreAction int

const (
	restoreFinished restoreAction = iota // not released any more: nothing to do
	restoreCopy                          // this client holds the lease: copy the bytes
	restoreWait                          // another client holds it: wait, then ask again
)

// nextRestoreStep decides from the service's answer to this client's
// (me's) claim.
func nextRestoreStep(c wire.HsmClaim, me uint64) restoreAction {
	switch {
	case c.State != wire.HsmReleased:
		return restoreFinished
	case c.Owner == me:
		return restoreCopy
	}
	return restoreWait
}

// restorePoll is how long a waiting client sleeps before it asks again,
// after polls earlier polls: 20 ms, doubling with each poll (a restore of
// a few MiB takes milliseconds: a truncate or read that waits for another
// client's restore is not held a second for it), but never past the
// holder's time left (it may be dead), nor over a second, nor under 20 ms.
func restorePoll(c wire.HsmClaim, polls int) time.Duration {
	backoff := 20 * time.Millisecond << min(polls, 6)
	left := max(time.Duration(c.LeftMs)*time.Millisecond, 20*time.Millisecond)
	return min(backoff, left, time.Second)
}

// restoreRetry is how long after a failed restore a read of the same file
// waits before it starts another one: a backend that is down is then not
// asked again by every read.
const restoreRetry = 2 * time.Second

// mayStartRestore says whether a read of a released file starts its
// restore: on unless the options turn it off, not again soon after one
// failed, and not while MaxQueuedReadRestores restores that reads started
// wait for a slot already.
func mayStartRestore(off bool, lastFail, now time.Time, waiting int) bool {
	return !off && (lastFail.IsZero() || now.Sub(lastFail) >= restoreRetry) && waiting < MaxQueuedReadRestores
}

// DefaultTierReadRestores is Options.TierReadRestores's default.
const DefaultTierReadRestores = 2

// MaxQueuedReadRestores bounds the restores started by reads that wait
// for a slot (Options.TierReadRestores) in one client.
const MaxQueuedReadRestores = 4096

// readSource is where a read of a File goes.
type readSource int

const (
	fromTargets readSource = iota
	fromTier
	fromRefresh // ask for the attributes again first: a restore finished
)

// readFrom decides from the File's view (released or not) and whether a
// restore it waited on or started has finished well since.
func readFrom(released, restoredSince bool) readSource {
	switch {
	case !released:
		return fromTargets
	case restoredSince:
		return fromRefresh
	}
	return fromTier
}

// maxRestoreSums is the most block checksums a restore's commit carries
// (2 MiB of them, well within a request's 4 MiB: files up to 512 GiB).
const maxRestoreSums = 512 << 10

// restoreParallel is how many ranged GETs (of restoreUnit bytes) a restore
// keeps in flight, each followed by its chunk writes.
const restoreParallel = 8

// restoreJob is one restore of a file run by this client.
type restoreJob struct {
	done chan struct{}
	err  error // set before done is closed
	// urgent is closed when the restore may run without waiting for a
	// read slot: at once for a restore asked for by a write, a truncate or
	// a command, or when one of those joins a queued read's restore.
	urgent   chan struct{}
	promoted bool // urgent closed; under restorer.mu
	// pre is the whole object of copy preCopy, fetched and checked by a
	// reader of this client while the restore waited (restorer.offer):
	// the restore writes it instead of fetching it again. Under
	// restorer.mu.
	pre     []byte
	preCopy copyID
}

// copyID names one copy of a file in the bucket: the generation of its
// archive, and the ETag an imported object's reads are pinned to (every
// import has generation 0, and a re-run of the import can make a
// released file another object: tier import's refresh).
type copyID struct {
	gen  uint64
	etag string
}

// copyOf returns the copy record r names.
func copyOf(r *wire.HsmRecord) copyID { return copyID{r.Gen, r.ETag} }

// promote lets a queued job run without a read slot. Under restorer.mu.
func (j *restoreJob) promote() {
	if !j.promoted {
		j.promoted = true
		close(j.urgent)
	}
}

// finished reports whether the job ended, and well.
func (j *restoreJob) finished() (ended, ok bool) {
	select {
	case <-j.done:
		return true, j.err == nil
	default:
		return false, false
	}
}

// restorer runs a client's restores. Each job's goroutine is owned by it:
// Close cancels ctx and waits for them.
type restorer struct {
	owner uint64 // this client's lease owner ID, random
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup

	claims, waits, copied, failed atomic.Uint64 // RestoreStats
	// readSlots holds a token per running restore that a read started
	// (nil: no limit).
	readSlots chan struct{}

	mu       sync.Mutex
	jobs     map[uint64]*restoreJob // running or queued, by inode
	lastFail map[uint64]time.Time   // when the last restore of an inode failed
	waiting  int                    // jobs waiting for a read slot
	preBytes int64                  // bytes of the jobs' pre, at most maxPreBytes
	reused   atomic.Uint64          // restores that wrote a reader's bytes (RestoreStats.Reused)
}

// maxPreObject is the largest object a reader's fetch hands to a waiting
// restore (restorer.offer), and maxPreBytes the most such bytes one
// client holds for its queued restores: beyond them, a restore fetches
// the object itself.
const (
	maxPreObject = 8 << 20
	maxPreBytes  = 64 << 20
)

// offer gives the restore of ino that is queued or running the whole
// object data of copy id that a reader fetched and checked, if the job
// has not taken bytes yet and the client's budget allows; data is never
// changed afterwards.
func (r *restorer) offer(ino uint64, id copyID, data []byte) {
	if len(data) > maxPreObject {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.jobs[ino]
	if j == nil || j.pre != nil || r.preBytes+int64(len(data)) > maxPreBytes {
		return
	}
	j.pre, j.preCopy = data, id
	r.preBytes += int64(len(data))
}

// take returns (and forgets) the bytes a reader offered to the restore of
// ino, if they are the whole object of copy id, size bytes long.
func (r *restorer) take(ino uint64, id copyID, size int64) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.jobs[ino]
	if j == nil || j.pre == nil {
		return nil
	}
	data, ok := j.pre, j.preCopy == id && int64(len(j.pre)) == size
	r.preBytes -= int64(len(j.pre))
	j.pre = nil
	if !ok {
		return nil
	}
	return data
}

// RestoreStats counts the restores of released files this client ran.
type RestoreStats struct {
	Claims uint64 // answers to this client's claims of a restore lease (renewals not counted)
	Waits  uint64 // of those, the ones that said another client holds the lease
	Copied uint64 // restores whose bytes this client copied and committed
	// Reused counts the restores that wrote the object a reader of this
	// client had fetched while they waited, instead of fetching it again.
	Reused uint64
	// Shared counts the ranged GETs of released files that a read or a
	// restore of this client took from another's fetch of the same range
	// (a reader's and the restore it started ask for the same segments)
	// instead of asking the backend again.
	Shared uint64
	Failed uint64 // restores that ended with an error
	// Running and Waiting are the restores running now and, of those
	// that reads started, the ones waiting for a slot.
	Running, Waiting int
}

// RestoreStats returns the counts so far.
func (c *Client) RestoreStats() RestoreStats {
	r := &c.restores
	r.mu.Lock()
	running, waiting := len(r.jobs)-r.waiting, r.waiting
	r.mu.Unlock()
	return RestoreStats{Claims: r.claims.Load(), Waits: r.waits.Load(), Copied: r.copied.Load(), Reused: r.reused.Load(), Shared: c.share.joined.Load(), Failed: r.failed.Load(),
		Running: running, Waiting: waiting}
}

func (r *restorer) init(slots int) {
	if slots > 0 {
		r.readSlots = make(chan struct{}, slots)
	}
	var b [8]byte
	for r.owner == 0 || r.owner == peekOwner {
		rand.Read(b[:])
		r.owner = binary.BigEndian.Uint64(b[:])
	}
	r.ctx, r.stop = context.WithCancel(context.Background())
	r.jobs = make(map[uint64]*restoreJob)
	r.lastFail = make(map[uint64]time.Time)
}

func (r *restorer) close() {
	// Under mu, so that no job starts (wg.Go) once Wait may run.
	r.mu.Lock()
	r.stop()
	r.mu.Unlock()
	r.wg.Wait()
}

// peekOwner is the owner ID of a claim that only looks: a drop by a
// client that does not hold the lease changes nothing and answers with
// the holder. No client's owner ID is peekOwner.
const peekOwner = ^uint64(0)

// RestoreLease is who restores a released file.
type RestoreLease struct {
	Holder uint64        // the holder's owner ID; 0: no restore runs
	Epoch  uint64        // grants since the release; > 1 after a takeover
	Left   time.Duration // until the holder's lease expires
}

// HsmRestoring returns the restore lease of the file at p (the zero
// RestoreLease when it is not released or no restore runs). It changes
// nothing.
func (c *Client) HsmRestoring(ctx context.Context, p string) (RestoreLease, error) {
	a, err := c.regular(ctx, p)
	if err != nil {
		return RestoreLease{}, opErr("hsm restoring", p, err)
	}
	var cl wire.HsmClaim
	err = c.metaCall(ctx, wire.OpHsmClaim, &wire.HsmClaimReq{Ino: a.Ino, Owner: peekOwner, Drop: true}, &cl)
	if err != nil {
		return RestoreLease{}, opErr("hsm restoring", p, err)
	}
	return RestoreLease{Holder: cl.Owner, Epoch: cl.Epoch, Left: time.Duration(cl.LeftMs) * time.Millisecond}, nil
}

// startRestore returns the running or queued restore of ino or starts
// one. A read (demand false) starts none when mayStartRestore says no; it
// then returns nil. A restore a read starts runs once one of the read
// slots (Options.TierReadRestores) is free, or at once when a demand
// joins it.
func (c *Client) startRestore(ino uint64, demand bool) *restoreJob {
	r := &c.restores
	r.mu.Lock()
	defer r.mu.Unlock()
	if j := r.jobs[ino]; j != nil {
		if demand {
			j.promote()
		}
		return j
	}
	if !demand && !mayStartRestore(c.opts.TierNoRestoreOnRead, r.lastFail[ino], time.Now(), r.waiting) {
		return nil
	}
	if r.ctx.Err() != nil {
		return nil // closing
	}
	j := &restoreJob{done: make(chan struct{}), urgent: make(chan struct{})}
	queued := !demand && r.readSlots != nil
	if queued {
		r.waiting++
	} else {
		j.promote()
	}
	r.jobs[ino] = j
	r.wg.Go(func() {
		var err error
		if queued {
			var slot bool
			select {
			case r.readSlots <- struct{}{}:
				slot = true
			case <-j.urgent:
			case <-r.ctx.Done():
				err = r.ctx.Err()
			}
			r.mu.Lock()
			r.waiting--
			r.mu.Unlock()
			if slot {
				defer func() { <-r.readSlots }()
			}
		}
		if err == nil {
			err = c.runRestore(r.ctx, ino)
		}
		r.mu.Lock()
		delete(r.jobs, ino)
		r.preBytes -= int64(len(j.pre))
		j.pre = nil
		if err != nil {
			r.lastFail[ino] = time.Now()
			r.failed.Add(1)
		} else {
			delete(r.lastFail, ino)
		}
		j.err = err
		close(j.done)
		r.mu.Unlock()
	})
	return j
}

// restore restores ino (or joins the restore running) and waits for it.
func (c *Client) restore(ctx context.Context, ino uint64) error {
	j := c.startRestore(ino, true)
	if j == nil {
		return errs.New(errs.Unavailable, "client: restore of inode %d: the client is closing", ino)
	}
	select {
	case <-j.done:
		return j.err
	case <-ctx.Done():
		return fmt.Errorf("restore of released inode %d (it goes on in the background): %w", ino, ctx.Err())
	}
}

// runRestore claims the restore lease of released file ino and copies it,
// or waits while another client holds the lease, until the file is not
// released any more.
func (c *Client) runRestore(ctx context.Context, ino uint64) error {
	me := c.restores.owner
	lease := uint32(c.opts.TierRestoreLease / time.Millisecond)
	busy := 20 * time.Millisecond
	polls := 0
	for {
		// One round trip claims the lease of whatever copy the file has
		// now (gen 0) and answers with its record and attributes.
		var claim wire.HsmClaim
		var rec wire.HsmRecord
		var attr *wire.Attr
		var data uint64 // the data ID the restore writes under (0: the file's)
		err := c.metaCall(ctx, wire.OpHsmClaim, &wire.HsmClaimReq{Ino: ino, Owner: me, LeaseMs: lease, Full: true}, &claim)
		if err == nil {
			if claim.Full != nil {
				rec, attr, data = claim.Full.Record, &claim.Full.Attr, claim.Full.Data
			} else if rec, err = c.hsmGet(ctx, ino); err == nil && rec.Gen != claim.Gen { // an older service
				err = errs.New(errs.Stale, "client: inode %d was archived again during its claim", ino)
			}
		}
		wait := time.Duration(0)
		switch {
		case errs.CodeOf(err) == errs.Busy: // the release's chunk removal is not done yet
			wait, busy = busy, min(2*busy, time.Second)
		case errs.CodeOf(err) == errs.Stale: // archived again meanwhile: look again
		case err != nil:
			return err
		default:
			if claim.State == wire.HsmReleased {
				c.restores.claims.Add(1)
			}
			switch nextRestoreStep(claim, me) {
			case restoreFinished:
				return nil
			case restoreCopy:
				return c.copyRestore(ctx, ino, &rec, attr, data)
			case restoreWait:
				c.restores.waits.Add(1)
				wait = restorePoll(claim, polls)
				polls++
			}
		}
		if err := pause.For(ctx, wait); err != nil {
			return err
		}
	}
}

// errLeaseLost stops a restore whose lease another client took over.
var errLeaseLost = errs.New(errs.Stale, "client: the restore lease was taken over by another client")

// copyRestore copies the object of released file ino to its chunks under
// data ID data (the lease's: ADR 0023; 0: the file's own) while renewing
// the lease, syncs them and commits (OpHsmRestored), which moves the file
// to data. On failure it gives the lease up, so that another client may
// start at once.
func (c *Client) copyRestore(ctx context.Context, ino uint64, rec *wire.HsmRecord, attr *wire.Attr, data uint64) (err error) {
	me := c.restores.owner
	lease := c.opts.TierRestoreLease
	defer func() {
		if err != nil && !errors.Is(err, errLeaseLost) {
			dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.TierTimeout)
			c.metaCall(dctx, wire.OpHsmClaim, &wire.HsmClaimReq{Ino: ino, Gen: rec.Gen, Owner: me, Drop: true}, &wire.HsmClaim{})
			dcancel()
		}
	}()
	renew := func(ctx context.Context) error {
		var cl wire.HsmClaim
		err := c.metaCall(ctx, wire.OpHsmClaim, &wire.HsmClaimReq{Ino: ino, Gen: rec.Gen, Owner: me, LeaseMs: uint32(lease / time.Millisecond)}, &cl)
		if err == nil && nextRestoreStep(cl, me) != restoreCopy {
			err = errLeaseLost
		}
		return err
	}
	var sums []uint32
	err = whileRenewing(ctx, lease/3, renew, func(ctx context.Context) (err error) {
		sums, err = c.copyObject(ctx, ino, rec, attr, data)
		return err
	})
	if err != nil {
		return fmt.Errorf("restore of released inode %d from backend %q: %w", ino, rec.Backend, err)
	}
	var r wire.HsmRecord
	if err := c.metaCall(ctx, wire.OpHsmRestored, &wire.HsmClaimReq{Ino: ino, Gen: rec.Gen, Owner: me, Sums: sums}, &r); err != nil {
		return fmt.Errorf("restore of released inode %d: commit: %w", ino, err)
	}
	c.restores.copied.Add(1)
	c.share.dropIno(ino) // reads go to the chunks now
	return nil
}

// whileRenewing runs fn while calling renew every period (a lease that
// fn's work needs); a renewal that fails cancels fn, and its error is
// returned instead of fn's.
func whileRenewing(ctx context.Context, every time.Duration, renew, fn func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil) // stops the renewals before the wait above
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := renew(ctx); err != nil && ctx.Err() == nil {
				cancel(err)
				return
			}
		}
	})
	err := fn(ctx)
	if cause := context.Cause(ctx); err != nil && cause != nil && cause != context.Canceled {
		err = cause
	}
	return err
}

// copyObject writes rec's object to file ino's chunks under data ID data
// (0: the file's own), every block checked, cuts each chunk to its size in
// the file and syncs them. Nobody else writes under the lease's data ID:
// a client whose lease was taken over writes under its own. For a record
// without block checksums (imported from a listing: the GETs were pinned
// to its ETag) it returns the CRC32C of each block it copied.
func (c *Client) copyObject(ctx context.Context, ino uint64, rec *wire.HsmRecord, a *wire.Attr, data uint64) ([]uint32, error) {
	st, err := c.tierStore(ctx, rec.Backend)
	if err != nil {
		return nil, err
	}
	var ia InodeAttr
	if a != nil {
		c.overlayStaged(a)
		ia = inodeAttr(a)
	} else if ia, err = c.GetAttrIno(ctx, ino); err != nil {
		return nil, err
	}
	if data != 0 {
		ia.layout.Data = data
	}
	f, err := c.OpenInode(ctx, ia, O_RDONLY|oNoStage)
	if err != nil {
		return nil, err
	}
	// The layout names the lease's data ID, not the file's (still
	// released): the layout lease must not replace it, which would also
	// wait for this very restore.
	f.pinned = true
	// By block; each unit fills its own. A file over maxRestoreSums
	// blocks gets none (its record stays without; a release then refuses
	// it).
	var sums []uint32
	if n := tier.Blocks(rec); len(rec.BlockCRCs) == 0 && n <= maxRestoreSums {
		sums = make([]uint32, n)
	}
	defer f.Release(ctx, false)
	size := int64(rec.Size)
	// A reader of this client may have fetched and checked the whole
	// object while the restore waited: write those bytes, fetch nothing.
	pre := c.restores.take(ino, copyOf(rec), size)
	if pre != nil {
		c.restores.reused.Add(1)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(restoreParallel)
	for off := int64(0); off < size; off += restoreUnit {
		n := min(restoreUnit, size-off)
		g.Go(func() error {
			var buf []byte
			if pre != nil {
				buf = pre[off : off+n]
			} else if b, err := c.sharedUnit(gctx, st, ino, rec, off, n); err != nil {
				return err
			} else if buf = b; buf == nil {
				buf = make([]byte, n)
				if err := c.tierGet(gctx, st, rec, off, buf); err != nil {
					return err
				}
			}
			if sums != nil {
				tier.BlockSums(rec, off, buf, sums)
			}
			return f.writeChunks(gctx, off, buf)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	// Every byte below the size is written now; cutting each chunk at its
	// length in the file drops what a refused write may have left past it
	// (and is a no-op where nothing is there). After the writes, not
	// before: a cut of a missing chunk to a positive length would create
	// it and sync it empty, a second sync per chunk. A cut syncs its chunk
	// on every replica, so it covers the writes: no chunk sync is left to
	// send. Nor a metadata sync: the restore changed no metadata that must
	// be durable before OpHsmRestored (the commit itself follows the
	// service's durability window; if a power loss takes it, the file is
	// released again, its copy still in the tier).
	if err := f.cutChunks(ctx, size); err != nil {
		return nil, err
	}
	f.werrMu.Lock()
	clear(f.dirty)
	f.werrMu.Unlock()
	return sums, nil
}

// sharedUnit returns the n bytes at off of released file ino's copy rec
// (in store st) for its restore from the client's tierShare: a reader's
// fetch of that range, in flight (waited for) or done; or, if none is
// registered, the restore's own fetch, registered there for the readers,
// whose error it returns. It returns nil and no error when the restore
// must fetch the range itself (the reader's fetch failed, or ctx ended
// while waiting for it).
func (c *Client) sharedUnit(ctx context.Context, st tier.Store, ino uint64, rec *wire.HsmRecord, off, n int64) ([]byte, error) {
	bs := int64(rec.BlockSize)
	k := shareKey{ino: ino, gen: rec.Gen, etag: rec.ETag, off: off, n: n}
	fresh := &tierFetch{first: off / bs, n: (n + bs - 1) / bs, done: make(chan struct{}), shared: &k}
	fe, mine := c.share.join(k, fresh)
	if !mine {
		if fe.wait(ctx) != nil {
			return nil, nil
		}
		return fe.data, nil
	}
	buf := make([]byte, n)
	fe.err = c.tierGet(ctx, st, rec, off, buf)
	if fe.err == nil {
		fe.data = buf
	}
	close(fe.done)
	c.share.done(k, fe)
	return fe.data, fe.err
}

// restoreBeforeWriteLocked restores the released file f (waiting for it,
// under ctx) and learns its attributes again, which it leaves in a; f.mu
// is held. A file still released afterwards (released again meanwhile)
// fails with errReleased.
func (f *File) restoreBeforeWriteLocked(ctx context.Context, a *wire.Attr) error {
	if err := f.c.restore(ctx, f.ino); err != nil {
		return err
	}
	if err := f.c.metaCall(ctx, wire.OpGetAttr, &wire.InoReq{Ino: f.ino}, a); err != nil {
		return err
	}
	f.learn(a)
	f.learnLayout(a)
	if a.Flags&wire.AttrReleased != 0 {
		return errReleased
	}
	return nil
}

// readReleased reads dst at off of a file this File last saw released:
// from the bucket (readTier), starting the file's restore in the
// background if none runs; once a restore it started or joined has
// finished, from the targets if the attributes say so. A read that fails
// because the file has another copy since (a re-run of the import made it
// another object) is read again as the file is now, unless this File
// returned bytes of the old copy (tierCopyChanged).
func (f *File) readReleased(ctx context.Context, off int64, dst []byte) error {
	t := &f.tier
	t.mu.Lock()
	j := t.job
	t.mu.Unlock()
	var ended, ok bool
	if j != nil {
		ended, ok = j.finished()
	}
	if readFrom(true, ended && ok) == fromRefresh {
		t.mu.Lock()
		t.job = nil
		t.mu.Unlock()
		var a wire.Attr
		if err := f.learnNow(ctx, &a); err != nil {
			return err
		}
		if a.Flags&wire.AttrReleased == 0 {
			return f.readChunks(ctx, off, dst)
		}
		j, ended = nil, false
	}
	if j == nil || ended {
		if nj := f.c.startRestore(f.ino, false); nj != nil {
			t.mu.Lock()
			t.job = nj
			t.mu.Unlock()
		}
	}
	err := f.readTier(ctx, off, dst)
	if err == nil {
		return nil
	}
	changed, cerr := f.tierCopyChanged(ctx)
	if cerr != nil || !changed {
		return cmp.Or(cerr, err)
	}
	// Read the file as it is now: from its new copy, or from the targets
	// if it is not released any more.
	var a wire.Attr
	if err := f.learnNow(ctx, &a); err != nil {
		return err
	}
	if a.Flags&wire.AttrReleased == 0 {
		return f.readChunks(ctx, off, dst)
	}
	return f.readTier(ctx, off, dst)
}

// learnNow asks for the file's attributes, into a, and learns them and
// the layout they carry.
func (f *File) learnNow(ctx context.Context, a *wire.Attr) error {
	if err := f.c.metaCall(ctx, wire.OpGetAttr, &wire.InoReq{Ino: f.ino}, a); err != nil {
		return err
	}
	f.learn(a)
	f.learnLayout(a)
	return nil
}
