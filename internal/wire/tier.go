package wire

// Messages of the object tier (ops 37-41; docs/tier.md, docs/format.md).

import "time"

// TierBackend is an S3 bucket registered as a capacity tier. The secret
// travels to clients, which fetch objects themselves; tools never print it.
type TierBackend struct {
	Name      string
	Endpoint  string // http(s)://host[:port]
	Bucket    string
	Prefix    string // prepended to every object key
	Region    string
	AccessKey string
	SecretKey string
}

func (m *TierBackend) Encode(e *Encoder) {
	e.String(m.Name)
	e.String(m.Endpoint)
	e.String(m.Bucket)
	e.String(m.Prefix)
	e.String(m.Region)
	e.String(m.AccessKey)
	e.String(m.SecretKey)
}

func (m *TierBackend) Decode(d *Decoder) {
	m.Name = d.String()
	m.Endpoint = d.String()
	m.Bucket = d.String()
	m.Prefix = d.String()
	m.Region = d.String()
	m.AccessKey = d.String()
	m.SecretKey = d.String()
}

// TierSetReq adds Backend (its name must be new) or, with Remove, removes
// the backend named Backend.Name (refused while files are archived to it is
// not checked: see docs/tier.md).
type TierSetReq struct {
	Backend TierBackend
	Remove  bool
}

func (m *TierSetReq) Encode(e *Encoder) { m.Backend.Encode(e); e.Bool(m.Remove) }
func (m *TierSetReq) Decode(d *Decoder) { m.Backend.Decode(d); m.Remove = d.Bool() }

// TierListResp lists the registered backends, sorted by name.
type TierListResp struct{ Backends []TierBackend }

func (m *TierListResp) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Backends)))
	for i := range m.Backends {
		m.Backends[i].Encode(e)
	}
}

func (m *TierListResp) Decode(d *Decoder) {
	n := d.Count(7)
	m.Backends = make([]TierBackend, n)
	for i := range m.Backends {
		m.Backends[i].Decode(d)
	}
}

// HSM states of a regular file. A file without an HSM record is resident.
const (
	HsmResident uint8 = 0 // only on the targets
	HsmArchived uint8 = 1 // on the targets and, unchanged, in the tier
	HsmReleased uint8 = 2 // only in the tier; the targets hold none of it
	HsmDirty    uint8 = 3 // changed since it was archived; the object is stale
)

// HsmStateName names an HSM state as the tools print it.
func HsmStateName(s uint8) string {
	switch s {
	case HsmResident:
		return "resident"
	case HsmArchived:
		return "archived"
	case HsmReleased:
		return "released"
	case HsmDirty:
		return "dirty"
	}
	return "unknown"
}

// HsmRecord says where a file's archived copy is and how to check it. Gen
// is random per archive and stored in the object's metadata too, so a
// reader can tell the object it expects from one written over it. Size
// and Mtime are the file's when it was read for the archive; BlockCRCs
// holds the CRC32C of each BlockSize bytes of the content (the last block
// may be short), so that a ranged read can be checked on its own.
//
// A record of an object imported from the bucket's listing alone
// (`sluice tier import`, the default) has Gen 0, ETag (the object's ETag
// as the listing gave it, without quotes), no SHA256 and no BlockCRCs
// until a restore fills them: its ranged reads are pinned to that ETag
// (If-Match), so an object replaced in the bucket fails them. ETag is
// appended after the other fields when it is set (an older peer ignores
// it): by Encode for a record on its own, and by each message that carries
// a record among other fields, after all of them.
type HsmRecord struct {
	State     uint8
	Backend   string
	Key       string
	Gen       uint64
	Size      uint64
	Mtime     int64
	CRC32C    uint32
	SHA256    []byte // 32 bytes
	BlockSize uint32
	BlockCRCs []uint32
	ETag      string
}

// Encode encodes a record on its own, its ETag last.
func (m *HsmRecord) Encode(e *Encoder) {
	m.EncodeBody(e)
	if m.ETag != "" {
		e.String(m.ETag)
	}
}

// Decode decodes a record on its own.
func (m *HsmRecord) Decode(d *Decoder) {
	m.DecodeBody(d)
	m.ETag = ""
	if d.More() {
		m.ETag = d.String()
	}
}

