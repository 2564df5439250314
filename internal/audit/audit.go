// Package audit defines the records of Sluice's audit trail and the hash
// chain that makes it tamper-evident (docs/audit.md, ADR 0012).
//
// An Entry says who changed what in the namespace, when, and the values
// before and after. The metadata service appends an entry's encoding in
// the same KV transaction as the change, as a pending record; a sealer
// later gives pending records consecutive sequence numbers and chains them:
// the sealed record of sequence n carries its own SHA-256 (over n, the
// previous hash and the entry) and that of record n-1 (Seal). Verifier walks a chain and names the first record that does
// not fit, so that editing, deleting, reordering or truncating sealed
// records is detected.
//
// Everything here is pure: encodings, hashes and the verifier. The KV keys
// and the sealer live in internal/meta.
package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Op is the kind of change an entry records.
type Op uint8

// The audited operations. Numbers are stored: never reuse one.
const (
	OpSetAttr   Op = 1 // mode, owner or group changed (Changes says which)
	OpSetLayout Op = 2 // a directory's default layout or a file's layout
	OpUnlink    Op = 3 // a non-directory entry removed
	OpRmdir     Op = 4 // a directory removed
	OpRename    Op = 5 // an entry moved (Replaced: the inode it replaced)
	OpExchange  Op = 6 // two entries swapped (RENAME_EXCHANGE)
	OpQos       Op = 7 // a QoS setting (Name "class:C" or "job:J"; Changes "weight" or "limit")
	OpMigrate   Op = 8 // a file's data moved to a new layout (Changes "layout")
	OpPolicy    Op = 9 // a directory's policy set or removed (Name the policy: an xattr trusted.sluice.*, or "absorb"; Changes "value")
)

var opNames = map[Op]string{
	OpSetAttr: "setattr", OpSetLayout: "setlayout", OpUnlink: "unlink",
	OpRmdir: "rmdir", OpRename: "rename", OpExchange: "exchange", OpQos: "qos",
	OpMigrate: "migrate", OpPolicy: "policy",
}

func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return "op" + strconv.Itoa(int(o))
}

// Who is the identity a request carried; Known is false when the request
// had none (older clients, and paths that do not pass credentials yet).
type Who struct {
	Known    bool
	Uid, Gid uint32
}

// Change is one attribute's value before and after, as text (a mode in
// octal, a layout as Layout.String writes it).
type Change struct {
	Field, Old, New string
}

// Entry is one audited change.
type Entry struct {
	Time int64 // Unix nanoseconds, the metadata service's clock
	Op   Op
	// Ino is the inode changed (removed, moved, re-attributed). Parent and
	// Name name its entry: for a setattr or setlayout they are zero.
	Ino    uint64
	Parent uint64
	Name   string
	// NewParent and NewName are a rename's destination; Replaced is the
	// inode that was there (0: none) for a rename, the other inode for an
	// exchange.
	NewParent uint64
	NewName   string
	Replaced  uint64
	Who       Who
	Changes   []Change
}

// recordVersion is the version byte of Encode's output.
const recordVersion = 1

// Encode returns the entry's record: version byte, i64 time, op byte, u64
// ino, parent, string name, u64 new parent, string new name, u64 replaced,
// who (byte known, u32 uid, u32 gid), uvarint count of changes, each three
// strings. Integers are big-endian; strings are a uvarint length and bytes.
func (e *Entry) Encode() []byte {
	b := make([]byte, 0, 64+len(e.Name)+len(e.NewName))
	b = append(b, recordVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Time))
	b = append(b, byte(e.Op))
	b = binary.BigEndian.AppendUint64(b, e.Ino)
	b = binary.BigEndian.AppendUint64(b, e.Parent)
	b = appendString(b, e.Name)
	b = binary.BigEndian.AppendUint64(b, e.NewParent)
	b = appendString(b, e.NewName)
	b = binary.BigEndian.AppendUint64(b, e.Replaced)
	known := byte(0)
	if e.Who.Known {
		known = 1
	}
	b = append(b, known)
	b = binary.BigEndian.AppendUint32(b, e.Who.Uid)
	b = binary.BigEndian.AppendUint32(b, e.Who.Gid)
	b = binary.AppendUvarint(b, uint64(len(e.Changes)))
	for _, c := range e.Changes {
		b = appendString(b, c.Field)
		b = appendString(b, c.Old)
		b = appendString(b, c.New)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads a record; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errs.New(errs.Corruption, "audit: record truncated")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errs.New(errs.Corruption, "audit: bad length in record")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = errs.New(errs.Corruption, "audit: string of %d bytes in a record of %d left", n, len(d.b))
		return ""
	}
	return string(d.take(int(n)))
}

