package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/tier"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Releases (ADR 0023). Another client may hold an archived file open and
// write it while it is released: its bytes reach the targets before its
// size commit reaches the metadata service. So a release freezes the
// file's chunks on every replica (writes acknowledged before are in them,
// later ones fail with errs.Moved), compares them with the copy, block by
// block against the copy's CRC32Cs, and checks that no chunk holds bytes
// past the file's size (a write whose commit has not come yet); only then
// does it commit. A difference thaws the chunks and refuses the release
// (errs.Busy). A writer refused by the fences finds the file released,
// restores it and writes again (File.withLayout).

// releaseParallel is how many blocks a release's comparison reads at once.
const releaseParallel = 8

// errChanged refuses a release whose chunks differ from the copy.
var errChanged = errs.New(errs.Busy, "client: the file was written since its archive (its chunks differ from the copy); archive it again before releasing it")

// releaseIno releases archived file ino: freeze, compare, commit; a
// failure after the freeze thaws. It returns the file's HSM record.
func (c *Client) releaseIno(ctx context.Context, ino uint64) (wire.HsmRecord, error) {
	rec, err := c.hsmUpdate(ctx, ino, wire.HsmActFreeze, wire.HsmRecord{})
	if err != nil || rec.State == wire.HsmReleased {
		return rec, err
	}
	l, _, err := c.layoutOf(ctx, ino)
	if err == nil {
		err = whileRenewing(ctx, releaseRenew, c.renewFreeze(ino), func(ctx context.Context) error { return c.compareFrozen(ctx, ino, l, &rec) })
	}
	// The copy is checked last, after the long comparison, so that it
	// can change in the bucket only in the short time before the commit.
	lost := false
	if err == nil {
		lost, err = c.checkCopy(ctx, &rec)
	}
	if err == nil {
		var r wire.HsmRecord
		if r, err = c.hsmUpdate(ctx, ino, wire.HsmActRelease, wire.HsmRecord{}); err == nil {
			return r, nil
		}
	}
	// Thaw (a no-op once the commit went through: its record is gone).
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.TierTimeout)
	defer cancel()
	if _, terr := c.hsmUpdate(tctx, ino, wire.HsmActThaw, wire.HsmRecord{Gen: rec.Gen}); terr != nil {
		err = errors.Join(err, fmt.Errorf("thaw (the metadata service thaws it when the freeze's lease runs out): %w", terr))
	}
	if lost {
		// Dirty: the next archive (the mover's, or by hand) copies the
		// file again instead of trying this release again and again.
		if _, derr := c.hsmUpdate(tctx, ino, wire.HsmActCopyLost, wire.HsmRecord{Gen: rec.Gen, Key: rec.Key}); derr != nil {
			err = errors.Join(err, fmt.Errorf("mark the file dirty: %w", derr))
		}
	}
	return rec, err
}

// checkCopy heads the object of rec, the copy a release is about to leave
// as the file's only bytes, and refuses the release (errs.Busy, lost) when
// the object is gone or is no longer that copy (removed or replaced
// outside Sluice: tier.CheckCopy). A backend that cannot be reached fails
// the release too: nothing is released unchecked.
func (c *Client) checkCopy(ctx context.Context, rec *wire.HsmRecord) (lost bool, err error) {
	st, err := c.tierStore(ctx, rec.Backend)
	if err != nil {
		return false, err
	}
	tctx, cancel := context.WithTimeout(ctx, c.opts.TierTimeout)
	defer cancel()
	info, meta, err := st.Head(tctx, rec.Key)
	if err == nil {
		err = tier.CheckCopy(rec, info, meta)
	}
	switch errs.CodeOf(err) {
	case errs.OK:
		return false, nil
	case errs.NotFound, errs.Corruption:
		return true, errs.Wrap(errs.Busy, err, "client: the file's copy in the bucket is gone or is another object: not released; the file is dirty, to be archived again")
	}
	return false, fmt.Errorf("client: check the file's copy before its release: %w", err)
}

// releaseRenew is how often a release renews its freeze's lease (the
// service's meta.ReleaseLease is 60 s).
const releaseRenew = 20 * time.Second

