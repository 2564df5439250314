package wire

import (
	"github.com/sluice-fs/sluice/internal/placement"
)

// Op identifies a request type. Values are part of the wire format.
type Op uint16

// Metadata service operations (1-63).
const (
	OpCluster     Op = 1  // Empty -> ClusterInfo
	OpStatfs      Op = 2  // Empty -> StatfsResp
	OpResolve     Op = 3  // ResolveReq -> Attr
	OpLookup      Op = 4  // NameReq -> Attr
	OpGetAttr     Op = 5  // InoReq -> Attr
	OpSetAttr     Op = 6  // SetAttrReq -> Attr
	OpCreate      Op = 7  // CreateReq -> EntryResp (regular files and device/fifo/socket nodes)
	OpMkdir       Op = 8  // CreateReq -> EntryResp
	OpSymlink     Op = 9  // SymlinkReq -> Attr
	OpReadlink    Op = 10 // InoReq -> StringResp
	OpUnlink      Op = 11 // NameReq -> DirsResp
	OpRmdir       Op = 12 // NameReq -> DirsResp
	OpRename      Op = 13 // RenameReq -> Empty
	OpLink        Op = 14 // LinkReq -> Attr
	OpReadDir     Op = 15 // ReadDirReq -> ReadDirResp
	OpGetXattr    Op = 16 // XattrReq -> BytesResp
	OpSetXattr    Op = 17 // XattrReq -> Empty
	OpListXattr   Op = 18 // InoReq -> NamesResp
	OpRemoveXattr Op = 19 // XattrReq -> Empty
	OpGetLayout   Op = 20 // InoReq -> LayoutMsg
	OpSetLayout   Op = 21 // SetLayoutReq -> Empty
	OpCommitWrite Op = 22 // CommitWriteReq -> Attr
	OpRegister    Op = 23 // RegisterReq -> RegisterResp (a storage node announces its targets)
	OpHeartbeat   Op = 24 // HeartbeatReq -> HeartbeatResp (a storage node is alive)
	OpSyncDone    Op = 25 // SyncDoneReq -> Empty (a replica caught up with its chain)
	OpMetaSync    Op = 26 // Empty -> Empty (every metadata change acknowledged before is durable)
	OpWriteInline Op = 27 // WriteInlineReq -> WriteInlineResp (data of a small file, kept in the metadata)
	OpReadInline  Op = 28 // ReadInlineReq -> ReadInlineResp
	OpSetChunks   Op = 29 // InoReq -> Attr (the file's data beyond its inline bytes goes to the targets from now on)
	OpResolveRead Op = 30 // ResolveReq -> ResolveReadResp (Resolve, with a regular file's inline bytes and an xattr)
	OpPoolList    Op = 31 // Empty -> PoolListResp (the pools of targets, with capacity and fill)
	OpPoolChange  Op = 32 // PoolChangeReq -> Empty (create, add to, remove from or delete a pool)
	OpSetPool     Op = 33 // SetPoolReq -> Empty (the pool of a directory's default layout)
	OpPutFile     Op = 34 // PutFileReq -> EntryResp (a whole small file, inline, with its xattrs, created or replaced at once)
	OpOpenIno     Op = 63 // InoReq -> ResolveReadResp (GetAttr for an open: with a regular file's inline bytes and, if released, its HSM record)

	// OpWriteInlineAttr is OpWriteInline followed, in the same
	// transaction, by an attribute change of the same file (2026-12-01;
	// an older service answers it "not supported").
	OpWriteInlineAttr Op = 42 // WriteInlineAttrReq -> WriteInlineResp
	// OpCommitWriteAttr is OpCommitWrite followed, in the same
	// transaction, by an attribute change of the same file (2026-12-02;
	// an older service answers it "not supported").
	OpCommitWriteAttr Op = 74 // CommitWriteAttrReq -> Attr
	// OpTierImport makes released files of objects imported from a
	// bucket's listing, many in one transaction (2026-12-02; an older
	// service answers it "not supported").
	OpTierImport Op = 75 // TierImportReq -> TierImportResp
	// OpTierForget removes the file an import made of an object that is
	// gone from the bucket (2026-12-04; an older service answers it "not
	// supported").
	OpTierForget Op = 78 // TierForgetReq -> TierForgetResp
	// OpTierImportDry answers what OpTierImport would with the same
	// request, changing nothing: `sluice tier import --dry-run`
	// (late 2026-12-04; an older service answers it "not supported").
	OpTierImportDry Op = 79 // TierImportReq -> TierImportResp
	OpAuditList     Op = 43 // AuditListReq -> AuditListResp (the audit trail, sealed first)
	OpAuditVerify   Op = 44 // Empty -> AuditVerifyResp (checks the audit trail's hash chain)

	// Quality of service (qos.go, docs/qos.md); 47 and 48 are reserved for it.
	OpQosSet  Op = 45 // QosSetReq -> Empty (a class's weight, a job's limit)
	OpQosList Op = 46 // Empty -> QosConfig

	// Checkpoint absorb (ADR 0013; absorb.go).
	OpAbsorbGet  Op = 49 // InoReq -> AbsorbPolicy (a directory's policy, inherited)
	OpAbsorbSet  Op = 50 // AbsorbSetReq -> Empty
	OpStagedAdd  Op = 51 // StagedReq -> Empty (a file has data staged on a client, not yet drained)
	OpStagedDone Op = 52 // StagedReq -> Empty (that data is durable on the targets)
	OpStagedList Op = 53 // Empty -> StagedListResp

	// Object tier (docs/tier.md): backends, HSM records, the delete queue.
	OpTierSet   Op = 37 // TierSetReq -> Empty (add or remove a backend)
	OpTierList  Op = 38 // Empty -> TierListResp (backends, with their credentials)
	OpHsmGet    Op = 39 // InoReq -> HsmRecord (State HsmResident when the file has none)
	OpHsmUpdate Op = 40 // HsmUpdateReq -> HsmRecord (an archive, release, restore or removal step)
	OpTierQueue Op = 41 // TierQueueReq -> TierQueueResp (objects of removed files to delete)

	// Restores of released files (ADR 0016): a lease in the HSM record.
	OpHsmClaim    Op = 54 // HsmClaimReq -> HsmClaim (take, renew or drop a released file's restore lease)
	OpHsmRestored Op = 55 // HsmClaimReq -> HsmRecord (the lease holder's restore is on the targets: archived)
	OpHsmStats    Op = 62 // Empty -> HsmStats (the service's restore counts since it started)
	OpHsmStates   Op = 76 // InosReq -> HsmStatesResp (the HSM states of many files in one transaction)
	OpTouchAtime  Op = 77 // InosReq -> Empty (access times of files opened for reading, relatime-style)
)

// Storage target operations (64-127).
const (
	OpChunkWrite    Op = 64 // ChunkWriteReq + data -> Empty
	OpChunkRead     Op = 65 // ChunkReadReq -> ChunkReadResp + data
	OpChunkSync     Op = 66 // ChunkSyncReq -> Empty
	OpChunkTruncate Op = 67 // ChunkTruncateReq -> Empty
	OpChunkPunch    Op = 91 // ChunkPunchReq -> Empty (zero a range, freeing its whole blocks)
	OpChunkMap      Op = 92 // ChunkMapReq -> ChunkMapResp (where a chunk holds data: SEEK_DATA, SEEK_HOLE)
	OpChunkRemove   Op = 68 // ChunkRemoveReq -> Empty
	OpTargetStat    Op = 69 // TargetReq -> TargetStat
	OpChunkList     Op = 70 // ChunkListReq -> ChunkListResp (resync)

	// KV-cache store (kvcache.go; docs/kvcache.md).
	OpKVCreate Op = 81 // KVCreateReq -> Empty
	OpKVStat   Op = 82 // KVReq -> KVStatResp
	OpKVPut    Op = 83 // KVPutReq + data -> KVPutResp
	OpKVGet    Op = 84 // KVGetReq -> KVGetResp + data
	OpKVExists Op = 85 // KVKeysReq -> KVExistsResp
	OpKVDelete Op = 86 // KVKeysReq -> KVDeleteResp
	OpKVList   Op = 87 // KVListReq -> KVListResp
)

// Flags of chunk requests (ChunkRef.Flags, ChunkSetReq.Flags).
const (
	// FlagForwarded marks a request that a chain's replica forwards to the
	// next one; clients never set it.
	FlagForwarded uint8 = 1 << iota
	// FlagResync marks a copy from a chain's tail to a syncing replica.
	FlagResync
)

// Message is a request or response body.
type Message interface {
	Encode(e *Encoder)
	Decode(d *Decoder)
}

// Empty is a body with no fields.
type Empty struct{}

func (*Empty) Encode(*Encoder) {}
func (*Empty) Decode(*Decoder) {}

// Cred is who performs an operation; new inodes are owned by it.
type Cred struct{ Uid, Gid uint32 }

func (c *Cred) Encode(e *Encoder) { e.U32(c.Uid); e.U32(c.Gid) }
func (c *Cred) Decode(d *Decoder) { c.Uid = d.U32(); c.Gid = d.U32() }