// Decode parses a record written by Encode. A malformed record is an error
// of class errs.Corruption.
func Decode(b []byte) (Entry, error) {
	d := decoder{b: b}
	var e Entry
	if v := d.u8(); d.err == nil && v != recordVersion {
		return Entry{}, errs.New(errs.Corruption, "audit: record version %d, this build reads %d", v, recordVersion)
	}
	e.Time = int64(d.u64())
	e.Op = Op(d.u8())
	e.Ino = d.u64()
	e.Parent = d.u64()
	e.Name = d.str()
	e.NewParent = d.u64()
	e.NewName = d.str()
	e.Replaced = d.u64()
	e.Who.Known = d.u8() != 0
	e.Who.Uid = d.u32()
	e.Who.Gid = d.u32()
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b))/3 {
		return Entry{}, errs.New(errs.Corruption, "audit: %d changes in a record of %d bytes left", n, len(d.b))
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		e.Changes = append(e.Changes, Change{Field: d.str(), Old: d.str(), New: d.str()})
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errs.New(errs.Corruption, "audit: %d bytes after the record", len(d.b))
	}
	if d.err != nil {
		return Entry{}, d.err
	}
	return e, nil
}

// Hash is a SHA-256 digest of a sealed record.
type Hash [sha256.Size]byte

func (h Hash) String() string { return fmt.Sprintf("%x", h[:]) }

// sealedVersion is the version byte of a sealed record.
const sealedVersion = 1

// sealedHeader is the size of a sealed record before the entry's record.
const sealedHeader = 1 + 2*sha256.Size

// Seal returns the sealed record of sequence seq that chains record after
// the sealed record whose hash is prev (zero for sequence 1): version byte,
// prev, the record's own hash h, the record. h is SHA-256 over seq (u64
// big-endian), prev and the record, so that a record edited, or moved to
// another sequence number, no longer matches its own hash, and the next
// record carries it as its prev.
func Seal(seq uint64, prev Hash, record []byte) (sealed []byte, h Hash) {
	h = hashRecord(seq, prev, record)
	sealed = make([]byte, 0, sealedHeader+len(record))
	sealed = append(sealed, sealedVersion)
	sealed = append(sealed, prev[:]...)
	sealed = append(sealed, h[:]...)
	sealed = append(sealed, record...)
	return sealed, h
}

func hashRecord(seq uint64, prev Hash, record []byte) Hash {
	hw := sha256.New()
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	hw.Write(s[:])
	hw.Write(prev[:])
	hw.Write(record)
	var h Hash
	hw.Sum(h[:0])
	return h
}

// Open splits a sealed record into the previous record's hash, the hash it
// claims for itself and the entry's record. It does not check the hashes.
func Open(sealed []byte) (prev, self Hash, record []byte, err error) {
	if len(sealed) < sealedHeader {
		return prev, self, nil, errs.New(errs.Corruption, "audit: sealed record has %d bytes", len(sealed))
	}
	if sealed[0] != sealedVersion {
		return prev, self, nil, errs.New(errs.Corruption, "audit: sealed record version %d, this build reads %d", sealed[0], sealedVersion)
	}
	copy(prev[:], sealed[1:])
	copy(self[:], sealed[1+len(prev):])
	return prev, self, sealed[sealedHeader:], nil
}

