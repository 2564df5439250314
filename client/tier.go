package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/tier"
	"github.com/sluice-fs/sluice/internal/wire"
)

// The object tier (docs/tier.md): S3 buckets registered as backends, and
// the HSM operations that move a file's bytes between the targets and a
// backend. The metadata service keeps the records and decides each state
// change (wire ops 37-41); this file moves the bytes.

// TierBackend is an S3 bucket registered as a capacity tier.
type TierBackend struct {
	Name, Endpoint, Bucket, Prefix, Region string
	AccessKey, SecretKey                   string
}

// String describes the backend without its secret.
func (b TierBackend) String() string {
	return fmt.Sprintf("%s: %s bucket %q prefix %q region %q", b.Name, b.Endpoint, b.Bucket, b.Prefix, b.Region)
}

func (b TierBackend) wire() wire.TierBackend {
	return wire.TierBackend{Name: b.Name, Endpoint: b.Endpoint, Bucket: b.Bucket, Prefix: b.Prefix, Region: b.Region, AccessKey: b.AccessKey, SecretKey: b.SecretKey}
}

// errReleased refuses a write or truncate of a file released again while
// it was restored for the write.
var errReleased = errs.New(errs.Busy, "client: the file was released to the object tier again during its restore for a write; try again")

// tierStores caches the backends' Stores, reloaded when a name is missing.
type tierStores struct {
	mu     sync.Mutex
	stores map[string]tier.Store
}

// TierAdd registers backend b after checking that its bucket can be
// reached with its credentials (unless force): an unreachable backend or
// refused credentials fail here, with the reason.
func (c *Client) TierAdd(ctx context.Context, b TierBackend, force bool) error {
	if !force {
		s, err := tier.Open(b.wire())
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, c.opts.TierTimeout)
		err = s.Check(cctx)
		cancel()
		if err != nil {
			return err
		}
	}
	return c.metaCall(ctx, wire.OpTierSet, &wire.TierSetReq{Backend: b.wire()}, &wire.Empty{})
}

// TierRemove unregisters a backend. Files archived to it keep records
// naming it: see docs/tier.md.
func (c *Client) TierRemove(ctx context.Context, name string) error {
	c.tiers.mu.Lock()
	delete(c.tiers.stores, name)
	c.tiers.mu.Unlock()
	return c.metaCall(ctx, wire.OpTierSet, &wire.TierSetReq{Backend: wire.TierBackend{Name: name}, Remove: true}, &wire.Empty{})
}