// LayoutMsg carries a placement.Layout and, for a directory, the pool its
// new files are placed in ("" for none; appended in version 2.3). Released
// (appended later, sent only when set) says that a regular file is
// released to the object tier: its chunks are frozen or gone, and a
// writer restores it before writing (ADR 0023).
type LayoutMsg struct {
	placement.Layout
	Pool     string
	Released bool
}

func (m *LayoutMsg) Encode(e *Encoder) {
	EncodeLayout(e, &m.Layout)
	e.String(m.Pool)
	if m.Released {
		e.Bool(true)
	}
}

func (m *LayoutMsg) Decode(d *Decoder) {
	DecodeLayout(d, &m.Layout)
	m.Pool, m.Released = "", false
	if d.More() {
		m.Pool = d.String()
	}
	m.Released = d.More() && d.Bool()
}

// Pool change kinds (PoolChangeReq.Kind).
const (
	PoolCreate uint8 = 1 + iota // a new pool of Targets (maybe none)
	PoolAdd                     // Targets join the pool
	PoolRemove                  // Targets leave the pool
	PoolDelete                  // the pool goes (Targets must be empty)
)

// PoolChangeReq changes the pool Name.
type PoolChangeReq struct {
	Kind    uint8
	Name    string
	Targets []placement.TargetID
}

func (m *PoolChangeReq) Encode(e *Encoder) {
	e.U8(m.Kind)
	e.String(m.Name)
	encodeTargetIDs(e, m.Targets)
}

func (m *PoolChangeReq) Decode(d *Decoder) {
	m.Kind = d.U8()
	m.Name = d.String()
	m.Targets = decodeTargetIDs(d)
}

// PoolInfo is a pool: its targets, sorted, and their capacity and bytes
// used (targets sharing a file system counted once).
type PoolInfo struct {
	Name           string
	Targets        []placement.TargetID
	Capacity, Used int64
}

// PoolListResp lists the pools, sorted by name.
type PoolListResp struct{ Pools []PoolInfo }

func (m *PoolListResp) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Pools)))
	for i := range m.Pools {
		p := &m.Pools[i]
		e.String(p.Name)
		encodeTargetIDs(e, p.Targets)
		e.I64(p.Capacity)
		e.I64(p.Used)
	}
}

func (m *PoolListResp) Decode(d *Decoder) {
	n := d.Count(18)
	m.Pools = nil
	if n > 0 {
		m.Pools = make([]PoolInfo, n)
	}
	for i := range m.Pools {
		p := &m.Pools[i]
		p.Name = d.String()
		p.Targets = decodeTargetIDs(d)
		p.Capacity = d.I64()
		p.Used = d.I64()
	}
}

// SetPoolReq sets the pool of directory Ino's default layout: new files
// below it are placed on the pool's targets ("" clears it).
type SetPoolReq struct {
	Ino  uint64
	Pool string
}

func (m *SetPoolReq) Encode(e *Encoder) { e.U64(m.Ino); e.String(m.Pool) }
func (m *SetPoolReq) Decode(d *Decoder) { m.Ino = d.U64(); m.Pool = d.String() }

// layoutHasData, set in the replicas byte of an encoded layout, says that
// a u64 data ID (placement.Layout.Data) follows the chain IDs (version 2.4;
// layouts without one encode as before).
const layoutHasData = 0x80

// layoutHasComps, set in the replicas byte, says that a progressive
// layout's components follow (after the data ID, if any; ADR 0021): a
// uvarint count, then each component's i64 end, u32 stripe size, u16
// stripe count and string pool.
const layoutHasComps = 0x40

// EncodeLayout writes a layout: stripe size, count, replicas, then the
// chain IDs, then the data ID if it has one.
func EncodeLayout(e *Encoder, l *placement.Layout) {
	e.U32(l.StripeSize)
	e.U16(l.StripeCount)
	r := l.Replicas &^ (layoutHasData | layoutHasComps) // valid layouts have at most MaxReplicas
	if l.Data != 0 {
		r |= layoutHasData
	}
	if len(l.Comps) > 0 {
		r |= layoutHasComps
	}
	e.U8(r)
	e.Uvarint(uint64(len(l.Chains)))
	for _, t := range l.Chains {
		e.U32(uint32(t))
	}
	if l.Data != 0 {
		e.U64(l.Data)
	}
	if len(l.Comps) > 0 {
		e.Uvarint(uint64(len(l.Comps)))
		for _, c := range l.Comps {
			e.I64(c.End)
			e.U32(c.StripeSize)
			e.U16(c.StripeCount)
			e.String(c.Pool)
		}
	}
}

// DecodeLayout reads what EncodeLayout wrote.
func DecodeLayout(d *Decoder, l *placement.Layout) {
	l.StripeSize = d.U32()
	l.StripeCount = d.U16()
	r := d.U8()
	l.Replicas = r &^ (layoutHasData | layoutHasComps)
	n := d.Count(4)
	l.Chains = nil
	if n > 0 {
		l.Chains = make([]placement.ChainID, n)
		for i := range l.Chains {
			l.Chains[i] = placement.ChainID(d.U32())
		}
	}
	l.Data = 0
	if r&layoutHasData != 0 {
		if l.Data = d.U64(); l.Data == 0 {
			d.fail() // encoded only when set
		}
	}
	l.Comps = nil
	if r&layoutHasComps != 0 {
		n := d.Count(15)
		if n == 0 {
			d.fail() // encoded only when there are some
		}
		if n > 0 {
			l.Comps = make([]placement.Comp, n)
			for i := range l.Comps {
				c := &l.Comps[i]
				c.End = d.I64()
				c.StripeSize = d.U32()
				c.StripeCount = d.U16()
				c.Pool = d.String()
			}
		}
	}
}

// Attr is an inode's attributes. Mode holds the file type bits and the
// permission bits as in Linux st_mode. Times are nanoseconds since the Unix
// epoch. Layout is set for regular files (and is a directory's default
// layout, targets empty, for directories).
type Attr struct {
	Ino    uint64
	Mode   uint32
	Nlink  uint32
	Uid    uint32
	Gid    uint32
	Rdev   uint32
	Size   uint64
	Atime  int64
	Mtime  int64
	Ctime  int64
	Layout placement.Layout
	// Flags says where a regular file's data lives (AttrChunks), and
	// InlineLen how many of its first bytes the metadata service holds
	// (inline data; docs/format.md, ADR 0009).
	Flags     uint8
	InlineLen uint32
}

// Attr.Flags.
const (
	// AttrChunks: the file's bytes from InlineLen on are on the targets
	// (chunks may exist). Without it every byte is inline (or a hole), and
	// inline data may grow; with it InlineLen never grows again.
	AttrChunks uint8 = 1 << iota
	// AttrReleased: the file is released to the object tier: its bytes
	// are in S3 only (OpHsmGet says where), none on the targets.
	AttrReleased
	// AttrUnchanged, in the answer to a change that carried If fields
	// (CommitWriteReq, WriteInlineReq, SetAttrReq): the file's mtime and size before
	// the change were the If fields, so nobody changed the file between
	// the requester's previous change and this one.
	AttrUnchanged
)

func (a *Attr) Encode(e *Encoder) {
	e.U64(a.Ino)
	e.U32(a.Mode)
	e.U32(a.Nlink)
	e.U32(a.Uid)
	e.U32(a.Gid)
	e.U32(a.Rdev)
	e.U64(a.Size)
	e.I64(a.Atime)
	e.I64(a.Mtime)
	e.I64(a.Ctime)
	EncodeLayout(e, &a.Layout)
	e.U8(a.Flags)
	e.U32(a.InlineLen)
}

func (a *Attr) Decode(d *Decoder) {
	a.Ino = d.U64()
	a.Mode = d.U32()
	a.Nlink = d.U32()
	a.Uid = d.U32()
	a.Gid = d.U32()
	a.Rdev = d.U32()
	a.Size = d.U64()
	a.Atime = d.I64()
	a.Mtime = d.I64()
	a.Ctime = d.I64()
	DecodeLayout(d, &a.Layout)
	a.Flags = d.U8()
	a.InlineLen = d.U32()
}

// EntryResp answers OpCreate and OpMkdir: the new entry's attributes and,
// when the service sends them, those of the directory holding it as the
// change left them (a mount answers the kernel's next getattr of that
// directory from them). Older services end after Attr: Dir stays nil.
// OpCreate's answer for an existing regular file (a create without
// O_EXCL) then has the file's cut generation (HasCut, Cut; appended
// 2026-12-05, ADR 0031), so that a writer opening it with O_CREATE starts
// from it; older services send none.
type EntryResp struct {
	Attr
	Dir    *Attr
	HasCut bool
	Cut    uint64
}

func (m *EntryResp) Encode(e *Encoder) {
	m.Attr.Encode(e)
	e.Bool(m.Dir != nil)
	if m.Dir != nil {
		m.Dir.Encode(e)
	}
	if m.HasCut {
		e.U64(m.Cut)
	}
}