// EncodeBody encodes the record without its ETag, for a message (or a
// stored value) that carries it among other fields and appends the ETag
// after them.
func (m *HsmRecord) EncodeBody(e *Encoder) {
	e.U8(m.State)
	e.String(m.Backend)
	e.String(m.Key)
	e.U64(m.Gen)
	e.U64(m.Size)
	e.I64(m.Mtime)
	e.U32(m.CRC32C)
	e.Bytes(m.SHA256)
	e.U32(m.BlockSize)
	e.Uvarint(uint64(len(m.BlockCRCs)))
	for _, c := range m.BlockCRCs {
		e.U32(c)
	}
}

// DecodeBody decodes what EncodeBody encoded; ETag is left as it was.
func (m *HsmRecord) DecodeBody(d *Decoder) {
	m.State = d.U8()
	m.Backend = d.String()
	m.Key = d.String()
	m.Gen = d.U64()
	m.Size = d.U64()
	m.Mtime = d.I64()
	m.CRC32C = d.U32()
	m.SHA256 = d.Bytes()
	m.BlockSize = d.U32()
	n := d.Count(4)
	m.BlockCRCs = nil
	if n > 0 {
		m.BlockCRCs = make([]uint32, n)
		for i := range m.BlockCRCs {
			m.BlockCRCs[i] = d.U32()
		}
	}
}

// HSM update actions (HsmUpdateReq.Action).
const (
	// HsmActArchived records Record as the file's archived copy if the
	// file's size and mtime still equal Record's and it is not released.
	HsmActArchived uint8 = 1
	// HsmActRelease makes an archived file released and queues the
	// removal of its chunks (the metadata service's garbage collector).
	// A file with chunks must be frozen for its release first
	// (HsmActFreeze), and its chunks compared with the copy (ADR 0023).
	HsmActRelease uint8 = 2
	// HsmActRestored makes a released file archived again once its bytes
	// are back on the targets (Record.Gen must match).
	HsmActRestored uint8 = 3
	// HsmActRemove drops the record (not of a released file) and queues
	// its object for deletion.
	HsmActRemove uint8 = 4
	// HsmActRestoring asks whether a restore of a released file may write
	// its chunks: not while the release's chunk removal is still queued
	// (errs.Busy). It changes nothing.
	HsmActRestoring uint8 = 5
	// HsmActImport makes an empty regular file without chunks or record
	// a released file whose bytes are an object Sluice did not write
	// (`sluice tier import`): Record (generation 0, the object's key,
	// size, mtime and checksums) becomes its record and its size and
	// mtime become Record's.
	HsmActImport uint8 = 6
	// HsmActFreeze freezes the chunks of an archived file for its release
	// (ADR 0023): writes to them fail with errs.Moved from then on, until
	// the release commits (HsmActRelease), HsmActThaw, or the freeze's
	// lease (meta.ReleaseLease) runs out. Sent again, it renews the lease.
	// The answer is the file's record: a released file is left alone.
	HsmActFreeze uint8 = 7
	// HsmActThaw gives up a release frozen by HsmActFreeze.
	HsmActThaw uint8 = 8
	// HsmActCopyLost says that the copy Record (its Gen and Key) is gone
	// from the bucket or was replaced there outside Sluice (a release's
	// check found it so): an archived file with that copy becomes dirty,
	// to be archived again before it can be released.
	HsmActCopyLost uint8 = 9
)

// HsmUpdateReq is one step of the HSM state machine on file Ino.
type HsmUpdateReq struct {
	Ino    uint64
	Action uint8
	Record HsmRecord
}

func (m *HsmUpdateReq) Encode(e *Encoder) { e.U64(m.Ino); e.U8(m.Action); m.Record.Encode(e) }
func (m *HsmUpdateReq) Decode(d *Decoder) { m.Ino = d.U64(); m.Action = d.U8(); m.Record.Decode(d) }

// TierQueueItem is an object whose file is gone (or was archived again
// under another key): it may be deleted if its metadata still carries Gen.
type TierQueueItem struct {
	Ino     uint64
	Gen     uint64
	Backend string
	Key     string
}

// TierQueueReq removes the items Done (by Ino, Gen) from the delete queue,
// then lists up to Limit of the rest.
type TierQueueReq struct {
	Done  []TierQueueItem
	Limit uint32
}

func encodeQueueItems(e *Encoder, items []TierQueueItem) {
	e.Uvarint(uint64(len(items)))
	for _, it := range items {
		e.U64(it.Ino)
		e.U64(it.Gen)
		e.String(it.Backend)
		e.String(it.Key)
	}
}

