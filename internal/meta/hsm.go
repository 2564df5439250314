package meta

import (
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/tier"
	"github.com/sluice-fs/sluice/internal/wire"
)

// The HSM state machine of one file (docs/tier.md), as pure functions of
// the file's current record and attributes: the service reads both in a
// transaction, calls these, and writes what they return.

// hsmFile is what the state machine needs of a file's inode.
type hsmFile struct {
	Reg       bool
	Size      uint64
	Mtime     int64
	InlineLen uint32
	Chunks    bool // chunks may exist (inoChunks)
}

// hsmStep applies one HsmUpdateReq to cur (State HsmResident: no record).
// It returns the next record (State HsmResident: delete it) and, when an
// archived copy becomes useless, the object to queue for deletion.
func hsmStep(cur wire.HsmRecord, f hsmFile, req *wire.HsmUpdateReq) (wire.HsmRecord, *wire.TierQueueItem, error) {
	if !f.Reg {
		return cur, nil, errs.New(errs.Invalid, "only regular files have an HSM state")
	}
	drop := func() *wire.TierQueueItem { return dropObject(cur) }
	switch req.Action {
	case wire.HsmActArchived:
		r := req.Record
		if err := checkRecord(&r); err != nil {
			return cur, nil, err
		}
		switch {
		case cur.State == wire.HsmReleased:
			return cur, nil, errs.New(errs.Busy, "file is released; restore it before archiving it again")
		case f.Size != r.Size || f.Mtime != r.Mtime:
			return cur, nil, errs.New(errs.Busy, "file changed while it was archived (size %d, mtime %d; copied %d, %d); archive it again", f.Size, f.Mtime, r.Size, r.Mtime)
		}
		r.State = wire.HsmArchived
		if cur.State != wire.HsmResident && cur.Gen == r.Gen {
			return r, nil, nil // a repeat of this archive's commit
		}
		return r, drop(), nil
	case wire.HsmActImport:
		r := req.Record
		switch {
		case cur.State != wire.HsmResident:
			return cur, nil, errs.New(errs.Exists, "file has an HSM record already")
		case f.Size != 0 || f.InlineLen != 0 || f.Chunks:
			return cur, nil, errs.New(errs.Invalid, "only an empty file that never had data can take an imported object")
		case r.Gen != tier.ImportedGen:
			return cur, nil, errs.New(errs.Invalid, "an imported object's record has generation %d, want %d", r.Gen, tier.ImportedGen)
		case r.Backend == "" || r.Key == "":
			return cur, nil, errs.New(errs.Invalid, "HSM record needs a backend and an object key")
		case r.BlockSize == 0:
			return cur, nil, errs.New(errs.Invalid, "HSM record needs a block size")
		case r.Size == 0:
			return cur, nil, errs.New(errs.Invalid, "an empty object is imported as an empty file, without a record")
		case r.ETag != "" && len(r.SHA256) == 0 && len(r.BlockCRCs) == 0:
			// Imported from the listing: the reads are pinned to the
			// ETag, the restore fills the block checksums.
		case len(r.SHA256) != 32:
			return cur, nil, errs.New(errs.Invalid, "HSM record needs a SHA-256, or an ETag alone")
		case int64(len(r.BlockCRCs)) != tier.Blocks(&r):
			return cur, nil, errs.New(errs.Invalid, "HSM record has %d block checksums for %d bytes in blocks of %d", len(r.BlockCRCs), r.Size, r.BlockSize)
		}
		r.State = wire.HsmReleased
		return r, nil, nil
	case wire.HsmActRelease:
		switch cur.State {
		case wire.HsmReleased:
			return cur, nil, nil // again: its chunks were queued the first time
		case wire.HsmResident:
			return cur, nil, errs.New(errs.Invalid, "file is not archived; archive it before releasing it")
		case wire.HsmDirty:
			return cur, nil, errs.New(errs.Busy, "file changed since it was archived; archive it again before releasing it")
		}
		if f.InlineLen > 0 {
			return cur, nil, errs.New(errs.NotSupported, "file keeps %d bytes inline in the metadata: only files wholly in chunks are released", f.InlineLen)
		}
		if f.Size != cur.Size {
			return cur, nil, errs.New(errs.Internal, "archived file has size %d, its copy %d, without being dirty", f.Size, cur.Size)
		}
		cur.State = wire.HsmReleased
		return cur, nil, nil
	case wire.HsmActRestored:
		switch {
		case cur.State == wire.HsmResident || cur.Gen != req.Record.Gen:
			return cur, nil, errs.New(errs.Stale, "file was archived again or its copy removed during the restore")
		case cur.State == wire.HsmArchived || cur.State == wire.HsmDirty:
			return cur, nil, nil // restored already
		}
		cur.State = wire.HsmArchived
		if len(cur.BlockCRCs) == 0 && int64(len(req.Record.BlockCRCs)) == tier.Blocks(&cur) {
			// A record imported from a listing takes the block
			// checksums of the bytes its restore copied (checked
			// against the ETag by the GETs).
			cur.BlockCRCs = req.Record.BlockCRCs
		}
		return cur, nil, nil
	case wire.HsmActRestoring:
		switch {
		case cur.State == wire.HsmResident:
			return cur, nil, errs.New(errs.Invalid, "file is not archived")
		case cur.Gen != req.Record.Gen && req.Record.Gen != 0:
			return cur, nil, errs.New(errs.Stale, "file was archived again during the restore")
		}
		return cur, nil, nil
	case wire.HsmActRemove:
		switch cur.State {
		case wire.HsmResident:
			return cur, nil, nil
		case wire.HsmReleased:
			return cur, nil, errs.New(errs.Busy, "file is released: its only copy is in the tier; restore it before removing the copy")
		}
		return wire.HsmRecord{}, drop(), nil
	case wire.HsmActCopyLost:
		switch {
		case cur.State == wire.HsmArchived && cur.Gen == req.Record.Gen && cur.Key == req.Record.Key:
			// Its object goes to the delete queue at the next archive,
			// where tier gc deletes only an object of its generation.
			cur.State = wire.HsmDirty
		case cur.State == wire.HsmReleased:
			return cur, nil, errs.New(errs.Busy, "file is released: its copy is its only bytes")
		}
		return cur, nil, nil // archived again or changed meanwhile: nothing to do
	}
	return cur, nil, errs.New(errs.Invalid, "unknown HSM action %d", req.Action)
}

// dropObject is the delete-queue item for the object of record cur, which
// the file no longer needs: nil if there is none (resident) or if Sluice
// did not write it (imported: never deleted).
func dropObject(cur wire.HsmRecord) *wire.TierQueueItem {
	if cur.State == wire.HsmResident || cur.Gen == tier.ImportedGen {
		return nil
	}
	return &wire.TierQueueItem{Gen: cur.Gen, Backend: cur.Backend, Key: cur.Key}
}

// hsmOnWrite is the state after a change of a file's data or size: an
// archived file becomes dirty; a released one refuses the change, since
// its bytes are not on the targets.
func hsmOnWrite(cur wire.HsmRecord) (wire.HsmRecord, error) {
	switch cur.State {
	case wire.HsmArchived:
		cur.State = wire.HsmDirty
	case wire.HsmReleased:
		return cur, errs.New(errs.Busy, "file is released to the object tier; restore it first (sluice hsm restore)")
	}
	return cur, nil
}

// hsmOnTruncate is the state after a cut of a file's size to size: as
// hsmOnWrite, except that a released file cut to size 0 needs none of its
// old bytes, so it becomes dirty (its copy stays in the tier until an
// archive replaces it) without being restored first; unless a client holds
// its restore lease (that restore's commit would give the file its chunks
// after the cut): then it is refused, and the client restores first. The
// service moves a file so cut to a fresh data ID (hsmTruncate).
func hsmOnTruncate(cur wire.HsmRecord, lease restoreLease, size uint64) (wire.HsmRecord, error) {
	if cur.State != wire.HsmReleased || size != 0 {
		return hsmOnWrite(cur)
	}
	if lease.Owner != 0 {
		return cur, errs.New(errs.Busy, "file is released and being restored; truncate it once the restore is done")
	}
	cur.State = wire.HsmDirty
	return cur, nil
}