func (m *EntryResp) Decode(d *Decoder) {
	m.Attr.Decode(d)
	m.Dir, m.HasCut, m.Cut = nil, false, 0
	if d.More() && d.Bool() {
		m.Dir = new(Attr)
		m.Dir.Decode(d)
	}
	if d.More() {
		m.HasCut, m.Cut = true, d.U64()
	}
}

// DirsResp answers OpUnlink and OpRmdir: the attributes of the directories
// the change touched, as it left it. Older services send nothing (Empty):
// Dirs stays empty.
type DirsResp struct {
	Dirs []Attr
}

func (m *DirsResp) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Dirs)))
	for i := range m.Dirs {
		m.Dirs[i].Encode(e)
	}
}

func (m *DirsResp) Decode(d *Decoder) {
	m.Dirs = nil
	if !d.More() {
		return
	}
	n := d.Count(attrMinSize)
	if n > 0 {
		m.Dirs = make([]Attr, n)
	}
	for i := range m.Dirs {
		m.Dirs[i].Decode(d)
	}
}

// attrMinSize is the fewest bytes an encoded Attr takes.
const attrMinSize = 8 + 5*4 + 8 + 3*8 + 8 + 1 + 4 // the layout takes at least 8

// TargetAddr says where a storage target is served.
type TargetAddr struct {
	ID             placement.TargetID
	Addr           string
	Node           string // the storage node hosting it
	Healthy        bool
	Capacity, Used int64
	// FS identifies the file system holding the target on its node (see
	// TargetStat.FS); 0 if unknown.
	FS uint64
	// Draining: new data is placed elsewhere, and `sluice target drain`
	// moves the files that have data on it (docs/placement.md).
	Draining bool
}

func encodeTargetAddr(e *Encoder, t *TargetAddr) {
	e.U32(uint32(t.ID))
	e.String(t.Addr)
	e.String(t.Node)
	e.Bool(t.Healthy)
	e.I64(t.Capacity)
	e.I64(t.Used)
}

func decodeTargetAddr(d *Decoder, t *TargetAddr) {
	t.ID = placement.TargetID(d.U32())
	t.Addr = d.String()
	t.Node = d.String()
	t.Healthy = d.Bool()
	t.Capacity = d.I64()
	t.Used = d.I64()
}

// EncodeChain writes a chain: ID, version, then its replicas.
func EncodeChain(e *Encoder, c *placement.Chain) {
	e.U32(uint32(c.ID))
	e.U64(c.Version)
	e.Uvarint(uint64(len(c.Replicas)))
	for _, r := range c.Replicas {
		e.U32(uint32(r.Target))
		e.U8(uint8(r.State))
	}
}

// DecodeChain reads what EncodeChain wrote.
func DecodeChain(d *Decoder, c *placement.Chain) {
	c.ID = placement.ChainID(d.U32())
	c.Version = d.U64()
	n := d.Count(5)
	c.Replicas = make([]placement.Replica, n)
	for i := range c.Replicas {
		c.Replicas[i].Target = placement.TargetID(d.U32())
		c.Replicas[i].State = placement.ReplicaState(d.U8())
	}
}

// ChainMsg carries a placement.Chain.
type ChainMsg struct{ placement.Chain }

func (m *ChainMsg) Encode(e *Encoder) { EncodeChain(e, &m.Chain) }
func (m *ChainMsg) Decode(d *Decoder) { DecodeChain(d, &m.Chain) }

// ClusterInfo describes the file system to a client: its targets and its
// replicated chains (chains of one replica are implicit: chain t is target
// t), with the version of the chain table.
type ClusterInfo struct {
	FSID          string
	RootIno       uint64
	Targets       []TargetAddr
	ChainsVersion uint64
	Chains        []placement.Chain
	Nodes         []NodeInfo
	// InlineMax is the most bytes a file may keep in the metadata service
	// (0: none; appended in version 2.2).
	InlineMax uint32
}

// NodeInfo is a storage node as the metadata service sees it.
type NodeInfo struct {
	Name, Addr string
	Alive      bool
	LastSeen   int64 // unix ns of its last heartbeat
	Resyncs    []ResyncStat
}

func (m *ClusterInfo) Encode(e *Encoder) {
	e.String(m.FSID)
	e.U64(m.RootIno)
	e.Uvarint(uint64(len(m.Targets)))
	for i := range m.Targets {
		encodeTargetAddr(e, &m.Targets[i])
	}
	e.U64(m.ChainsVersion)
	e.Uvarint(uint64(len(m.Chains)))
	for i := range m.Chains {
		EncodeChain(e, &m.Chains[i])
	}
	e.Uvarint(uint64(len(m.Nodes)))
	for _, n := range m.Nodes {
		e.String(n.Name)
		e.String(n.Addr)
		e.Bool(n.Alive)
		e.I64(n.LastSeen)
		encodeResyncs(e, n.Resyncs)
	}
	// Appended in version 2.1: the targets' file systems.
	e.Uvarint(uint64(len(m.Targets)))
	for i := range m.Targets {
		e.U64(m.Targets[i].FS)
	}
	e.U32(m.InlineMax) // appended in version 2.2
	// Appended 2026-11-24: which targets are draining.
	e.Uvarint(uint64(len(m.Targets)))
	for i := range m.Targets {
		e.Bool(m.Targets[i].Draining)
	}
}

func (m *ClusterInfo) Decode(d *Decoder) {
	m.FSID = d.String()
	m.RootIno = d.U64()
	n := d.Count(23)
	m.Targets = make([]TargetAddr, n)
	for i := range m.Targets {
		decodeTargetAddr(d, &m.Targets[i])
	}
	m.ChainsVersion = d.U64()
	n = d.Count(13)
	m.Chains = make([]placement.Chain, n)
	for i := range m.Chains {
		DecodeChain(d, &m.Chains[i])
	}
	n = d.Count(12)
	m.Nodes = make([]NodeInfo, n)
	for i := range m.Nodes {
		nd := &m.Nodes[i]
		nd.Name = d.String()
		nd.Addr = d.String()
		nd.Alive = d.Bool()
		nd.LastSeen = d.I64()
		nd.Resyncs = decodeResyncs(d)
	}
	if d.More() {
		fs := decodeFSList(d, len(m.Targets))
		for i := range fs {
			m.Targets[i].FS = fs[i]
		}
	}
	if d.More() {
		m.InlineMax = d.U32()
	}
	if d.More() {
		if n := d.Count(1); n != len(m.Targets) {
			d.fail()
		} else {
			for i := range m.Targets {
				m.Targets[i].Draining = d.Bool()
			}
		}
	}
}

// decodeFSList reads the list of file system IDs appended to a message
// with n targets; a list of another length is malformed.
func decodeFSList(d *Decoder, n int) []uint64 {
	if d.Count(8) != n {
		d.fail()
		return nil
	}
	fs := make([]uint64, n)
	for i := range fs {
		fs[i] = d.U64()
	}
	return fs
}

// StatfsResp is file-system-wide usage.
type StatfsResp struct {
	Capacity, Used, Free int64 // bytes, summed over targets
	Inodes               uint64
	Targets              uint32
}

func (m *StatfsResp) Encode(e *Encoder) {
	e.I64(m.Capacity)
	e.I64(m.Used)
	e.I64(m.Free)
	e.U64(m.Inodes)
	e.U32(m.Targets)
}
func (m *StatfsResp) Decode(d *Decoder) {
	m.Capacity = d.I64()
	m.Used = d.I64()
	m.Free = d.I64()
	m.Inodes = d.U64()
	m.Targets = d.U32()
}

// ResolveReq walks a slash-separated path from the root. With Follow, a
// symlink in the last component is followed; symlinks in earlier components
// always are (at most 40 in all, then errs.Loop).
type ResolveReq struct {
	Path   string
	Follow bool
	// Xattr names an extended attribute OpResolveRead returns too
	// (appended in version 2.2; empty: none).
	Xattr string
}

func (m *ResolveReq) Encode(e *Encoder) { e.String(m.Path); e.Bool(m.Follow); e.String(m.Xattr) }
func (m *ResolveReq) Decode(d *Decoder) {
	m.Path = d.String()
	m.Follow = d.Bool()
	if d.More() {
		m.Xattr = d.String()
	}
}

// ResolveReadResp answers OpResolveRead: the attributes, a regular file's
// inline bytes (all of them), and the extended attribute the request
// named, if the inode has it.
type ResolveReadResp struct {
	Attr     Attr
	Data     []byte
	HasXattr bool
	Xattr    []byte
	// Hsm is a released file's HSM record (where its copy is), so that
	// its first read needs no OpHsmGet; nil otherwise. Appended: a reply
	// of an older service has none.
	Hsm *HsmRecord
	// FeedEpoch and FeedCursor (OpOpenIno; appended, zero from an older
	// service or when nobody watches the change feed) are the change
	// feed's position before the attributes were read: they reflect
	// every change of the feed's epoch before FeedCursor (ADR 0022).
	FeedEpoch, FeedCursor uint64
	// Cut is a regular file's cut generation (OpOpenIno, 2026-12-05, and
	// OpResolveRead since that evening; appended after the HSM record's
	// ETag, which is then sent even when empty; 0 from an older service):
	// a writer that opens the file starts from it (wire/cut.go).
	Cut uint64
}