func decodeQueueItems(d *Decoder) []TierQueueItem {
	n := d.Count(18)
	if n == 0 {
		return nil
	}
	items := make([]TierQueueItem, n)
	for i := range items {
		items[i] = TierQueueItem{Ino: d.U64(), Gen: d.U64(), Backend: d.String(), Key: d.String()}
	}
	return items
}

func (m *TierQueueReq) Encode(e *Encoder) { encodeQueueItems(e, m.Done); e.U32(m.Limit) }
func (m *TierQueueReq) Decode(d *Decoder) { m.Done = decodeQueueItems(d); m.Limit = d.U32() }

// TierQueueResp lists queued objects in (Ino, Gen) order.
type TierQueueResp struct{ Items []TierQueueItem }

func (m *TierQueueResp) Encode(e *Encoder) { encodeQueueItems(e, m.Items) }
func (m *TierQueueResp) Decode(d *Decoder) { m.Items = decodeQueueItems(d) }

// HsmClaimReq asks for, renews (Owner already holds it) or, with Drop,
// gives up the restore lease of released file Ino whose copy has
// generation Gen (0: any). Owner is a random ID of the restoring client;
// LeaseMs how long the lease lasts without a renewal (the service bounds
// it). OpHsmRestored takes the same request: Owner's restore is done.
// Full (appended later, sent only when set: an older service answers without it) asks the answer to
// carry the file's HSM record and attributes too (HsmClaim.Full): a
// restore needs both, and gets them in the claim's round trip.
type HsmClaimReq struct {
	Ino     uint64
	Gen     uint64
	Owner   uint64
	LeaseMs uint32
	Drop    bool
	Full    bool
	// Sums (OpHsmRestored; appended later, ignored by an older service)
	// are the CRC32C of each block of the object the restore copied, for
	// a record that has none (imported from a listing): the commit keeps
	// them in the record, so that a later release can compare the chunks
	// with the copy.
	Sums []uint32
}

func (m *HsmClaimReq) Encode(e *Encoder) {
	e.U64(m.Ino)
	e.U64(m.Gen)
	e.U64(m.Owner)
	e.U32(m.LeaseMs)
	e.Bool(m.Drop)
	if m.Full || len(m.Sums) > 0 {
		e.Bool(m.Full)
	}
	if len(m.Sums) > 0 {
		e.Uvarint(uint64(len(m.Sums)))
		for _, c := range m.Sums {
			e.U32(c)
		}
	}
}

func (m *HsmClaimReq) Decode(d *Decoder) {
	m.Ino = d.U64()
	m.Gen = d.U64()
	m.Owner = d.U64()
	m.LeaseMs = d.U32()
	m.Drop = d.Bool()
	m.Full = d.More() && d.Bool()
	m.Sums = nil
	if d.More() {
		if n := d.Count(4); n > 0 {
			m.Sums = make([]uint32, n)
			for i := range m.Sums {
				m.Sums[i] = d.U32()
			}
		}
	}
}

// HsmClaim is the answer to an HsmClaimReq: the file's HSM state and the
// restore lease after the request. The request's owner holds the lease
// when Owner is its ID; Owner 0: nobody. Epoch counts the grants since the
// file was released (a takeover has Epoch > 1); LeftMs is the lease's time
// left on the service's clock. Full is set when the request asked for it
// (appended later): the file's HSM record and attributes as the
// claim found them.
type HsmClaim struct {
	State  uint8
	Gen    uint64
	Owner  uint64
	Epoch  uint64
	LeftMs uint32
	Full   *HsmClaimFull
}

// HsmClaimFull is what a claim with HsmClaimReq.Full adds to its answer.
// Data (appended later; 0 from an older service) is the data ID under
// which the lease's holder writes the restored chunks (ADR 0023): the
// commit (OpHsmRestored) moves the file to it.
type HsmClaimFull struct {
	Record HsmRecord
	Attr   Attr
	Data   uint64
}

func (m *HsmClaim) Encode(e *Encoder) {
	e.U8(m.State)
	e.U64(m.Gen)
	e.U64(m.Owner)
	e.U64(m.Epoch)
	e.U32(m.LeftMs)
	if m.Full != nil {
		m.Full.Record.EncodeBody(e)
		m.Full.Attr.Encode(e)
		if m.Full.Data != 0 || m.Full.Record.ETag != "" {
			e.U64(m.Full.Data)
		}
		if m.Full.Record.ETag != "" {
			e.String(m.Full.Record.ETag)
		}
	}
}