// renewFreeze renews file ino's freeze for its release (whileRenewing).
func (c *Client) renewFreeze(ino uint64) func(context.Context) error {
	return func(ctx context.Context) error {
		r, err := c.hsmUpdate(ctx, ino, wire.HsmActFreeze, wire.HsmRecord{})
		if err == nil && r.State != wire.HsmArchived {
			err = errs.New(errs.Busy, "client: the file became %s during its release", wire.HsmStateName(r.State))
		}
		return err
	}
}

// compareFrozen checks that the frozen chunks of file ino (layout l) hold
// exactly the copy rec: every block's CRC32C, and no chunk longer than
// its part of the file (a missing chunk reads as zeros).
func (c *Client) compareFrozen(ctx context.Context, ino uint64, l placement.Layout, rec *wire.HsmRecord) error {
	size := int64(rec.Size)
	data := l.DataID(ino)
	// Each chunk's length, from a read of no bytes.
	for slot, ch := range l.Chains {
		var resp wire.ChunkReadResp
		_, err := c.chunkCall(ctx, chunkReq{chain: ch, op: wire.OpChunkRead, resp: &resp,
			msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
				return &wire.ChunkReadReq{ChunkRef: wire.ChunkRef{Target: t, ChainRef: ref, Ino: data, Slot: uint32(slot)}, Len: 0, Qos: c.qos}
			}})
		switch {
		case errs.CodeOf(err) == errs.Moved: // frozen and missing: empty
		case err != nil:
			return fmt.Errorf("compare chunk slot %d with the copy: %w", slot, err)
		case int64(resp.ChunkLen) > l.ChunkSize(slot, size):
			return fmt.Errorf("%w (chunk slot %d has %d bytes, its part of the file %d)", errChanged, slot, resp.ChunkLen, l.ChunkSize(slot, size))
		}
	}
	if int64(len(rec.BlockCRCs)) != tier.Blocks(rec) {
		// Imported from a listing and never restored by a client that
		// keeps the checksums: nothing to compare the chunks with.
		return errs.New(errs.Busy, "the copy's record has %d block checksums for %d blocks (imported from a listing): restore the file with this version of sluice before releasing it", len(rec.BlockCRCs), tier.Blocks(rec))
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(releaseParallel)
	bs := int64(rec.BlockSize)
	for i := range len(rec.BlockCRCs) {
		g.Go(func() error {
			buf := make([]byte, tier.BlockLen(rec, i))
			if err := c.readFrozen(gctx, ino, l, int64(i)*bs, buf); err != nil {
				return err
			}
			if err := tier.CheckBlock(rec, i, buf); err != nil {
				if errs.CodeOf(err) == errs.Corruption {
					return fmt.Errorf("%w (block %d)", errChanged, i)
				}
				return err
			}
			return nil
		})
	}
	return g.Wait()
}

// readFrozen reads dst at off of file ino's chunks in layout l as they
// are, a frozen chunk that is missing as zeros.
func (c *Client) readFrozen(ctx context.Context, ino uint64, l placement.Layout, off int64, dst []byte) error {
	id := l.DataID(ino)
	for _, e := range extents(l, off, int64(len(dst))) {
		piece := dst[e.FileOff-off : e.FileOff-off+e.Len]
		var resp wire.ChunkReadResp
		got, err := c.chunkCall(ctx, chunkReq{chain: e.Chain, op: wire.OpChunkRead, resp: &resp, into: piece,
			msg: func(t placement.TargetID, ref wire.ChainRef) wire.Message {
				return &wire.ChunkReadReq{ChunkRef: wire.ChunkRef{Target: t, ChainRef: ref, Ino: id, Slot: uint32(e.Slot)}, Off: uint64(e.ChunkOff), Len: uint32(e.Len), Qos: c.qos}
			}})
		if errs.CodeOf(err) == errs.Moved {
			got, err = 0, nil
		}
		if err != nil {
			return fmt.Errorf("compare with the copy at %d (chain %d, slot %d): %w", e.FileOff, e.Chain, e.Slot, err)
		}
		clear(piece[got:])
	}
	return nil
}

// layoutOf returns file ino's layout and whether it is released.
func (c *Client) layoutOf(ctx context.Context, ino uint64) (placement.Layout, bool, error) {
	var l wire.LayoutMsg
	if err := c.metaCall(ctx, wire.OpGetLayout, &wire.InoReq{Ino: ino}, &l); err != nil {
		return placement.Layout{}, false, err
	}
	return l.Layout, l.Released, nil
}