func (m *ResolveReadResp) Encode(e *Encoder) {
	m.Attr.Encode(e)
	e.Bytes(m.Data)
	e.Bool(m.HasXattr)
	e.Bytes(m.Xattr)
	e.Bool(m.Hsm != nil)
	if m.Hsm != nil {
		m.Hsm.EncodeBody(e)
	}
	e.Uvarint(m.FeedEpoch)
	e.Uvarint(m.FeedCursor)
	if (m.Hsm != nil && m.Hsm.ETag != "") || m.Cut != 0 {
		etag := ""
		if m.Hsm != nil {
			etag = m.Hsm.ETag
		}
		e.String(etag)
	}
	if m.Cut != 0 {
		e.U64(m.Cut)
	}
}

func (m *ResolveReadResp) Decode(d *Decoder) {
	m.Attr.Decode(d)
	m.Data = d.Bytes()
	m.HasXattr = d.Bool()
	m.Xattr = d.Bytes()
	m.Hsm = nil
	if d.More() && d.Bool() {
		m.Hsm = new(HsmRecord)
		m.Hsm.DecodeBody(d)
	}
	m.FeedEpoch, m.FeedCursor = 0, 0
	if d.More() {
		m.FeedEpoch = d.Uvarint()
		m.FeedCursor = d.Uvarint()
	}
	if d.More() {
		etag := d.String()
		if m.Hsm != nil {
			m.Hsm.ETag = etag
		}
	}
	m.Cut = 0
	if d.More() {
		m.Cut = d.U64()
	}
}

// NameReq names an entry in a directory.
type NameReq struct {
	Parent uint64
	Name   string
	Cred   *Cred // who asks, for the audit trail (OpUnlink, OpRmdir); optional
}

func (m *NameReq) Encode(e *Encoder) { e.U64(m.Parent); e.String(m.Name); encodeOptCred(e, m.Cred) }
func (m *NameReq) Decode(d *Decoder) {
	m.Parent = d.U64()
	m.Name = d.String()
	m.Cred = decodeOptCred(d)
}

// encodeOptCred appends an optional credential to a request that had none
// before: a bool, then the Cred if set. Older services ignore it (a
// decoder ignores trailing bytes); decodeOptCred reads nil from older
// clients, which send nothing.
func encodeOptCred(e *Encoder, c *Cred) {
	e.Bool(c != nil)
	if c != nil {
		c.Encode(e)
	}
}

func decodeOptCred(d *Decoder) *Cred {
	if !d.More() || !d.Bool() {
		return nil
	}
	c := new(Cred)
	c.Decode(d)
	return c
}

// InoReq names an inode.
type InoReq struct{ Ino uint64 }

func (m *InoReq) Encode(e *Encoder) { e.U64(m.Ino) }
func (m *InoReq) Decode(d *Decoder) { m.Ino = d.U64() }

// SetAttr validity bits.
const (
	SetMode uint32 = 1 << iota
	SetUid
	SetGid
	SetSize
	SetAtime
	SetMtime
	SetAtimeNow
	SetMtimeNow
	SetCtime
	// SetIfReleased, with SetSize (2026-12-02; an older service ignores
	// it): the client cut no chunks because it found the file released;
	// the change applies only if it still is (else errs.Busy: a restore
	// finished meanwhile and the chunks must be cut first).
	SetIfReleased
	// SetSizeGrow, with SetSize (late 2026-12-04; an older service ignores
	// it): the size only grows; a file already as long or longer keeps
	// its size and mtime (fallocate: a file another client grew
	// meanwhile must not be cut without its chunks).
	SetSizeGrow
	// SetIfAt, with SetSize (late 2026-12-04; an older service ignores it):
	// the change applies only if the file's mtime and size are still
	// AtMtime and AtSize, what the client saw before it cut the chunks
	// (else errs.Busy, and the client looks and cuts again): a write
	// another client committed in between may have put bytes past the
	// new size into chunks already cut.
	SetIfAt
	// SetIfCut, with SetSize (2026-12-05; an older service ignores it):
	// the end of a cut begun by OpCutBegin. The change applies only if
	// the file's cut generation is still Cut, the odd one OpCutBegin
	// answered (else errs.Busy: the cut was taken over, start again); it
	// then moves the generation to Cut+1, which lets writes commit again
	// (cut.go).
	SetIfCut
)

// SetAttrReq changes the attributes chosen by Valid. A size change of a
// regular file is done by the client: it truncates the chunks first, then
// sends SetSize.
type SetAttrReq struct {
	Ino   uint64
	Valid uint32
	Mode  uint32 // permission bits only
	Uid   uint32
	Gid   uint32
	Size  uint64
	Atime int64
	Mtime int64
	Ctime int64
	Cred  *Cred // who asks, for the audit trail; optional
	// IfMtime and IfSize are as in CommitWriteReq (trailing, optional;
	// a File's truncate sends them).
	IfMtime int64
	IfSize  uint64
	// AtMtime and AtSize are what SetIfAt checks (trailing, optional).
	AtMtime int64
	AtSize  uint64
	// Cut is the cut generation SetIfCut checks (after AtSize, present
	// only with SetIfCut).
	Cut uint64
}

func (m *SetAttrReq) Encode(e *Encoder) {
	e.U64(m.Ino)
	e.U32(m.Valid)
	e.U32(m.Mode)
	e.U32(m.Uid)
	e.U32(m.Gid)
	e.U64(m.Size)
	e.I64(m.Atime)
	e.I64(m.Mtime)
	e.I64(m.Ctime)
	encodeOptCred(e, m.Cred)
	encodeIf(e, m.IfMtime, m.IfSize)
	encodeIf(e, m.AtMtime, m.AtSize)
	if m.Valid&SetIfCut != 0 {
		e.U64(m.Cut)
	}
}
func (m *SetAttrReq) Decode(d *Decoder) {
	m.Ino = d.U64()
	m.Valid = d.U32()
	m.Mode = d.U32()
	m.Uid = d.U32()
	m.Gid = d.U32()
	m.Size = d.U64()
	m.Atime = d.I64()
	m.Mtime = d.I64()
	m.Ctime = d.I64()
	m.Cred = decodeOptCred(d)
	m.IfMtime, m.IfSize = decodeIf(d)
	m.AtMtime, m.AtSize = decodeIf(d)
	m.Cut = 0
	if m.Valid&SetIfCut != 0 {
		m.Cut = d.U64()
	}
}

// encodeIf writes a change's If fields (CommitWriteReq), trailing.
func encodeIf(e *Encoder, mtime int64, size uint64) {
	e.I64(mtime)
	e.U64(size)
}

// decodeIf reads the trailing If fields of a change: zero (no check)
// from an older client that sent none.
func decodeIf(d *Decoder) (mtime int64, size uint64) {
	if !d.More() {
		return 0, 0
	}
	return d.I64(), d.U64()
}

// CreateReq creates a regular file or node (OpCreate) or a directory
// (OpMkdir). Mode includes the type bits for OpCreate (0 type = regular).
// With Exclusive false, OpCreate of an existing regular file returns its
// attributes instead of errs.Exists. A Layout with StripeSize 0 means "the
// directory's default".
type CreateReq struct {
	Parent    uint64
	Name      string
	Mode      uint32
	Rdev      uint32
	Cred      Cred
	Exclusive bool
	Layout    placement.Layout
}

func (m *CreateReq) Encode(e *Encoder) {
	e.U64(m.Parent)
	e.String(m.Name)
	e.U32(m.Mode)
	e.U32(m.Rdev)
	m.Cred.Encode(e)
	e.Bool(m.Exclusive)
	EncodeLayout(e, &m.Layout)
}
func (m *CreateReq) Decode(d *Decoder) {
	m.Parent = d.U64()
	m.Name = d.String()
	m.Mode = d.U32()
	m.Rdev = d.U32()
	m.Cred.Decode(d)
	m.Exclusive = d.Bool()
	DecodeLayout(d, &m.Layout)
}

// SymlinkReq creates a symbolic link Name in Parent pointing at Target.
type SymlinkReq struct {
	Parent uint64
	Name   string
	Target string
	Cred   Cred
}

func (m *SymlinkReq) Encode(e *Encoder) {
	e.U64(m.Parent)
	e.String(m.Name)
	e.String(m.Target)
	m.Cred.Encode(e)
}
func (m *SymlinkReq) Decode(d *Decoder) {
	m.Parent = d.U64()
	m.Name = d.String()
	m.Target = d.String()
	m.Cred.Decode(d)
}

// StringResp carries one string (a symlink target).
type StringResp struct{ S string }

func (m *StringResp) Encode(e *Encoder) { e.String(m.S) }
func (m *StringResp) Decode(d *Decoder) { m.S = d.String() }

// BytesResp carries one byte string (an xattr value).
type BytesResp struct{ B []byte }

func (m *BytesResp) Encode(e *Encoder) { e.Bytes(m.B) }
func (m *BytesResp) Decode(d *Decoder) { m.B = d.Bytes() }

// NamesResp carries a list of names (xattr names).
type NamesResp struct{ Names []string }