func (m *HsmClaim) Decode(d *Decoder) {
	m.State = d.U8()
	m.Gen = d.U64()
	m.Owner = d.U64()
	m.Epoch = d.U64()
	m.LeftMs = d.U32()
	m.Full = nil
	if d.More() {
		m.Full = &HsmClaimFull{}
		m.Full.Record.DecodeBody(d)
		m.Full.Attr.Decode(d)
		if d.More() {
			m.Full.Data = d.U64()
		}
		if d.More() {
			m.Full.Record.ETag = d.String()
		}
	}
}

// HsmStats is what a metadata service decided about restores since it
// started (OpHsmStats; meta.RestoreTotals).
type HsmStats struct {
	Leases        uint64 // restore leases granted to a new holder
	Takeovers     uint64 // of those, expired leases taken over
	Restored      uint64 // restores committed
	RestoredBytes uint64 // the size of their files
	CutToZero     uint64 // released files cut to size 0 without a restore
}

func (m *HsmStats) Encode(e *Encoder) {
	e.U64(m.Leases)
	e.U64(m.Takeovers)
	e.U64(m.Restored)
	e.U64(m.RestoredBytes)
	e.U64(m.CutToZero)
}

func (m *HsmStats) Decode(d *Decoder) {
	m.Leases = d.U64()
	m.Takeovers = d.U64()
	m.Restored = d.U64()
	m.RestoredBytes = d.U64()
	m.CutToZero = d.U64()
}

// TierImportReq makes, in directory Parent, a released file for each
// entry: an object of backend Backend imported from its listing (HSM
// record of generation 0 pinned to the entry's ETag: HsmRecord), with
// permission bits Mode and Cred's owner, in one transaction.
//
// With Refresh, a file an earlier import made of the same object, whose
// object changed since (another ETag or size), takes the object's new
// size, mtime and ETag while it is released and no restore holds its
// lease (ImportUpdated); otherwise it keeps its bytes (ImportChanged),
// and an archived one, whose copy is gone, becomes dirty.
// Without it (and from a client before it, which never sends it) such a
// file counts as ImportPresent.
type TierImportReq struct {
	Parent  uint64
	Backend string
	Mode    uint32
	Cred    Cred
	Entries []TierImportEntry
	Refresh bool // a trailing optional field: older services ignore it
}

// TierImportEntry is one object to import: the file's name, the object's
// key (below the backend's prefix), size, mtime (ns) and ETag.
type TierImportEntry struct {
	Name  string
	Key   string
	Size  uint64
	Mtime int64
	ETag  string
}

func (m *TierImportReq) Encode(e *Encoder) {
	e.U64(m.Parent)
	e.String(m.Backend)
	e.U32(m.Mode)
	m.Cred.Encode(e)
	e.Uvarint(uint64(len(m.Entries)))
	for _, it := range m.Entries {
		e.String(it.Name)
		e.String(it.Key)
		e.U64(it.Size)
		e.I64(it.Mtime)
		e.String(it.ETag)
	}
	if m.Refresh {
		e.Bool(true)
	}
}

func (m *TierImportReq) Decode(d *Decoder) {
	m.Parent = d.U64()
	m.Backend = d.String()
	m.Mode = d.U32()
	m.Cred.Decode(d)
	n := d.Count(19) // the least an entry takes: three empty strings and two u64
	m.Entries = nil
	if n > 0 {
		m.Entries = make([]TierImportEntry, n)
		for i := range m.Entries {
			it := &m.Entries[i]
			it.Name = d.String()
			it.Key = d.String()
			it.Size = d.U64()
			it.Mtime = d.I64()
			it.ETag = d.String()
		}
	}
	m.Refresh = d.More() && d.Bool()
}

// What became of each entry of a TierImportReq (TierImportResp.Results).
const (
	ImportMade    uint8 = 0 // the released file was made
	ImportPresent uint8 = 1 // an earlier import made it of the same object
	ImportExists  uint8 = 2 // another file has the name: not replaced
	ImportInvalid uint8 = 3 // the entry is not valid (Errors says why)
	// Only with TierImportReq.Refresh:
	ImportUpdated uint8 = 4 // an earlier import made it of the object, which changed: the file now is the new object
	ImportChanged uint8 = 5 // the same, but the file has its bytes on the targets (kept; an archived one becomes dirty) or is being restored
	// ImportOwn: an import made the file, which is not the import of an
	// object any more (written and archived again, or its record
	// removed): kept, not replaced (2026-12-04; an older service says
	// ImportExists).
	ImportOwn uint8 = 6
)