// TierList returns the registered backends, sorted by name.
func (c *Client) TierList(ctx context.Context) ([]TierBackend, error) {
	var r wire.TierListResp
	if err := c.metaCall(ctx, wire.OpTierList, &wire.Empty{}, &r); err != nil {
		return nil, err
	}
	out := make([]TierBackend, len(r.Backends))
	for i, b := range r.Backends {
		out[i] = TierBackend{Name: b.Name, Endpoint: b.Endpoint, Bucket: b.Bucket, Prefix: b.Prefix, Region: b.Region, AccessKey: b.AccessKey, SecretKey: b.SecretKey}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// TierCheck says whether backend name can be reached with its credentials.
func (c *Client) TierCheck(ctx context.Context, name string) error {
	s, err := c.tierStore(ctx, name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.TierTimeout)
	defer cancel()
	return s.Check(ctx)
}

// tierStore returns backend name's Store.
func (c *Client) tierStore(ctx context.Context, name string) (tier.Store, error) {
	c.tiers.mu.Lock()
	s := c.tiers.stores[name]
	c.tiers.mu.Unlock()
	if s != nil {
		return s, nil
	}
	var r wire.TierListResp
	if err := c.metaCall(ctx, wire.OpTierList, &wire.Empty{}, &r); err != nil {
		return nil, err
	}
	c.tiers.mu.Lock()
	defer c.tiers.mu.Unlock()
	if c.tiers.stores == nil {
		c.tiers.stores = make(map[string]tier.Store)
	}
	for _, b := range r.Backends {
		if c.tiers.stores[b.Name] == nil {
			st, err := tier.Open(b)
			if err != nil {
				return nil, err
			}
			c.tiers.stores[b.Name] = st
		}
	}
	if s = c.tiers.stores[name]; s == nil {
		return nil, errs.New(errs.NotFound, "client: no tier backend %q", name)
	}
	return s, nil
}

// HsmInfo is a file's HSM state.
type HsmInfo struct {
	State   string // resident, archived, released or dirty
	Backend string
	Key     string // the object's key below the backend's prefix
	Size    uint64 // of the archived copy
	Gen     uint64
}

func hsmInfo(r *wire.HsmRecord) HsmInfo {
	return HsmInfo{State: wire.HsmStateName(r.State), Backend: r.Backend, Key: r.Key, Size: r.Size, Gen: r.Gen}
}

func (c *Client) hsmGet(ctx context.Context, ino uint64) (wire.HsmRecord, error) {
	var r wire.HsmRecord
	err := c.metaCall(ctx, wire.OpHsmGet, &wire.InoReq{Ino: ino}, &r)
	return r, err
}

func (c *Client) hsmUpdate(ctx context.Context, ino uint64, act uint8, rec wire.HsmRecord) (wire.HsmRecord, error) {
	var r wire.HsmRecord
	err := c.metaCall(ctx, wire.OpHsmUpdate, &wire.HsmUpdateReq{Ino: ino, Action: act, Record: rec}, &r)
	return r, err
}

// regular resolves p, which must be a regular file.
func (c *Client) regular(ctx context.Context, p string) (*wire.Attr, error) {
	a, err := c.resolve(ctx, p, true)
	if err != nil {
		return nil, err
	}
	if a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, errs.New(errs.Invalid, "client: %s is not a regular file", p)
	}
	return a, nil
}

// HsmState returns the HSM state of the file at p. It never touches S3.
func (c *Client) HsmState(ctx context.Context, p string) (HsmInfo, error) {
	a, err := c.regular(ctx, p)
	if err != nil {
		return HsmInfo{}, opErr("hsm state", p, err)
	}
	info, err := c.HsmStateIno(ctx, a.Ino)
	return info, opErr("hsm state", p, err)
}

// HsmStateIno is HsmState of file ino (one request: no path to resolve).
func (c *Client) HsmStateIno(ctx context.Context, ino uint64) (HsmInfo, error) {
	r, err := c.hsmGet(ctx, ino)
	return hsmInfo(&r), err
}

// HsmStatesIno returns the HSM state names of many files ("resident",
// "archived", "released", "dirty"; "" for an inode that is not a regular
// file any more), asking the metadata service for up to
// wire.MaxInos at a time, each batch read in one transaction. A
// metadata service older than this call is asked file by file.
func (c *Client) HsmStatesIno(ctx context.Context, inos []uint64) ([]string, error) {
	out := make([]string, 0, len(inos))
	for len(inos) > 0 {
		batch := inos[:min(len(inos), wire.MaxInos)]
		inos = inos[len(batch):]
		var r wire.HsmStatesResp
		err := c.metaCall(ctx, wire.OpHsmStates, &wire.InosReq{Inos: batch}, &r)
		if errs.CodeOf(err) == errs.NotSupported {
			for _, ino := range batch {
				rec, err := c.hsmGet(ctx, ino)
				switch {
				case errs.CodeOf(err) == errs.NotFound || errs.CodeOf(err) == errs.Invalid:
					out = append(out, "")
				case err != nil:
					return nil, fmt.Errorf("hsm state of inode %d: %w", ino, err)
				default:
					out = append(out, wire.HsmStateName(rec.State))
				}
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("hsm states of %d inodes: %w", len(batch), err)
		}
		if len(r.States) != len(batch) {
			return nil, errs.New(errs.Invalid, "client: hsm states: %d states for %d inodes", len(r.States), len(batch))
		}
		for _, st := range r.States {
			if st == wire.HsmGone {
				out = append(out, "")
			} else {
				out = append(out, wire.HsmStateName(st))
			}
		}
	}
	return out, nil
}

// archiveBuffer is the largest file archived from one read into memory;
// larger files are read twice (checksums, then upload), since the object's
// metadata, which carries the checksums, goes with the upload's start.
const archiveBuffer = 64 << 20

// HsmArchive copies the file at p to backend (the only one registered when
// empty) as one object, and records it: the file becomes archived. A file
// archived already is left alone; a dirty one is copied again. A file that
// changes during the copy is not recorded (errs.Busy: archive it again).
func (c *Client) HsmArchive(ctx context.Context, p, backend string) (HsmInfo, error) {
	info, err := c.hsmArchive(ctx, p, backend)
	return info, opErr("hsm archive", p, err)
}

func (c *Client) hsmArchive(ctx context.Context, p, backend string) (HsmInfo, error) {
	a, err := c.regular(ctx, p)
	if err != nil {
		return HsmInfo{}, err
	}
	cur, err := c.hsmGet(ctx, a.Ino)
	if err != nil {
		return HsmInfo{}, err
	}
	if cur.State == wire.HsmArchived || cur.State == wire.HsmReleased {
		return hsmInfo(&cur), nil
	}
	if backend == "" {
		bs, err := c.TierList(ctx)
		if err != nil {
			return HsmInfo{}, err
		}
		if len(bs) != 1 {
			return HsmInfo{}, errs.New(errs.Invalid, "client: %d tier backends are registered: name one", len(bs))
		}
		backend = bs[0].Name
	}
	st, err := c.tierStore(ctx, backend)
	if err != nil {
		return HsmInfo{}, err
	}
	f, err := c.OpenInode(ctx, inodeAttr(a), O_RDONLY|oNoAtime)
	if err != nil {
		return HsmInfo{}, err
	}
	defer f.Release(ctx, false)
	size := int64(a.Size)
	src := io.NewSectionReader(ctxReaderAt{ctx, f}, 0, size)
	sum := tier.NewSummer(tier.BlockSize)
	var body io.Reader
	var again *tier.Summer // the second read's checksums (files over archiveBuffer)
	if size <= archiveBuffer {
		buf := make([]byte, size)
		if _, err := io.ReadFull(src, buf); err != nil {
			return HsmInfo{}, err
		}
		sum.Write(buf)
		body = bytes.NewReader(buf)
	} else {
		if _, err := io.Copy(sum, src); err != nil {
			return HsmInfo{}, err
		}
		// The upload reads the file again: checksum it too, so that a
		// change between the two reads (a write whose size commit has
		// not come yet) cannot pair these checksums with other bytes.
		again = tier.NewSummer(tier.BlockSize)
		body = io.TeeReader(io.NewSectionReader(ctxReaderAt{ctx, f}, 0, size), again)
	}
	rec := wire.HsmRecord{Backend: backend, Mtime: a.Mtime}
	sum.Fill(&rec)
	var g [8]byte
	for rec.Gen == 0 {
		rand.Read(g[:])
		rec.Gen = binary.BigEndian.Uint64(g[:])
	}
	tctx, cancel := context.WithTimeout(ctx, c.opts.TierTimeout+time.Duration(size>>20)*time.Second)
	defer cancel()
	// Never write over another file's object (or one Sluice did not
	// write): such a key gets the inode number appended.
	rec.Key = tier.ObjectKey(p, a.Ino, false)
	if _, meta, err := st.Head(tctx, rec.Key); err == nil && tier.MetaInode(meta) != a.Ino {
		rec.Key = tier.ObjectKey(p, a.Ino, true)
	} else if err != nil && errs.CodeOf(err) != errs.NotFound {
		return HsmInfo{}, err
	}
	if err := st.Put(tctx, rec.Key, body, size, tier.ObjectMeta(&rec, a.Ino)); err != nil {
		return HsmInfo{}, err
	}
	if again != nil {
		var up wire.HsmRecord
		again.Fill(&up)
		if !bytes.Equal(up.SHA256, rec.SHA256) || up.Size != rec.Size {
			// Not recorded: the object is written over by the next archive.
			return HsmInfo{}, errs.New(errs.Busy, "client: file changed while it was archived (its two reads differ); archive it again")
		}
	}
	r, err := c.hsmUpdate(ctx, a.Ino, wire.HsmActArchived, rec)
	return hsmInfo(&r), err
}

// ctxReaderAt reads a File under a context.
type ctxReaderAt struct {
	ctx context.Context
	f   *File
}

func (r ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	return r.f.ReadAtContext(r.ctx, p, off)
}

// HsmRelease releases the archived file at p: its chunks are queued for
// removal from the targets (the space comes back within the metadata
// service's next collection pass); size, times, mode and xattrs stay, and
// reads fetch the bytes from the tier. A dirty or resident file is
// refused, and so is one whose chunks differ from the copy (a write not
// yet committed: errs.Busy); the chunks are read and compared first
// (ADR 0023, release.go).
func (c *Client) HsmRelease(ctx context.Context, p string) (HsmInfo, error) {
	a, err := c.regular(ctx, p)
	if err != nil {
		return HsmInfo{}, opErr("hsm release", p, err)
	}
	r, err := c.releaseIno(ctx, a.Ino)
	return hsmInfo(&r), opErr("hsm release", p, err)
}

// HsmRemove drops the archived copy of the file at p (queued for deletion
// from the bucket: TierGC); a released file must be restored first.
func (c *Client) HsmRemove(ctx context.Context, p string) (HsmInfo, error) {
	a, err := c.regular(ctx, p)
	if err != nil {
		return HsmInfo{}, opErr("hsm remove", p, err)
	}
	r, err := c.hsmUpdate(ctx, a.Ino, wire.HsmActRemove, wire.HsmRecord{})
	return hsmInfo(&r), opErr("hsm remove", p, err)
}

// restoreUnit is the most bytes one ranged GET of a restore asks for.
const restoreUnit = 8 * tier.BlockSize

// HsmRestore brings the bytes of the released file at p back to the
// targets, every block checked against its CRC32C, and makes it archived.
// A crash part-way leaves the file released (reads still go to the tier);
// running it again starts over.
func (c *Client) HsmRestore(ctx context.Context, p string) (HsmInfo, error) {
	a, err := c.regular(ctx, p)
	if err != nil {
		return HsmInfo{}, opErr("hsm restore", p, err)
	}
	info, err := c.RestoreIno(ctx, a.Ino)
	return info, opErr("hsm restore", p, err)
}

// StageIno restores released file ino to the targets (or joins the
// restore this client runs, or waits for another client's) and returns
// once it is not released any more; a file that is not released returns
// at once. It is RestoreIno without reading the HSM record afterwards.
func (c *Client) StageIno(ctx context.Context, ino uint64) error {
	return c.restore(ctx, ino)
}

// RestoreIno is HsmRestore of file ino: it runs the restore (or joins the
// one this client runs, or waits for another client's) until the file is
// no longer released.
func (c *Client) RestoreIno(ctx context.Context, ino uint64) (HsmInfo, error) {
	if err := c.restore(ctx, ino); err != nil {
		return HsmInfo{}, err
	}
	rec, err := c.hsmGet(ctx, ino)
	return hsmInfo(&rec), err
}

// tierGet reads dst at off (a multiple of the block size) of rec's object
// with one ranged GET, bounded by TierTimeout, and checks the object's
// generation and every block's CRC32C; a record imported from a listing
// (no block checksums yet) pins the GET to the object's ETag instead.
func (c *Client) tierGet(ctx context.Context, st tier.Store, rec *wire.HsmRecord, off int64, dst []byte) error {
	if len(rec.BlockCRCs) == 0 && rec.ETag == "" {
		return errs.New(errs.Corruption, "client: the HSM record of object %s of backend %q has neither block checksums nor an ETag", rec.Key, rec.Backend)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.TierTimeout)
	defer cancel()
	meta, err := st.GetRange(ctx, rec.Key, off, dst, rec.ETag)
	if err != nil {
		return err
	}
	if err := tier.CheckObject(rec, meta); err != nil {
		return err
	}
	if len(rec.BlockCRCs) == 0 {
		return nil // pinned to the ETag, checked by the backend
	}
	bs := int64(rec.BlockSize)
	for i := off / bs; i*bs < off+int64(len(dst)); i++ {
		lo := i*bs - off
		hi := lo + tier.BlockLen(rec, int(i))
		if err := tier.CheckBlock(rec, int(i), dst[lo:hi]); err != nil {
			return err
		}
	}
	return nil
}

// TierGC deletes the objects in the delete queue (of removed files, and
// copies replaced by a later archive): each object still carrying the
// queued generation is deleted; one written over since is kept. It
// returns how many objects it deleted and how many it kept.
func (c *Client) TierGC(ctx context.Context) (deleted, kept int, err error) {
	var done []wire.TierQueueItem
	for {
		var r wire.TierQueueResp
		if err := c.metaCall(ctx, wire.OpTierQueue, &wire.TierQueueReq{Done: done, Limit: 256}, &r); err != nil {
			return deleted, kept, err
		}
		done = done[:0]
		if len(r.Items) == 0 {
			return deleted, kept, nil
		}
		for _, it := range r.Items {
			st, err := c.tierStore(ctx, it.Backend)
			if err != nil {
				return deleted, kept, fmt.Errorf("delete queue item of inode %d: %w", it.Ino, err)
			}
			tctx, cancel := context.WithTimeout(ctx, c.opts.TierTimeout)
			_, meta, err := st.Head(tctx, it.Key)
			switch {
			case errs.CodeOf(err) == errs.NotFound:
			case err != nil:
				cancel()
				return deleted, kept, err
			case meta[tier.MetaGen] != fmt.Sprintf("%016x", it.Gen):
				kept++ // another archive wrote over it: not ours to delete
			default:
				if err := st.Delete(tctx, it.Key); err != nil {
					cancel()
					return deleted, kept, err
				}
				deleted++
			}
			cancel()
			done = append(done, it)
		}
	}
}

// tierRead is the state of a File's reads from the tier while it is
// released: the record, and blocks fetched or in flight. Its mutex is
// taken after File.mu, never before.
type tierRead struct {
	mu     sync.Mutex
	rec    *wire.HsmRecord
	st     tier.Store
	blocks map[int64]*tierFetch // block index -> the fetch holding it
	next   int64                // the block after the last read, to tell sequential reads
	job    *restoreJob          // the restore this File's reads started or joined
	// served says that a read returned bytes of rec's object: the File
	// then never reads another object's (tierReimported).
	served bool
}

// tierFetch is one ranged GET of blocks [first, first+n).
type tierFetch struct {
	first int64
	n     int64
	done  chan struct{}
	data  []byte
	err   error
	// shared is the key this fetch is registered under in the client's
	// tierShare, if its performer registered it.
	shared *shareKey
	owner  *File // the File that performs it (nil: a restore)
}

// tierSegment is how many blocks one GET of a sequential reader asks for
// (8 MiB, as the direct baseline of BenchmarkTier):
// S3 serves larger ranges at a lower cost per byte.
const tierSegment = 8

// readTier reads dst at off from the tier: the blocks covering it, fetched
// with ranged GETs and each checked against its CRC32C. A sequential
// reader gets segments of tierSegment blocks, up to TierReadAhead blocks
// ahead of it; others only the blocks they need. It never returns bytes
// that failed a check, nor fewer bytes than asked.
func (f *File) readTier(ctx context.Context, off int64, dst []byte) error {
	t := &f.tier
	t.mu.Lock()
	if t.rec == nil {
		t.mu.Unlock()
		rec, err := f.c.hsmGet(ctx, f.ino)
		if err != nil {
			return err
		}
		if rec.State == wire.HsmResident {
			return errs.New(errs.Stale, "client: inode %d was released but its archived copy is gone", f.ino)
		}
		st, err := f.c.tierStore(ctx, rec.Backend)
		if err != nil {
			return err
		}
		t.mu.Lock()
		if t.rec == nil {
			t.rec, t.st, t.blocks = &rec, st, make(map[int64]*tierFetch)
		}
	}
	rec := t.rec
	bs := int64(rec.BlockSize)
	end := off + int64(len(dst))
	if end > int64(rec.Size) {
		t.mu.Unlock()
		return errs.New(errs.Stale, "client: read of inode %d up to %d passes its archived copy's %d bytes", f.ino, end, rec.Size)
	}
	nblocks := tier.Blocks(rec)
	first, last := off/bs, (end-1)/bs
	seq := first == t.next || first+1 == t.next || (first > 0 && t.blocks[first-1] != nil)
	ahead, unit := last, int64(1)
	if seq {
		ahead, unit = min(last+int64(f.c.opts.TierReadAhead), nblocks-1), tierSegment
	}
	t.next = last + 1
	// The File's first read asks for the blocks it needs alone, so that
	// its bytes do not wait for the rest of a segment (the first read
	// of a released file also starts its restore's GETs beside it).
	cold := len(t.blocks) == 0
	for i := first; i <= ahead; {
		if t.blocks[i] != nil {
			i++
			continue
		}
		// A new fetch from block i: a unit aligned to its size, cut
		// where blocks are already fetched.
		n := int64(1)
		limit := min((i/unit+1)*unit, nblocks)
		if cold && i <= last {
			limit = min(limit, last+1)
		}
		for i+n < limit && t.blocks[i+n] == nil {
			n++
		}
		if i > last && n < unit && i+n < nblocks && i%unit == 0 {
			break // read ahead in whole segments only (or up to the next one)
		}
		fe, mine := &tierFetch{first: i, n: n, done: make(chan struct{}), owner: f}, true
		if n == min(tierSegment, nblocks-i) && i%tierSegment == 0 {
			// A whole segment: the restore and other Files of this
			// client ask for the same range (tierShare).
			k := shareKey{ino: f.ino, gen: rec.Gen, etag: rec.ETag, off: i * bs, n: min(n*bs, int64(rec.Size)-i*bs)}
			fe.shared = &k
			if got, ok := f.c.share.join(k, fe); !ok {
				fe, mine = got, false
			}
		}
		for k := i; k < i+n; k++ {
			t.blocks[k] = fe
		}
		if mine {
			go f.fetchBlocks(t, rec, fe)
		} else {
			go f.forgetFailed(t, fe)
		}
		i += n
	}
	need := make([]*tierFetch, 0, last-first+1)
	for i := first; i <= last; i++ {
		need = append(need, t.blocks[i])
	}
	// Forget blocks behind the reader and far ahead of it.
	for i, fe := range t.blocks {
		if i < first-1 || i > ahead+int64(f.c.opts.TierReadAhead) {
			select {
			case <-fe.done:
				delete(t.blocks, i)
			default:
			}
		}
	}
	t.mu.Unlock()
	for k, fe := range need {
		select {
		case <-fe.done:
		case <-ctx.Done():
			return f.tierLate(ctx, rec)
		}
		i := first + int64(k)
		lo := max(off, i*bs)
		hi := min(end, (i+1)*bs)
		if fe.err != nil {
			if fe.owner == f {
				return fe.err
			}
			// Another consumer's fetch (a restore that gave up, another
			// File's): this read asks for its block itself.
			blk := make([]byte, tier.BlockLen(rec, int(i)))
			got := make(chan error, 1)
			go func() { got <- f.c.tierGet(context.WithoutCancel(f.ctx), t.st, rec, i*bs, blk) }()
			select {
			case err := <-got:
				if err != nil {
					return fmt.Errorf("read released inode %d block %d from backend %q: %w", f.ino, i, rec.Backend, err)
				}
			case <-ctx.Done():
				return f.tierLate(ctx, rec)
			}
			copy(dst[lo-off:hi-off], blk[lo-i*bs:hi-i*bs])
			continue
		}
		base := fe.first * bs
		copy(dst[lo-off:hi-off], fe.data[lo-base:hi-base])
	}
	t.mu.Lock()
	t.served = true
	t.mu.Unlock()
	return nil
}

// fetchBlocks reads the blocks of fe from the tier (rec's copy). A failed fetch is
// forgotten, so that the next read asks again.
func (f *File) fetchBlocks(t *tierRead, rec *wire.HsmRecord, fe *tierFetch) {
	defer func() {
		close(fe.done)
		if fe.shared != nil {
			f.c.share.done(*fe.shared, fe)
		}
	}()
	bs := int64(rec.BlockSize)
	size := min(fe.n*bs, int64(rec.Size)-fe.first*bs)
	buf := make([]byte, size)
	if err := f.c.tierGet(context.WithoutCancel(f.ctx), t.st, rec, fe.first*bs, buf); err != nil {
		fe.err = fmt.Errorf("read released inode %d blocks %d-%d from backend %q: %w", f.ino, fe.first, fe.first+fe.n-1, rec.Backend, err)
		t.forget(fe)
		return
	}
	fe.data = buf
	if fe.first == 0 && int64(len(buf)) == int64(rec.Size) {
		// The whole object: a restore of the file waiting in this
		// client need not fetch it again.
		f.c.restores.offer(f.ino, copyOf(rec), buf)
	}
}

// errCopyChanged says that a File returned bytes of a released file's
// copy in the bucket, and the file has another copy since.
var errCopyChanged = errs.New(errs.Stale, "client: the file became another object (the import ran again) or another copy after this descriptor read the old one: open it again")

// tierCopyChanged is called after a read of the released file f from the
// tier failed: it says whether the file's record names another copy now
// than the one f read from (a re-run of the import made it another object
// of the bucket, or it was restored, changed and archived again). A File
// that returned no bytes of the old copy forgets its record and fetches,
// so that its next read reads the file as it is now, as an open made now
// would; one that did gets errCopyChanged, so that its reader never gets
// bytes of two versions as one file.
func (f *File) tierCopyChanged(ctx context.Context) (bool, error) {
	t := &f.tier
	t.mu.Lock()
	old := t.rec
	t.mu.Unlock()
	if old == nil || ctx.Err() != nil {
		return false, nil
	}
	rec, err := f.c.hsmGet(ctx, f.ino)
	if err != nil || (copyOf(&rec) == copyOf(old) && rec.Size == old.Size && rec.Key == old.Key && rec.Backend == old.Backend) {
		return false, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rec != old {
		return true, nil
	}
	if t.served {
		return true, errCopyChanged
	}
	t.rec, t.blocks, t.next = nil, nil, 0
	return true, nil
}

// tierLate is the error of a read of a released file whose fetch did not
// end within ctx: EIO, not ETIMEDOUT, since the tier is what failed to
// answer (the caller's deadline is the mount's op timeout).
func (f *File) tierLate(ctx context.Context, rec *wire.HsmRecord) error {
	return errs.New(errs.Unavailable, "client: read of released inode %d: tier backend %q did not answer in time (%v)", f.ino, rec.Backend, ctx.Err())
}

// forgetFailed waits for a fetch another consumer performs (tierShare)
// and forgets it if it failed, as fetchBlocks does with its own.
func (f *File) forgetFailed(t *tierRead, fe *tierFetch) {
	<-fe.done
	if fe.err != nil {
		t.forget(fe)
	}
}

// forget removes a failed fetch from the blocks it was to fill, so that
// the next read asks again.
func (t *tierRead) forget(fe *tierFetch) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, e := range t.blocks {
		if e == fe {
			delete(t.blocks, i)
		}
	}
}

// RestoreTotals is what the metadata service answering decided about
// restores of released files since it started (each service of a cluster
// counts its own).
type RestoreTotals struct {
	Leases        uint64 // restore leases granted to a new holder
	Takeovers     uint64 // of those, expired leases taken over
	Restored      uint64 // restores committed: released files made archived
	RestoredBytes uint64 // the size of their files
	CutToZero     uint64 // released files cut to size 0 without a restore
}

// RestoreTotals returns the metadata service's restore counts.
func (c *Client) RestoreTotals(ctx context.Context) (RestoreTotals, error) {
	var r wire.HsmStats
	if err := c.metaCall(ctx, wire.OpHsmStats, &wire.Empty{}, &r); err != nil {
		return RestoreTotals{}, fmt.Errorf("restore totals: %w", err)
	}
	return RestoreTotals(r), nil
}