func (m *NamesResp) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Names)))
	for _, n := range m.Names {
		e.String(n)
	}
}
func (m *NamesResp) Decode(d *Decoder) {
	n := d.Count(1)
	m.Names = make([]string, n)
	for i := range m.Names {
		m.Names[i] = d.String()
	}
}

// Rename flags, as in Linux renameat2.
const (
	RenameNoReplace uint32 = 1 << 0
	RenameExchange  uint32 = 1 << 1
)

// RenameReq moves OldParent/OldName to NewParent/NewName atomically.
type RenameReq struct {
	OldParent uint64
	OldName   string
	NewParent uint64
	NewName   string
	Flags     uint32
	Cred      *Cred // who asks, for the audit trail; optional
}

func (m *RenameReq) Encode(e *Encoder) {
	e.U64(m.OldParent)
	e.String(m.OldName)
	e.U64(m.NewParent)
	e.String(m.NewName)
	e.U32(m.Flags)
	encodeOptCred(e, m.Cred)
}
func (m *RenameReq) Decode(d *Decoder) {
	m.OldParent = d.U64()
	m.OldName = d.String()
	m.NewParent = d.U64()
	m.NewName = d.String()
	m.Flags = d.U32()
	m.Cred = decodeOptCred(d)
}

// LinkReq makes a hard link NewParent/NewName to Ino.
type LinkReq struct {
	Ino       uint64
	NewParent uint64
	NewName   string
}

func (m *LinkReq) Encode(e *Encoder) { e.U64(m.Ino); e.U64(m.NewParent); e.String(m.NewName) }
func (m *LinkReq) Decode(d *Decoder) { m.Ino = d.U64(); m.NewParent = d.U64(); m.NewName = d.String() }

// ReadDirReq asks for up to Limit entries of directory Ino whose names sort
// after Cursor ("" = from the start). With Plus, each entry carries its Attr.
// Entries are in byte order of their names; "." and ".." are not included.
type ReadDirReq struct {
	Ino    uint64
	Cursor string
	Limit  uint32
	Plus   bool
	// Xattr names an extended attribute whose value each entry of a Plus
	// listing comes with (ReadDirResp.Xattrs; appended 2026-12-02, an
	// older service ignores it and sends none; empty: none).
	Xattr string
}

func (m *ReadDirReq) Encode(e *Encoder) {
	e.U64(m.Ino)
	e.String(m.Cursor)
	e.U32(m.Limit)
	e.Bool(m.Plus)
	e.String(m.Xattr)
}
func (m *ReadDirReq) Decode(d *Decoder) {
	m.Ino = d.U64()
	m.Cursor = d.String()
	m.Limit = d.U32()
	m.Plus = d.Bool()
	if d.More() {
		m.Xattr = d.String()
	}
}

// DirEntry is one directory entry. Mode has the type bits only, unless the
// listing was a Plus listing, when Attr is filled.
type DirEntry struct {
	Name string
	Ino  uint64
	Mode uint32
	Attr *Attr
}

// ReadDirResp is one page of a listing. Cursor continues it; EOF says there
// is nothing after this page.
type ReadDirResp struct {
	Entries []DirEntry
	Cursor  string
	EOF     bool
	// Xattrs holds, for a request that named an extended attribute, its
	// value for each entry, in the order of Entries (appended
	// 2026-12-02: from an older service it is empty, whatever the
	// request).
	Xattrs []DirXattr
}

// DirXattr is the value of one entry's extended attribute in a listing;
// Has is false where the inode has no such attribute.
type DirXattr struct {
	Has   bool
	Value []byte
}

func (m *ReadDirResp) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Entries)))
	for _, de := range m.Entries {
		e.String(de.Name)
		e.U64(de.Ino)
		e.U32(de.Mode)
		e.Bool(de.Attr != nil)
		if de.Attr != nil {
			de.Attr.Encode(e)
		}
	}
	e.String(m.Cursor)
	e.Bool(m.EOF)
	e.Uvarint(uint64(len(m.Xattrs)))
	for _, x := range m.Xattrs {
		e.Bool(x.Has)
		e.Bytes(x.Value)
	}
}
func (m *ReadDirResp) Decode(d *Decoder) {
	n := d.Count(14)
	m.Entries = make([]DirEntry, n)
	for i := range m.Entries {
		de := &m.Entries[i]
		de.Name = d.String()
		de.Ino = d.U64()
		de.Mode = d.U32()
		if d.Bool() {
			de.Attr = new(Attr)
			de.Attr.Decode(d)
		}
	}
	m.Cursor = d.String()
	m.EOF = d.Bool()
	if d.More() {
		m.Xattrs = make([]DirXattr, d.Count(2))
		for i := range m.Xattrs {
			m.Xattrs[i].Has = d.Bool()
			m.Xattrs[i].Value = d.Bytes()
		}
	}
}

// Xattr flags, as in Linux setxattr.
const (
	XattrCreate  uint32 = 1
	XattrReplace uint32 = 2
)

// XattrReq names an extended attribute, with a value for OpSetXattr.
type XattrReq struct {
	Ino   uint64
	Name  string
	Value []byte
	Flags uint32
}

func (m *XattrReq) Encode(e *Encoder) {
	e.U64(m.Ino)
	e.String(m.Name)
	e.Bytes(m.Value)
	e.U32(m.Flags)
}
func (m *XattrReq) Decode(d *Decoder) {
	m.Ino = d.U64()
	m.Name = d.String()
	m.Value = d.Bytes()
	m.Flags = d.U32()
}

// SetLayoutReq sets a directory's default layout, or the layout of a
// regular file that has no data yet (else errs.Busy).
type SetLayoutReq struct {
	Ino    uint64
	Layout placement.Layout
	Cred   *Cred // who asks, for the audit trail; optional
}

func (m *SetLayoutReq) Encode(e *Encoder) {
	e.U64(m.Ino)
	EncodeLayout(e, &m.Layout)
	encodeOptCred(e, m.Cred)
}
func (m *SetLayoutReq) Decode(d *Decoder) {
	m.Ino = d.U64()
	DecodeLayout(d, &m.Layout)
	m.Cred = decodeOptCred(d)
}

// CommitWriteReq tells the metadata service that data up to End is durable
// on the targets: the size becomes max(size, End) and mtime/ctime Mtime.
//
// With IfMtime set (not 0), the answer carries AttrUnchanged if the file's
// mtime and size before the commit were IfMtime and IfSize. (The two
// fields came in 2026-11 without a protocol version change; older clients
// send neither.)
//
// With CutIf (2026-12-05, trailing; an older service ignores it), the
// commit applies only if the file's cut generation is Cut, the one the
// client knew before it wrote the data (cut.go); the answer is then a
// CommitResp, which says whether it applied.
type CommitWriteReq struct {
	Ino     uint64
	End     uint64
	Mtime   int64
	IfMtime int64
	IfSize  uint64
	CutIf   bool
	Cut     uint64
}

func (m *CommitWriteReq) Encode(e *Encoder) {
	m.encodeBase(e)
	encodeOptCut(e, m.CutIf, m.Cut)
}

func (m *CommitWriteReq) Decode(d *Decoder) {
	m.decodeBase(d)
	m.CutIf, m.Cut = decodeOptCut(d)
}

// encodeBase writes the fields before the cut condition.
func (m *CommitWriteReq) encodeBase(e *Encoder) {
	e.U64(m.Ino)
	e.U64(m.End)
	e.I64(m.Mtime)
	encodeIf(e, m.IfMtime, m.IfSize)
}

func (m *CommitWriteReq) decodeBase(d *Decoder) {
	m.Ino = d.U64()
	m.End = d.U64()
	m.Mtime = d.I64()
	m.IfMtime, m.IfSize = decodeIf(d)
}

// WriteInlineReq writes Data at Off into a file's inline bytes. A file
// without AttrChunks takes the whole write (its inline bytes grow, up to
// the service's InlineMax, else errs.TooBig); a file with AttrChunks takes
// only the part below its InlineLen, and the reply says how much.
// IfMtime and IfSize are as in CommitWriteReq (trailing, optional).
type WriteInlineReq struct {
	Ino     uint64
	Off     uint64
	Mtime   int64
	Data    []byte
	IfMtime int64
	IfSize  uint64
}

func (m *WriteInlineReq) Encode(e *Encoder) {
	e.U64(m.Ino)
	e.U64(m.Off)
	e.I64(m.Mtime)
	e.Bytes(m.Data)
	encodeIf(e, m.IfMtime, m.IfSize)
}
func (m *WriteInlineReq) Decode(d *Decoder) {
	m.Ino = d.U64()
	m.Off = d.U64()
	m.Mtime = d.I64()
	m.Data = d.Bytes()
	m.IfMtime, m.IfSize = decodeIf(d)
}

// WriteInlineAttrReq is an inline write and then, in the same metadata
// transaction, a change of the same file's mode, owner, group or times
// (Attr.Valid may name only SetMode, SetUid, SetGid, SetAtime and
// SetMtime; Attr.Ino is the write's). The FUSE mount's close of a small
// file whose times, owner and mode a program restored before closing it
// (tar -x, cp -p) sends both at once. The reply's attributes are those
// after the change; Written is the write's, as in WriteInlineResp.
type WriteInlineAttrReq struct {
	Write WriteInlineReq
	Attr  SetAttrReq
}

func (m *WriteInlineAttrReq) Encode(e *Encoder) { m.Write.Encode(e); m.Attr.Encode(e) }
func (m *WriteInlineAttrReq) Decode(d *Decoder) { m.Write.Decode(d); m.Attr.Decode(d) }

// CommitWriteAttrReq is a size commit (OpCommitWrite) and then, in the
// same metadata transaction, a change of the same file's mode, owner,
// group or times, with the same limits as WriteInlineAttrReq. The FUSE
// mount's close of a file whose data went to the targets and whose
// times, owner and mode a program restored before closing it sends both
// at once. The reply's attributes are those after the change. The
// commit's cut condition (CutIf, Cut) goes last, after Attr, where an
// older service does not read it; the reply is then a CommitResp.
type CommitWriteAttrReq struct {
	Commit CommitWriteReq
	Attr   SetAttrReq
}

func (m *CommitWriteAttrReq) Encode(e *Encoder) {
	m.Commit.encodeBase(e)
	m.Attr.Encode(e)
	encodeOptCut(e, m.Commit.CutIf, m.Commit.Cut)
}

func (m *CommitWriteAttrReq) Decode(d *Decoder) {
	m.Commit.decodeBase(d)
	m.Attr.Decode(d)
	m.Commit.CutIf, m.Commit.Cut = decodeOptCut(d)
}

// WriteInlineResp says how many bytes of the write went inline (from its
// start) and the file's attributes after it.
type WriteInlineResp struct {
	Written uint32
	Attr    Attr
}

func (m *WriteInlineResp) Encode(e *Encoder) { e.U32(m.Written); m.Attr.Encode(e) }
func (m *WriteInlineResp) Decode(d *Decoder) { m.Written = d.U32(); m.Attr.Decode(d) }

// ReadInlineReq reads up to Len inline bytes at Off.
type ReadInlineReq struct {
	Ino uint64
	Off uint64
	Len uint32
}

func (m *ReadInlineReq) Encode(e *Encoder) { e.U64(m.Ino); e.U64(m.Off); e.U32(m.Len) }
func (m *ReadInlineReq) Decode(d *Decoder) { m.Ino = d.U64(); m.Off = d.U64(); m.Len = d.U32() }

// ReadInlineResp holds the inline bytes of the range read (fewer when the
// range passes Attr.InlineLen) and the file's attributes, which say where
// the rest of the range lives.
type ReadInlineResp struct {
	Attr Attr
	Data []byte
}

func (m *ReadInlineResp) Encode(e *Encoder) { m.Attr.Encode(e); e.Bytes(m.Data) }
func (m *ReadInlineResp) Decode(d *Decoder) { m.Attr.Decode(d); m.Data = d.Bytes() }

// RegisterReq announces a storage node and its targets to the metadata
// service: Have are the targets it already has (IDs given out earlier),
// Want how many new target IDs it needs.
type RegisterReq struct {
	Node string
	Addr string
	Have []placement.TargetID
	Want uint32
}

func (m *RegisterReq) Encode(e *Encoder) {
	e.String(m.Node)
	e.String(m.Addr)
	encodeTargetIDs(e, m.Have)
	e.U32(m.Want)
}
func (m *RegisterReq) Decode(d *Decoder) {
	m.Node = d.String()
	m.Addr = d.String()
	m.Have = decodeTargetIDs(d)
	m.Want = d.U32()
}

// RegisterResp gives the new target IDs a RegisterReq asked for.
type RegisterResp struct{ IDs []placement.TargetID }

func (m *RegisterResp) Encode(e *Encoder) { encodeTargetIDs(e, m.IDs) }
func (m *RegisterResp) Decode(d *Decoder) { m.IDs = decodeTargetIDs(d) }

func encodeTargetIDs(e *Encoder, ids []placement.TargetID) {
	e.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		e.U32(uint32(id))
	}
}

func decodeTargetIDs(d *Decoder) []placement.TargetID {
	n := d.Count(4)
	out := make([]placement.TargetID, n)
	for i := range out {
		out[i] = placement.TargetID(d.U32())
	}
	return out
}

// HeartbeatReq says that a storage node is alive, with its targets' usage.
// Incarnation changes each time the node's process starts: a new one tells
// the metadata service that the node restarted and its replicas must catch
// up before serving reads again.
type HeartbeatReq struct {
	Node        string
	Addr        string
	Incarnation uint64
	Targets     []TargetStat
	Resyncs     []ResyncStat
	// QosUse (appended in version 2.5) is what the node's jobs asked of
	// it lately, for the split of cluster-wide limits.
	QosUse []QosUse
}

func (m *HeartbeatReq) Encode(e *Encoder) {
	e.String(m.Node)
	e.String(m.Addr)
	e.U64(m.Incarnation)
	e.Uvarint(uint64(len(m.Targets)))
	for i := range m.Targets {
		m.Targets[i].encodeFields(e)
	}
	encodeResyncs(e, m.Resyncs)
	// Appended in version 2.1: the targets' file systems.
	e.Uvarint(uint64(len(m.Targets)))
	for i := range m.Targets {
		e.U64(m.Targets[i].FS)
	}
	encodeQosUse(e, m.QosUse)
}

// ResyncStat is the progress of a resync a node runs: the tail From copies
// chain Chain (at Version) to syncing replica To; Looked of Total chunks
// compared so far, Copied of them copied.
type ResyncStat struct {
	Chain                 placement.ChainID
	Version               uint64
	From, To              placement.TargetID
	Looked, Copied, Total uint64
}

func encodeResyncs(e *Encoder, rs []ResyncStat) {
	e.Uvarint(uint64(len(rs)))
	for _, r := range rs {
		e.U32(uint32(r.Chain))
		e.U64(r.Version)
		e.U32(uint32(r.From))
		e.U32(uint32(r.To))
		e.U64(r.Looked)
		e.U64(r.Copied)
		e.U64(r.Total)
	}
}

func decodeResyncs(d *Decoder) []ResyncStat {
	n := d.Count(44)
	out := make([]ResyncStat, n)
	for i := range out {
		r := &out[i]
		r.Chain = placement.ChainID(d.U32())
		r.Version = d.U64()
		r.From = placement.TargetID(d.U32())
		r.To = placement.TargetID(d.U32())
		r.Looked = d.U64()
		r.Copied = d.U64()
		r.Total = d.U64()
	}
	return out
}
func (m *HeartbeatReq) Decode(d *Decoder) {
	m.Node = d.String()
	m.Addr = d.String()
	m.Incarnation = d.U64()
	n := d.Count(44)
	m.Targets = make([]TargetStat, n)
	for i := range m.Targets {
		m.Targets[i].decodeFields(d)
	}
	m.Resyncs = decodeResyncs(d)
	if d.More() {
		fs := decodeFSList(d, len(m.Targets))
		for i := range fs {
			m.Targets[i].FS = fs[i]
		}
	}
	m.QosUse = nil
	if d.More() {
		m.QosUse = decodeQosUse(d)
	}
}

// HeartbeatResp carries the chain table's version: a node that holds an
// older one fetches the table (OpCluster). Qos (appended in version 2.4;
// nil from an older service, or one that keeps no settings) is the QoS
// settings the node's targets apply.
type HeartbeatResp struct {
	ChainsVersion uint64
	Qos           *QosConfig
}

func (m *HeartbeatResp) Encode(e *Encoder) {
	e.U64(m.ChainsVersion)
	if m.Qos != nil {
		m.Qos.Encode(e)
	}
}

func (m *HeartbeatResp) Decode(d *Decoder) {
	m.ChainsVersion = d.U64()
	m.Qos = nil
	if d.More() {
		m.Qos = &QosConfig{}
		m.Qos.Decode(d)
	}
}

// SyncDoneReq reports that syncing replica Target of Chain now holds
// everything the chain's tail held at chain version Version.
type SyncDoneReq struct {
	Chain   placement.ChainID
	Version uint64
	Target  placement.TargetID
}

func (m *SyncDoneReq) Encode(e *Encoder) {
	e.U32(uint32(m.Chain))
	e.U64(m.Version)
	e.U32(uint32(m.Target))
}
func (m *SyncDoneReq) Decode(d *Decoder) {
	m.Chain = placement.ChainID(d.U32())
	m.Version = d.U64()
	m.Target = placement.TargetID(d.U32())
}

// ChainRef says which chain a chunk request is for and at which version of
// the chain the sender made it. Chain 0 means the chain of one replica on
// the target itself (version 0 matches it).
type ChainRef struct {
	Chain    placement.ChainID
	ChainVer uint64
	Flags    uint8
}

func (m *ChainRef) Encode(e *Encoder) { e.U32(uint32(m.Chain)); e.U64(m.ChainVer); e.U8(m.Flags) }
func (m *ChainRef) Decode(d *Decoder) {
	m.Chain = placement.ChainID(d.U32())
	m.ChainVer = d.U64()
	m.Flags = d.U8()
}

// ChunkRef names a chunk on a target: slot Slot of inode Ino, in a chain's
// replica.
type ChunkRef struct {
	Target placement.TargetID
	ChainRef
	Ino  uint64
	Slot uint32
}

func (m *ChunkRef) Encode(e *Encoder) {
	e.U32(uint32(m.Target))
	m.ChainRef.Encode(e)
	e.U64(m.Ino)
	e.U32(m.Slot)
}
func (m *ChunkRef) Decode(d *Decoder) {
	m.Target = placement.TargetID(d.U32())
	m.ChainRef.Decode(d)
	m.Ino = d.U64()
	m.Slot = d.U32()
}

// ChunkWriteReq writes the frame's data at Off in a chunk, creating it if
// needed. With Sync the data is durable when the reply comes.
// Qos (appended in version 2.4) is the job and class it is scheduled as.
type ChunkWriteReq struct {
	ChunkRef
	Off  uint64
	Sync bool
	Qos  QosTag
	// DataCRC is the CRC32C of the frame's data, set by the sender
	// (HasDataCRC; version 2.7, appended after the QoS tag): a target
	// refuses data that does not match it with errs.Garbled. An older
	// sender's request has none and is not checked.
	DataCRC    uint32
	HasDataCRC bool
	// ApplyBy is as in ChunkTruncateReq (appended after DataCRC on
	// 2026-12-05, so sent only with a DataCRC: over TCP). A call in
	// process has none; its handler gets the caller's deadline
	// (Request.ApplyDeadline).
	ApplyBy uint64
}

func (m *ChunkWriteReq) setApplyBy(us uint64) { m.ApplyBy = us }

func (m *ChunkWriteReq) Encode(e *Encoder) {
	m.ChunkRef.Encode(e)
	e.U64(m.Off)
	e.Bool(m.Sync)
	m.Qos.Encode(e)
	e.OptU32(m.DataCRC, m.HasDataCRC)
	if m.HasDataCRC && m.ApplyBy != 0 {
		e.U64(m.ApplyBy)
	}
}

func (m *ChunkWriteReq) Decode(d *Decoder) {
	m.ChunkRef.Decode(d)
	m.Off = d.U64()
	m.Sync = d.Bool()
	m.Qos = QosTag{}
	if d.More() {
		m.Qos.Decode(d)
	}
	m.DataCRC, m.HasDataCRC = d.OptU32()
	m.ApplyBy = 0
	if m.HasDataCRC && d.More() {
		m.ApplyBy = d.U64()
	}
}

// ChunkReadReq reads Len bytes at Off. The reply's data is shorter when the
// chunk ends first (a missing chunk reads as empty); holes inside read as zeros.
// Qos (appended in version 2.4) is the job and class it is scheduled as.
// Flags (ReadFlag*, appended in version 2.8 after the tag; absent from an
// older client, then 0) say what the client accepts.
type ChunkReadReq struct {
	ChunkRef
	Off   uint64
	Len   uint32
	Qos   QosTag
	Flags uint32
}

// ReadFlagUnverified in ChunkReadReq.Flags: the client checks every piece
// of the data against the reply's DataSums and, on a mismatch, asks again
// without the flag. The target may then send bytes it has not read itself,
// straight from its page cache (sendfile), with the checksums they were
// stored with: the client's check is then also the check at rest, and the
// repeated request, whose bytes the target verifies, tells damage on the
// disk (errs.Corruption) from a garbled transfer or a write in between.
const ReadFlagUnverified = 1

func (m *ChunkReadReq) Encode(e *Encoder) {
	m.ChunkRef.Encode(e)
	e.U64(m.Off)
	e.U32(m.Len)
	m.Qos.Encode(e)
	e.OptU32(m.Flags, m.Flags != 0)
}
func (m *ChunkReadReq) Decode(d *Decoder) {
	m.ChunkRef.Decode(d)
	m.Off = d.U64()
	m.Len = d.U32()
	m.Qos = QosTag{}
	if d.More() {
		m.Qos.Decode(d)
	}
	m.Flags, _ = d.OptU32()
}

// ChunkReadResp carries the chunk's current length with the data, and
// the CRC32C of each piece of the data, split at every multiple of 64 KiB
// of the chunk (checksum.Pieces; HasDataSums; version 2.7, appended): the
// client checks the bytes it received against them (errs.Garbled). An
// older target's reply has none. (Per piece, not one for all: a target
// has a whole block's from the read's own verification.)
type ChunkReadResp struct {
	ChunkLen    uint64
	DataSums    []uint32
	HasDataSums bool
}

func (m *ChunkReadResp) Encode(e *Encoder) {
	e.U64(m.ChunkLen)
	if m.HasDataSums {
		e.Uvarint(uint64(len(m.DataSums)))
		for _, c := range m.DataSums {
			e.U32(c)
		}
	}
}

func (m *ChunkReadResp) Decode(d *Decoder) {
	m.ChunkLen = d.U64()
	m.DataSums, m.HasDataSums = nil, false
	if d.More() {
		n := d.Count(4)
		m.DataSums, m.HasDataSums = make([]uint32, n), true
		for i := range m.DataSums {
			m.DataSums[i] = d.U32()
		}
	}
}

// ChunkSetReq names some chunks of one inode on one target: slots Slots of
// inode Ino. It is the body of OpChunkSync (make them durable) and
// OpChunkRemove (remove them durably; missing chunks are no error).
type ChunkSetReq struct {
	Target placement.TargetID
	ChainRef
	Ino   uint64
	Slots []uint32
}

// TaggedChunkSetReq is a ChunkSetReq with the QoS tag (appended in
// version 2.6; absent from an older sender, then class training and no
// job) that the targets schedule the request's local work by.
type TaggedChunkSetReq struct {
	ChunkSetReq
	Qos QosTag
}

func (m *TaggedChunkSetReq) Encode(e *Encoder) {
	m.ChunkSetReq.Encode(e)
	m.Qos.Encode(e)
}

func (m *TaggedChunkSetReq) Decode(d *Decoder) {
	m.ChunkSetReq.Decode(d)
	m.Qos = QosTag{}
	if d.More() {
		m.Qos.Decode(d)
	}
}

// ChunkSyncReq and ChunkRemoveReq are the bodies of OpChunkSync and
// OpChunkRemove.
type (
	ChunkSyncReq   = TaggedChunkSetReq
	ChunkRemoveReq = TaggedChunkSetReq
)

func (m *ChunkSetReq) Encode(e *Encoder) {
	e.U32(uint32(m.Target))
	m.ChainRef.Encode(e)
	e.U64(m.Ino)
	e.Uvarint(uint64(len(m.Slots)))
	for _, s := range m.Slots {
		e.U32(s)
	}
}
func (m *ChunkSetReq) Decode(d *Decoder) {
	m.Target = placement.TargetID(d.U32())
	m.ChainRef.Decode(d)
	m.Ino = d.U64()
	n := d.Count(4)
	m.Slots = make([]uint32, n)
	for i := range m.Slots {
		m.Slots[i] = d.U32()
	}
}

// ChunkTruncateReq sets a chunk's length (durably). Qos (appended in
// version 2.6) is as in TaggedChunkSetReq. ApplyBy (appended 2026-12-05,
// sent only when not 0) is the latest moment the target may apply it,
// in microseconds after the connection's hello (applyby.go); Conn.Call
// sets it from the call's deadline. An older target ignores it.
type ChunkTruncateReq struct {
	ChunkRef
	Size    uint64
	Qos     QosTag
	ApplyBy uint64
}

func (m *ChunkTruncateReq) setApplyBy(us uint64) { m.ApplyBy = us }

func (m *ChunkTruncateReq) Encode(e *Encoder) {
	m.ChunkRef.Encode(e)
	e.U64(m.Size)
	m.Qos.Encode(e)
	if m.ApplyBy != 0 {
		e.U64(m.ApplyBy)
	}
}

func (m *ChunkTruncateReq) Decode(d *Decoder) {
	m.ChunkRef.Decode(d)
	m.Size = d.U64()
	m.Qos, m.ApplyBy = QosTag{}, 0
	if d.More() {
		m.Qos.Decode(d)
	}
	if d.More() {
		m.ApplyBy = d.U64()
	}
}

// ChunkPunchReq is the body of OpChunkPunch: make bytes [Off, Off+Len)
// of the chunk read as zeros without changing its length, and give the
// space of the whole 64 KiB blocks in the range back (fallocate(2)'s
// PUNCH_HOLE and ZERO_RANGE of a file's bytes; 2026-12-05). Durable when
// answered; passed along the chain like a truncate. An older target
// answers "not supported" and the client writes zeros instead.
//
// ApplyBy is as in ChunkTruncateReq (appended 2026-12-05).
type ChunkPunchReq struct {
	ChunkRef
	Off, Len uint64
	Qos      QosTag
	ApplyBy  uint64
}

func (m *ChunkPunchReq) setApplyBy(us uint64) { m.ApplyBy = us }

func (m *ChunkPunchReq) Encode(e *Encoder) {
	m.ChunkRef.Encode(e)
	e.U64(m.Off)
	e.U64(m.Len)
	m.Qos.Encode(e)
	if m.ApplyBy != 0 {
		e.U64(m.ApplyBy)
	}
}

func (m *ChunkPunchReq) Decode(d *Decoder) {
	m.ChunkRef.Decode(d)
	m.Off = d.U64()
	m.Len = d.U64()
	m.Qos.Decode(d)
	m.ApplyBy = 0
	if d.More() {
		m.ApplyBy = d.U64()
	}
}

// MaxMapLen bounds the chunk range one OpChunkMap asks about (1 GiB:
// at most 8,192 runs of 64 KiB blocks in the answer).
const MaxMapLen = 1 << 30

// ChunkMapReq is the body of OpChunkMap: where bytes [Off, Off+Len) of
// the chunk hold data (2026-12-05). A read: it goes where reads go. Len
// is at most MaxMapLen. An older target answers "not supported" and the
// client takes the whole file for data.
type ChunkMapReq struct {
	ChunkRef
	Off, Len uint64
	Qos      QosTag
}

func (m *ChunkMapReq) Encode(e *Encoder) {
	m.ChunkRef.Encode(e)
	e.U64(m.Off)
	e.U64(m.Len)
	m.Qos.Encode(e)
}

func (m *ChunkMapReq) Decode(d *Decoder) {
	m.ChunkRef.Decode(d)
	m.Off = d.U64()
	m.Len = d.U64()
	m.Qos.Decode(d)
}

// ChunkRun is a range [Off, End) of a chunk's bytes.
type ChunkRun struct{ Off, End uint64 }

// ChunkMapResp answers OpChunkMap: the chunk's length and the runs of
// the asked range whose bytes the chunk stores, in order, at 64 KiB block
// granularity (a run may hold zeros that were written; holes, punched
// blocks and bytes past the chunk's length read as zeros and are in no
// run).
type ChunkMapResp struct {
	ChunkLen uint64
	Runs     []ChunkRun
}

func (m *ChunkMapResp) Encode(e *Encoder) {
	e.U64(m.ChunkLen)
	e.Uvarint(uint64(len(m.Runs)))
	for _, r := range m.Runs {
		e.U64(r.Off)
		e.U64(r.End)
	}
}

func (m *ChunkMapResp) Decode(d *Decoder) {
	m.ChunkLen = d.U64()
	n := d.Count(16)
	m.Runs = nil
	if n > 0 {
		m.Runs = make([]ChunkRun, n)
	}
	for i := range m.Runs {
		m.Runs[i] = ChunkRun{Off: d.U64(), End: d.U64()}
	}
}

// TargetReq names a target.
type TargetReq struct{ Target placement.TargetID }

func (m *TargetReq) Encode(e *Encoder) { e.U32(uint32(m.Target)) }
func (m *TargetReq) Decode(d *Decoder) { m.Target = placement.TargetID(d.U32()) }

// TargetStat is a target's capacity and usage.
type TargetStat struct {
	Target         placement.TargetID
	Capacity, Used int64 // bytes on the target's file system / in its chunks
	Free           int64
	Chunks         uint64
	Corruptions    uint64 // checksum failures seen since start
	// FS identifies the file system holding the target's directory on its
	// node (its st_dev), so that targets sharing one disk are counted once
	// in file-system-wide totals; 0 if unknown.
	FS uint64
}

// Encode writes the fields of version 2, then FS (appended in 2.1).
func (m *TargetStat) Encode(e *Encoder) {
	m.encodeFields(e)
	e.U64(m.FS)
}

func (m *TargetStat) Decode(d *Decoder) {
	m.decodeFields(d)
	m.FS = 0
	if d.More() {
		m.FS = d.U64()
	}
}

// encodeFields writes the fields of version 2, which a HeartbeatReq's list
// of targets holds (their FS follow the list).
func (m *TargetStat) encodeFields(e *Encoder) {
	e.U32(uint32(m.Target))
	e.I64(m.Capacity)
	e.I64(m.Used)
	e.I64(m.Free)
	e.U64(m.Chunks)
	e.U64(m.Corruptions)
}

func (m *TargetStat) decodeFields(d *Decoder) {
	m.Target = placement.TargetID(d.U32())
	m.Capacity = d.I64()
	m.Used = d.I64()
	m.Free = d.I64()
	m.Chunks = d.U64()
	m.Corruptions = d.U64()
}

// ChunkListReq lists the chunks of one chain's replica on a target, in
// (Ino, Slot) order, starting after (AfterIno, AfterSlot) (both 0: from the
// start), at most Limit of them. Fences lists the replica's chunk fences
// instead (frozen chunks, whether they exist or not; appended 2026-12-03:
// a target from before answers with its chunks, and without
// ChunkListResp.Fences).
type ChunkListReq struct {
	Target placement.TargetID
	ChainRef
	AfterIno  uint64
	AfterSlot uint32
	Limit     uint32
	Fences    bool
}

func (m *ChunkListReq) Encode(e *Encoder) {
	e.U32(uint32(m.Target))
	m.ChainRef.Encode(e)
	e.U64(m.AfterIno)
	e.U32(m.AfterSlot)
	e.U32(m.Limit)
	e.Bool(m.Fences)
}
func (m *ChunkListReq) Decode(d *Decoder) {
	m.Target = placement.TargetID(d.U32())
	m.ChainRef.Decode(d)
	m.AfterIno = d.U64()
	m.AfterSlot = d.U32()
	m.Limit = d.U32()
	m.Fences = false
	if d.More() {
		m.Fences = d.Bool()
	}
}

// ChunkInfo is one chunk in a ChunkListResp: its length and a digest of its
// block checksums (equal digests and lengths: equal contents).
type ChunkInfo struct {
	Ino    uint64
	Slot   uint32
	Len    uint64
	Digest uint64
}

// ChunkListResp is a page of a chunk listing; More says whether more follow.
// Fences says that the page lists fences (ChunkListReq.Fences; Len and
// Digest are then 0; appended 2026-12-03).
type ChunkListResp struct {
	Chunks []ChunkInfo
	More   bool
	Fences bool
}

func (m *ChunkListResp) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Chunks)))
	for _, c := range m.Chunks {
		e.U64(c.Ino)
		e.U32(c.Slot)
		e.U64(c.Len)
		e.U64(c.Digest)
	}
	e.Bool(m.More)
	e.Bool(m.Fences)
}
func (m *ChunkListResp) Decode(d *Decoder) {
	n := d.Count(28)
	m.Chunks = make([]ChunkInfo, n)
	for i := range m.Chunks {
		c := &m.Chunks[i]
		c.Ino = d.U64()
		c.Slot = d.U32()
		c.Len = d.U64()
		c.Digest = d.U64()
	}
	m.More = d.Bool()
	m.Fences = false
	if d.More() {
		m.Fences = d.Bool()
	}
}

// Flags of PutFileReq.
const (
	// PutNoReplace fails with errs.Exists if the name exists.
	PutNoReplace uint32 = 1 << iota
	// PutSync answers only once the change is durable (as OpMetaSync
	// after it would, sharing the metadata service's group sync).
	PutSync
)

// XattrPair is one extended attribute of a PutFileReq.
type XattrPair struct {
	Name  string
	Value []byte
}

func (m *XattrPair) Encode(e *Encoder) { e.String(m.Name); e.Bytes(m.Value) }
func (m *XattrPair) Decode(d *Decoder) { m.Name = d.String(); m.Value = d.Bytes() }

// PutFileReq makes Name in the directory at path Dir (resolved, following
// symlinks, in the same transaction) a new regular file holding Data
// inline and the given xattrs, replacing a regular file of that name
// unless PutNoReplace: a create, a write, xattrs and a rename over the
// old file in one metadata transaction. Data must fit the service's
// inline limit (else errs.TooBig; the caller writes the file the usual
// way). Mtime, if not 0, is the file's mtime (and ctime).
type PutFileReq struct {
	Dir    string
	Name   string
	Mode   uint32
	Flags  uint32
	Mtime  int64
	Cred   Cred
	Data   []byte
	Xattrs []XattrPair
}

func (m *PutFileReq) Encode(e *Encoder) {
	e.String(m.Dir)
	e.String(m.Name)
	e.U32(m.Mode)
	e.U32(m.Flags)
	e.I64(m.Mtime)
	m.Cred.Encode(e)
	e.Bytes(m.Data)
	e.Uvarint(uint64(len(m.Xattrs)))
	for i := range m.Xattrs {
		m.Xattrs[i].Encode(e)
	}
}

func (m *PutFileReq) Decode(d *Decoder) {
	m.Dir = d.String()
	m.Name = d.String()
	m.Mode = d.U32()
	m.Flags = d.U32()
	m.Mtime = d.I64()
	m.Cred.Decode(d)
	m.Data = d.Bytes()
	m.Xattrs = nil
	if n := d.Count(2); n > 0 {
		m.Xattrs = make([]XattrPair, n)
		for i := range m.Xattrs {
			m.Xattrs[i].Decode(d)
		}
	}
}