// Head is the chain's last sealed record: its sequence number (0: none yet)
// and hash. The sealer keeps it beside the chain.
type Head struct {
	Seq  uint64
	Hash Hash
}

// Encode returns u64 seq and the hash.
func (h Head) Encode() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(h.Hash)), h.Seq)
	return append(b, h.Hash[:]...)
}

// DecodeHead parses Head.Encode's output.
func DecodeHead(b []byte) (Head, error) {
	var h Head
	if len(b) != 8+len(h.Hash) {
		return h, errs.New(errs.Corruption, "audit: chain head has %d bytes, want %d", len(b), 8+len(h.Hash))
	}
	h.Seq = binary.BigEndian.Uint64(b)
	copy(h.Hash[:], b[8:])
	return h, nil
}

// BrokenError names the first sealed record at which a chain does not
// verify. It wraps errs.ErrCorruption.
type BrokenError struct {
	Seq    uint64 // the sequence number where the chain breaks
	Reason string
}

func (e *BrokenError) Error() string {
	return fmt.Sprintf("audit: chain broken at entry %d: %s", e.Seq, e.Reason)
}

func (e *BrokenError) Unwrap() error { return errs.ErrCorruption }

// Verifier checks a chain fed to it in key order. The zero value expects
// sequence 1 first. After the first error it stays failed.
type Verifier struct {
	n    uint64 // records checked
	prev Hash   // hash of the last record checked
	err  *BrokenError
}

// Add checks the sealed record stored under sequence seq: it must be the
// next sequence number, match its own hash, carry the previous record's
// hash and hold a record that decodes. It returns the decoded entry.
func (v *Verifier) Add(seq uint64, sealed []byte) (Entry, error) {
	if v.err != nil {
		return Entry{}, v.err
	}
	want := v.n + 1
	fail := func(at uint64, format string, args ...any) (Entry, error) {
		v.err = &BrokenError{Seq: at, Reason: fmt.Sprintf(format, args...)}
		return Entry{}, v.err
	}
	if seq != want {
		return fail(want, "entry %d is missing (the next entry stored is %d)", want, seq)
	}
	prev, self, rec, err := Open(sealed)
	if err != nil {
		return fail(seq, "%v", err)
	}
	if hashRecord(seq, prev, rec) != self {
		return fail(seq, "entry %d does not match its hash: it was edited, or moved from another position", seq)
	}
	if prev != v.prev {
		if v.n == 0 {
			return fail(seq, "entry 1 does not start the chain: entries before it were removed")
		}
		return fail(seq, "entry %d does not carry the hash of entry %d: entries between were removed, or one of them was rewritten", seq, v.n)
	}
	e, err := Decode(rec)
	if err != nil {
		return fail(seq, "%v", err)
	}
	v.n, v.prev = seq, self
	return e, nil
}

// Err returns the first error Add or Finish returned, nil if none.
func (v *Verifier) Err() error {
	if v.err == nil {
		return nil
	}
	return v.err
}

// Finish checks the chain's end against the stored head: a chain shorter
// than the head was truncated, and the last record must hash to the head's
// hash. It returns the number of records checked.
func (v *Verifier) Finish(h Head) (uint64, error) {
	if v.err != nil {
		return v.n, v.err
	}
	switch {
	case h.Seq > v.n:
		v.err = &BrokenError{Seq: v.n + 1, Reason: fmt.Sprintf("entries %d to %d are missing (the chain head says %d)", v.n+1, h.Seq, h.Seq)}
	case h.Seq < v.n:
		v.err = &BrokenError{Seq: h.Seq + 1, Reason: fmt.Sprintf("the chain head says %d entries but %d are stored", h.Seq, v.n)}
	case h.Hash != v.prev:
		v.err = &BrokenError{Seq: v.n, Reason: fmt.Sprintf("entry %d does not match the chain head's hash: it was rewritten", v.n)}
	default:
		return v.n, nil
	}
	return v.n, v.err
}

// TimeOf formats an entry's time for people: RFC 3339 with nanoseconds, UTC.
func TimeOf(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }
