package meta

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
)

// FormatVersion is the version of the key layout and record encodings
// described in doc.go. A service refuses to open a database whose
// superblock carries another version, except version 1, which it upgrades
// in place: version 2 added inline data (the "D" keys) and inode records
// of version 2, and reads version-1 records as files with chunks.
const FormatVersion = 2

// Key prefixes. Inode numbers and target IDs in keys are big-endian so that
// a scan visits them in numeric order.
const (
	pfxSuper   = 'F' // "F" -> superblock
	pfxCounter = 'C' // "C" + counter name -> u64
	pfxDirPool = 'M' // "M" + u64 dir ino -> pool name of the directory's default layout
	// 'T', 'N', 'R', 'P', 'W' and 'V' (targets, nodes, chains, pools,
	// draining targets, replica moves) and the counters
	// "Cnext-target", "Cnext-chain" and "Cchains" belong to the cluster
	// state, kept in this DB by internal/cluster.
	pfxInode   = 'i' // "i" + u64 ino -> inode record
	pfxDirent  = 'd' // "d" + u64 parent + name -> child entry
	pfxDirTime = 't' // "t" + u64 dir ino -> directory mtime, ctime
	pfxXattr   = 'x' // "x" + u64 ino + name -> value
	pfxSymlink = 's' // "s" + u64 ino -> symlink target
	pfxGarbage = 'g' // "g" + u64 ino -> layout of a freed file
	pfxInline  = 'D' // "D" + u64 ino -> u32 CRC32C + a file's inline bytes
	pfxAbsorb  = 'K' // "K" + u64 dir ino -> absorb policy (absorb.go, ADR 0013)
	pfxStaged  = 'S' // "S" + u64 ino + owner -> staged, not yet drained (absorb.go)
	pfxAudit   = 'A' // "Ap", "Ae", "Ah": the audit trail (audit.go)
	pfxTier    = 'B' // "B" + backend name -> tier backend record (tier.go)
	pfxTierRm  = 'E' // "E" + backend name -> its removal is under way (tier.go)
	pfxHsm     = 'H' // "H" + u64 ino -> HSM record of an archived file (tier.go)
	pfxTierDel = 'O' // "O" + u64 ino + u64 gen -> object to delete (tier.go)
	pfxQos     = 'Q' // "Qc" + class byte -> weight, "Qj" + job -> limit (qos.go)
	pfxStage   = 'J' // "J" + job + 0 + "s" + stager / "b": staging metrics (stage.go)
	// 'p': recordings of the I/O profiler (profile.go).
)

var (
	keySuper      = []byte{pfxSuper}
	keyNextIno    = []byte("Cnext-ino")
	keyInodeCount = []byte("Cinodes")
)

func inoKey(pfx byte, ino uint64) []byte {
	k := make([]byte, 9, 9+16)
	k[0] = pfx
	binary.BigEndian.PutUint64(k[1:], ino)
	return k
}

func inodeKey(ino uint64) []byte   { return inoKey(pfxInode, ino) }
func dirTimeKey(ino uint64) []byte { return inoKey(pfxDirTime, ino) }
func symlinkKey(ino uint64) []byte { return inoKey(pfxSymlink, ino) }
func garbageKey(ino uint64) []byte { return inoKey(pfxGarbage, ino) }
func inlineKey(ino uint64) []byte  { return inoKey(pfxInline, ino) }
func dirPoolKey(ino uint64) []byte { return inoKey(pfxDirPool, ino) }

// direntKey is "d" + parent + name; direntPrefix(parent) is its prefix.
func direntKey(parent uint64, name string) []byte {
	k := make([]byte, 9, 9+len(name))
	k[0] = pfxDirent
	binary.BigEndian.PutUint64(k[1:], parent)
	return append(k, name...)
}

func direntPrefix(parent uint64) []byte { return inoKey(pfxDirent, parent) }

func xattrKey(ino uint64, name string) []byte {
	k := make([]byte, 9, 9+len(name))
	k[0] = pfxXattr
	binary.BigEndian.PutUint64(k[1:], ino)
	return append(k, name...)
}

func xattrPrefix(ino uint64) []byte { return inoKey(pfxXattr, ino) }

