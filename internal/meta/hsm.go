package meta

import (
	"github.com/sluice-fs/sluice/internal/errs"
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
}

// hsmStep applies one HsmUpdateReq to cur (State HsmResident: no record).
// It returns the next record (State HsmResident: delete it) and, when an
// archived copy becomes useless, the object to queue for deletion.
func hsmStep(cur wire.HsmRecord, f hsmFile, req *wire.HsmUpdateReq) (wire.HsmRecord, *wire.TierQueueItem, error) {
	if !f.Reg {
		return cur, nil, errs.New(errs.Invalid, "only regular files have an HSM state")
	}
	drop := func() *wire.TierQueueItem {
		if cur.State == wire.HsmResident {
			return nil
		}
		return &wire.TierQueueItem{Gen: cur.Gen, Backend: cur.Backend, Key: cur.Key}
	}
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
	}
	return cur, nil, errs.New(errs.Invalid, "unknown HSM action %d", req.Action)
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
	if want := (r.Size + uint64(r.BlockSize) - 1) / uint64(r.BlockSize); uint64(len(r.BlockCRCs)) != want {
		return errs.New(errs.Invalid, "HSM record has %d block checksums for %d bytes in blocks of %d", len(r.BlockCRCs), r.Size, r.BlockSize)
	}
	return nil
}