// checkRecord validates an archive's record from a client.
func checkRecord(r *wire.HsmRecord) error {
	switch {
	case r.Backend == "" || r.Key == "":
		return errs.New(errs.Invalid, "HSM record needs a backend and an object key")
	case r.Gen == 0:
		return errs.New(errs.Invalid, "HSM record needs a generation")
	case len(r.SHA256) != 32:
		return errs.New(errs.Invalid, "HSM record has a SHA-256 of %d bytes", len(r.SHA256))
	case r.BlockSize == 0:
		return errs.New(errs.Invalid, "HSM record has no block size")
	}
	if int64(len(r.BlockCRCs)) != tier.Blocks(r) {
		return errs.New(errs.Invalid, "HSM record has %d block checksums for %d bytes in blocks of %d", len(r.BlockCRCs), r.Size, r.BlockSize)
	}
	return nil
}

// restoreLease is who restores a released file (ADR 0016): kept in the
// file's HSM record while it is released. Owner 0: nobody. Expires is on
// the metadata service's clock (ns), so clients' clocks never matter.
type restoreLease struct {
	Owner   uint64
	Gen     uint64 // the copy being restored
	Epoch   uint64 // grants since the release; > 1 after a takeover
	Expires int64
	// Data is the data ID the holder writes the chunks under (ADR 0023),
	// fresh for each grant: the commit moves the file to it, and the
	// chunks of a holder whose lease was taken over or dropped are
	// collected. 0 in a lease granted before data IDs were (the holder
	// writes under the file's own).
	Data uint64
}

// errNeedDataID: restoreClaim grants a lease and needs a fresh data ID.
var errNeedDataID = errs.New(errs.Internal, "meta: a restore lease needs a fresh data ID")

// Lease lengths the service accepts (HsmClaimReq.LeaseMs is clamped).
const (
	minRestoreLease = 100 // ms
	maxRestoreLease = 10 * 60 * 1000
)

// restoreClaim decides an HsmClaimReq on a file whose record is rec and
// lease cur, at time now: the lease after it. A released file's lease goes
// to the asker when nobody holds it, when it is for an older copy, or when
// it expired (a takeover: the holder is presumed dead); its holder renews
// it; anyone else gets the current holder back. A file that is not
// released has no lease: there is nothing to restore.
//
// A new grant takes data ID fresh; with fresh 0 it fails with
// errNeedDataID (the caller allocates one and asks again).
func restoreClaim(rec wire.HsmRecord, cur restoreLease, req *wire.HsmClaimReq, now int64, fresh uint64) (restoreLease, error) {
	if rec.State != wire.HsmReleased {
		return restoreLease{}, nil
	}
	if req.Owner == 0 {
		return cur, errs.New(errs.Invalid, "restore lease needs an owner")
	}
	if req.Gen != 0 && req.Gen != rec.Gen {
		return cur, errs.New(errs.Stale, "file was archived again (copy %016x, asked for %016x)", rec.Gen, req.Gen)
	}
	live := cur.Owner != 0 && cur.Gen == rec.Gen && now < cur.Expires
	if req.Drop {
		if cur.Owner == req.Owner {
			return restoreLease{Epoch: cur.Epoch, Gen: cur.Gen}, nil
		}
		return cur, nil
	}
	lease := int64(min(max(req.LeaseMs, minRestoreLease), maxRestoreLease)) * 1e6
	switch {
	case live && cur.Owner != req.Owner:
		return cur, nil
	case live || cur.Owner == req.Owner && cur.Gen == rec.Gen:
		cur.Expires = now + lease // renewed (an expired lease nobody took is still ours)
		return cur, nil
	}
	if fresh == 0 {
		return cur, errNeedDataID
	}
	epoch := cur.Epoch
	if cur.Gen != rec.Gen {
		epoch = 0
	}
	return restoreLease{Owner: req.Owner, Gen: rec.Gen, Epoch: epoch + 1, Expires: now + lease, Data: fresh}, nil
}

// restoreDone checks that owner may mark released file rec restored: it
// must hold the lease, even an expired one nobody took over. A lease taken
// over means another client writes the chunks now; a file that is no
// longer released was restored already (hsmStep says so).
func restoreDone(rec wire.HsmRecord, cur restoreLease, owner uint64) error {
	if rec.State != wire.HsmReleased || (cur.Owner == owner && owner != 0 && cur.Gen == rec.Gen) {
		return nil
	}
	return errs.New(errs.Stale, "restore lease is held by another client (%016x); it was taken over", cur.Owner)
}