func u64Value(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func parseU64(b []byte, what string) (uint64, error) {
	if len(b) != 8 {
		return 0, errs.New(errs.Corruption, "meta: %s record has %d bytes, want 8", what, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// File type bits of a mode, as in Linux st_mode.
const (
	modeType   = 0o170000
	modeFifo   = 0o010000
	modeChar   = 0o020000
	modeDir    = 0o040000
	modeBlock  = 0o060000
	modeReg    = 0o100000
	modeLink   = 0o120000
	modeSocket = 0o140000
	modePerm   = 0o7777
)

// dirent is a directory entry's value: the child inode and its type bits
// (mode >> 12, one byte), so that ReadDir needs no inode reads.
type dirent struct {
	ino  uint64
	mode uint32 // type bits only
}

func (e dirent) encode() []byte {
	b := make([]byte, 9)
	binary.BigEndian.PutUint64(b, e.ino)
	b[8] = byte(e.mode >> 12)
	return b
}

func decodeDirent(b []byte) (dirent, error) {
	if len(b) != 9 {
		return dirent{}, errs.New(errs.Corruption, "meta: directory entry has %d bytes, want 9", len(b))
	}
	return dirent{ino: binary.BigEndian.Uint64(b), mode: uint32(b[8]) << 12}, nil
}

// inode is the decoded inode record. For directories Mtime and Ctime in the
// record are stale: the current values live in the directory's "t" key.
type inode struct {
	Mode   uint32
	Nlink  uint32
	Uid    uint32
	Gid    uint32
	Rdev   uint32
	Size   uint64
	Atime  int64
	Mtime  int64
	Ctime  int64
	Parent uint64 // directories only: the directory holding it (root: itself)
	// Flags (regular files): inoChunks says chunks may exist on the
	// targets; InlineLen is the length of the inline bytes ("D" key), which
	// hold the file's bytes [0, InlineLen).
	Flags     uint8
	InlineLen uint32
	// Cut is the file's cut generation (wire/cut.go; odd while a truncate
	// cuts its chunks) and CutAt when the running cut began (service
	// clock, ns). Records of files never cut have neither (version 2).
	Cut    uint64
	CutAt  int64
	Layout placement.Layout
}

// inode.Flags.
const (
	// inoChunks: the file's bytes from InlineLen on live in chunks, which
	// may exist on the targets (they are collected when the file goes).
	// Set before a client writes the first chunk, never cleared; from then
	// on InlineLen only shrinks. Its value is wire.AttrChunks.
	inoChunks uint8 = 1 << iota
	// inoFlagsKnown: inoXattrs and inoHsm are kept for this inode (set
	// when it is made; records written before they existed lack it).
	inoFlagsKnown
	// inoXattrs: extended attributes were set on the inode ("x" keys may
	// exist). Never cleared. Without inoFlagsKnown, they may exist.
	inoXattrs
	// inoHsm: an HSM record ("H" key, object tier) was written for the
	// inode. Never cleared. Without inoFlagsKnown, one may exist.
	inoHsm
	// inoImported: an import (sluice tier import) made the file of an
	// object of a bucket. Never cleared: once the file is of its own
	// (written and archived again, or its record removed), a re-run of
	// the import still tells it from another file (wire.ImportOwn).
	// Inodes made before 2026-12-04 lack it.
	inoImported
)

// newInodeFlags are the flags of a new inode.
const newInodeFlags = inoFlagsKnown

func (n *inode) hasChunks() bool { return n.Flags&inoChunks != 0 }

// mayHaveXattrs reports whether "x" keys of the inode may exist: deleting
// it needs a scan for them only then.
func (n *inode) mayHaveXattrs() bool {
	return n.Flags&inoFlagsKnown == 0 || n.Flags&inoXattrs != 0
}

// mayHaveHsm reports whether the inode may have an HSM record: writes,
// attributes and removal read its "H" key only then.
func (n *inode) mayHaveHsm() bool {
	return n.Flags&inoFlagsKnown == 0 || n.Flags&inoHsm != 0
}

func (n *inode) isDir() bool { return n.Mode&modeType == modeDir }
func (n *inode) isReg() bool { return n.Mode&modeType == modeReg }

// inodeRecordVersion is the version of the records encode writes. Version
// 1 had no flags and inline length: a file of version 1 has chunks.
// Version 3 (inodeCutVersion) is version 2 with the cut generation and
// its start after the inline length; encode writes it only for a file
// whose generation is not 0 (one that was cut since 2026-12-05).
const (
	inodeRecordVersion = 2
	inodeCutVersion    = 3
)

// encode writes the record: version byte, then fixed big-endian fields,
// the flags byte and u32 inline length, then the layout (u32 stripe size,
// u16 stripe count, u16 number of targets, u32 per target).
func (n *inode) encode() []byte {
	b := make([]byte, 0, inodeFixedSize+5+16+8+4*len(n.Layout.Chains)+1)
	ver := byte(inodeRecordVersion)
	if n.Cut != 0 {
		ver = inodeCutVersion
	}
	b = append(b, ver)
	b = binary.BigEndian.AppendUint32(b, n.Mode)
	b = binary.BigEndian.AppendUint32(b, n.Nlink)
	b = binary.BigEndian.AppendUint32(b, n.Uid)
	b = binary.BigEndian.AppendUint32(b, n.Gid)
	b = binary.BigEndian.AppendUint32(b, n.Rdev)
	b = binary.BigEndian.AppendUint64(b, n.Size)
	b = binary.BigEndian.AppendUint64(b, uint64(n.Atime))
	b = binary.BigEndian.AppendUint64(b, uint64(n.Mtime))
	b = binary.BigEndian.AppendUint64(b, uint64(n.Ctime))
	b = binary.BigEndian.AppendUint64(b, n.Parent)
	b = append(b, n.Flags)
	b = binary.BigEndian.AppendUint32(b, n.InlineLen)
	if ver == inodeCutVersion {
		b = binary.BigEndian.AppendUint64(b, n.Cut)
		b = binary.BigEndian.AppendUint64(b, uint64(n.CutAt))
	}
	return appendLayout(b, &n.Layout)
}

// inodeFixedSize is the size of the fields every record version has.
const inodeFixedSize = 1 + 5*4 + 8 + 3*8 + 8

func decodeInode(ino uint64, b []byte) (*inode, error) {
	if len(b) < inodeFixedSize || b[0] < 1 || b[0] > inodeCutVersion {
		return nil, errs.New(errs.Corruption, "meta: inode %d: bad record (%d bytes, version %d)", ino, len(b), firstByte(b))
	}
	n := &inode{
		Mode:   binary.BigEndian.Uint32(b[1:]),
		Nlink:  binary.BigEndian.Uint32(b[5:]),
		Uid:    binary.BigEndian.Uint32(b[9:]),
		Gid:    binary.BigEndian.Uint32(b[13:]),
		Rdev:   binary.BigEndian.Uint32(b[17:]),
		Size:   binary.BigEndian.Uint64(b[21:]),
		Atime:  int64(binary.BigEndian.Uint64(b[29:])),
		Mtime:  int64(binary.BigEndian.Uint64(b[37:])),
		Ctime:  int64(binary.BigEndian.Uint64(b[45:])),
		Parent: binary.BigEndian.Uint64(b[53:]),
	}
	rest := b[inodeFixedSize:]
	if b[0] == 1 {
		if n.isReg() {
			n.Flags = inoChunks
		}
	} else {
		if len(rest) < 5 {
			return nil, errs.New(errs.Corruption, "meta: inode %d: record of %d bytes has no flags", ino, len(b))
		}
		n.Flags, n.InlineLen = rest[0], binary.BigEndian.Uint32(rest[1:])
		rest = rest[5:]
	}
	if b[0] == inodeCutVersion {
		if len(rest) < 16 {
			return nil, errs.New(errs.Corruption, "meta: inode %d: record of %d bytes has no cut generation", ino, len(b))
		}
		n.Cut, n.CutAt = binary.BigEndian.Uint64(rest), int64(binary.BigEndian.Uint64(rest[8:]))
		if n.Cut == 0 {
			return nil, errs.New(errs.Corruption, "meta: inode %d: version 3 record with cut generation 0", ino)
		}
		rest = rest[16:]
	}
	if err := decodeLayout(rest, &n.Layout); err != nil {
		return nil, fmt.Errorf("meta: inode %d: %w", ino, err)
	}
	return n, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

func appendLayout(b []byte, l *placement.Layout) []byte {
	b = binary.BigEndian.AppendUint32(b, l.StripeSize)
	b = binary.BigEndian.AppendUint16(b, l.StripeCount)
	b = binary.BigEndian.AppendUint16(b, uint16(len(l.Chains)))
	for _, t := range l.Chains {
		b = binary.BigEndian.AppendUint32(b, uint32(t))
	}
	switch {
	case len(l.Comps) > 0:
		// The extended form (ADR 0021): replicas, data ID (maybe 0), u8
		// version 1, u8 count, then each component's u64 end, u32
		// stripe size, u16 stripe count, u8 pool length and pool.
		b = append(b, l.Replicas)
		b = binary.BigEndian.AppendUint64(b, l.Data)
		b = append(b, 1, byte(len(l.Comps)))
		for _, c := range l.Comps {
			b = binary.BigEndian.AppendUint64(b, uint64(c.End))
			b = binary.BigEndian.AppendUint32(b, c.StripeSize)
			b = binary.BigEndian.AppendUint16(b, c.StripeCount)
			b = append(b, byte(len(c.Pool)))
			b = append(b, c.Pool...)
		}
	case l.Data != 0:
		b = append(b, l.Replicas)
		b = binary.BigEndian.AppendUint64(b, l.Data)
	case l.Replicas > 1:
		b = append(b, l.Replicas)
	}
	return b
}

func decodeLayout(b []byte, l *placement.Layout) error {
	if len(b) < 8 {
		return errs.New(errs.Corruption, "meta: layout record has %d bytes, want at least 8", len(b))
	}
	l.StripeSize = binary.BigEndian.Uint32(b)
	l.StripeCount = binary.BigEndian.Uint16(b[4:])
	n := int(binary.BigEndian.Uint16(b[6:]))
	l.Replicas, l.Data, l.Comps = 0, 0, nil
	if ext := 8 + 4*n + 9; len(b) > ext {
		if err := decodeComps(b[ext:], l); err != nil {
			return err
		}
		b = b[:ext]
		if l.Replicas = b[8+4*n]; l.Replicas == 1 || l.Replicas > placement.MaxReplicas {
			return errs.New(errs.Corruption, "meta: layout record has %d replicas", l.Replicas)
		}
		l.Data = binary.BigEndian.Uint64(b[9+4*n:])
		return decodeChains(b, n, l)
	}
	switch len(b) {
	case 8 + 4*n:
	case 8 + 4*n + 1:
		l.Replicas = b[8+4*n]
		if l.Replicas < 2 || l.Replicas > placement.MaxReplicas {
			return errs.New(errs.Corruption, "meta: layout record has %d replicas", l.Replicas)
		}
	case 8 + 4*n + 9: // replicas (0 for 1), then the data ID (ADR 0020)
		l.Replicas = b[8+4*n]
		if l.Replicas == 1 || l.Replicas > placement.MaxReplicas {
			return errs.New(errs.Corruption, "meta: layout record has %d replicas", l.Replicas)
		}
		if l.Data = binary.BigEndian.Uint64(b[9+4*n:]); l.Data == 0 {
			return errs.New(errs.Corruption, "meta: layout record has a zero data ID")
		}
	default:
		return errs.New(errs.Corruption, "meta: layout record has %d bytes for %d chains", len(b), n)
	}
	return decodeChains(b, n, l)
}

// decodeChains reads a layout record's n chain IDs.
func decodeChains(b []byte, n int, l *placement.Layout) error {
	l.Chains = nil
	if n > 0 {
		l.Chains = make([]placement.ChainID, n)
		for i := range l.Chains {
			l.Chains[i] = placement.ChainID(binary.BigEndian.Uint32(b[8+4*i:]))
		}
	}
	return nil
}

// decodeComps reads the components of a layout record's extended form.
func decodeComps(b []byte, l *placement.Layout) error {
	bad := func() error {
		return errs.New(errs.Corruption, "meta: layout record has malformed components (% x)", b)
	}
	if len(b) < 2 || b[0] != 1 || b[1] == 0 {
		return bad()
	}
	n := int(b[1])
	b = b[2:]
	l.Comps = make([]placement.Comp, n)
	for i := range l.Comps {
		if len(b) < 15 || len(b) < 15+int(b[14]) {
			return bad()
		}
		c := &l.Comps[i]
		c.End = int64(binary.BigEndian.Uint64(b))
		c.StripeSize = binary.BigEndian.Uint32(b[8:])
		c.StripeCount = binary.BigEndian.Uint16(b[12:])
		c.Pool = string(b[15 : 15+int(b[14])])
		b = b[15+int(b[14]):]
	}
	if len(b) != 0 {
		return bad()
	}
	return nil
}

// dirTimes is the value of a directory's "t" key: mtime and ctime, written
// blindly (never read in the transactions that write it) so that concurrent
// entry changes in one directory do not conflict.
type dirTimes struct{ Mtime, Ctime int64 }

func (t dirTimes) encode() []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, uint64(t.Mtime))
	binary.BigEndian.PutUint64(b[8:], uint64(t.Ctime))
	return b
}

func decodeDirTimes(ino uint64, b []byte) (dirTimes, error) {
	if len(b) != 16 {
		return dirTimes{}, errs.New(errs.Corruption, "meta: directory %d: times record has %d bytes, want 16", ino, len(b))
	}
	return dirTimes{int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))}, nil
}

// superblock is the value of key "F": format version byte, then the FSID.
type superblock struct {
	Version byte
	FSID    string
}

func (sb superblock) encode() []byte { return append([]byte{sb.Version}, sb.FSID...) }

func decodeSuperblock(b []byte) (superblock, error) {
	if len(b) < 2 {
		return superblock{}, errs.New(errs.Corruption, "meta: superblock has %d bytes", len(b))
	}
	return superblock{Version: b[0], FSID: string(b[1:])}, nil
}