// TierImportResp answers a TierImportReq: a result per entry, in order,
// and for each ImportInvalid one, in order, why.
type TierImportResp struct {
	Results []uint8
	Errors  []string
}

func (m *TierImportResp) Encode(e *Encoder) {
	e.Bytes(m.Results)
	e.Uvarint(uint64(len(m.Errors)))
	for _, s := range m.Errors {
		e.String(s)
	}
}

func (m *TierImportResp) Decode(d *Decoder) {
	m.Results = d.Bytes()
	n := d.Count(1)
	m.Errors = nil
	if n > 0 {
		m.Errors = make([]string, n)
		for i := range m.Errors {
			m.Errors[i] = d.String()
		}
	}
}

// TierForgetReq asks for the file Parent/Name, which an import made of
// object Key of backend Backend (its size, ETag and mtime as the client
// last read them from the file's HSM record), to be removed because the
// object is gone from the bucket, in one transaction: only while the file
// is still that import, released, with one link and no restore holding
// its lease (ForgetRemoved). A restored (archived) file keeps its bytes and
// becomes dirty, as its copy is gone; a dirty one, one being restored or
// one with other links is kept as it is (ForgetKept). Cred names who
// removed it in the audit trail.
type TierForgetReq struct {
	Parent  uint64
	Name    string
	Backend string
	Key     string
	Size    uint64
	Mtime   int64
	ETag    string
	Cred    Cred
}

func (m *TierForgetReq) Encode(e *Encoder) {
	e.U64(m.Parent)
	e.String(m.Name)
	e.String(m.Backend)
	e.String(m.Key)
	e.U64(m.Size)
	e.I64(m.Mtime)
	e.String(m.ETag)
	m.Cred.Encode(e)
}

func (m *TierForgetReq) Decode(d *Decoder) {
	m.Parent = d.U64()
	m.Name = d.String()
	m.Backend = d.String()
	m.Key = d.String()
	m.Size = d.U64()
	m.Mtime = d.I64()
	m.ETag = d.String()
	m.Cred.Decode(d)
}

// What a TierForgetReq did (TierForgetResp.Result).
const (
	ForgetRemoved uint8 = 0 // the file was removed
	ForgetKept    uint8 = 1 // the file has bytes of its own (an archived one is now dirty) or is being restored: kept
	ForgetOther   uint8 = 2 // the name is not (any more) the import of that object, or is gone: nothing done
)

// TierForgetResp answers a TierForgetReq.
type TierForgetResp struct{ Result uint8 }

func (m *TierForgetResp) Encode(e *Encoder) { e.U8(m.Result) }
func (m *TierForgetResp) Decode(d *Decoder) { m.Result = d.U8() }

// MaxInos is the most inodes one InosReq (OpHsmStates, OpTouchAtime) may
// name.
const MaxInos = 1024

// HsmGone is the state OpHsmStates gives an inode that is not a regular
// file (any more): removed, or of another type.
const HsmGone uint8 = 0xff

// InosReq names up to MaxInos inodes: the files whose HSM states
// OpHsmStates reads, or that OpTouchAtime gives a new access time (each
// regular file whose access time is more than RelatimeWindow old gets the
// service's now, without a ctime change and without a change-feed event:
// an access time is advisory; removed inodes are skipped).
type InosReq struct{ Inos []uint64 }

func (m *InosReq) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Inos)))
	for _, ino := range m.Inos {
		e.U64(ino)
	}
}

func (m *InosReq) Decode(d *Decoder) {
	m.Inos = make([]uint64, d.Count(8))
	for i := range m.Inos {
		m.Inos[i] = d.U64()
	}
}

// HsmStatesResp has one state per inode asked for, in order (HsmResident
// for a file that has no record, HsmGone for one that is not a regular
// file), all read in one transaction.
type HsmStatesResp struct{ States []uint8 }

func (m *HsmStatesResp) Encode(e *Encoder) { e.Bytes(m.States) }
func (m *HsmStatesResp) Decode(d *Decoder) { m.States = d.Bytes() }

// RelatimeWindow is how old a file's access time must be for a read to
// set it to now (OpTouchAtime), as Linux's relatime does: at most one
// update a day per file.
const RelatimeWindow = 24 * time.Hour
