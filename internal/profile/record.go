// Package profile is Sluice's I/O profiler (docs/profile.md, issue 18):
// the access records clients capture while a recording of their job runs,
// their encoding, and the pure summary of a workload that `sluice profile
// report` prints and `sluice advise` reads.
//
// Clients (the Go library, and so the FUSE mount, the S3 gateway and the
// Python client) record what their applications ask of Sluice: opens,
// reads and writes with their offsets and sizes, syncs, closes and the
// namespace operations, each with its start and duration. The records are
// shipped in batches to the metadata service; nothing here does I/O.
package profile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Op is what a record is of.
type Op uint8

const (
	OpOpen    Op = 1 + iota // a file opened: Ino, Handle, Len the size it had, Flags FlagWrite if writable
	OpRead                  // Handle, Ino, Off, Len bytes asked, N bytes got
	OpWrite                 // Handle, Ino, Off, Len bytes
	OpSync                  // Handle, Ino
	OpClose                 // Handle, Ino
	OpCreate                // Parent, Ino the new file's
	OpMkdir                 // Parent, Ino the new directory's
	OpUnlink                // Parent
	OpRmdir                 // Parent
	OpLookup                // Parent (0 for a lookup by path), Ino found
	OpStat                  // Ino
	OpReaddir               // Ino the directory's, N entries
	OpRename                // Parent the old one's
	opEnd
)

var opNames = [...]string{"", "open", "read", "write", "sync", "close", "create", "mkdir", "unlink", "rmdir", "lookup", "stat", "readdir", "rename"}

func (o Op) String() string {
	if o < opEnd {
		return opNames[o]
	}
	return fmt.Sprintf("op%d", o)
}

// Record flags.
const (
	FlagWrite uint8 = 1 << iota // OpOpen: opened for writing
	FlagError                   // the operation failed
)

// Record is one operation as a client saw it. Times are the client's
// clock, nanoseconds since the Unix epoch (Start) and nanoseconds (Dur).
type Record struct {
	Start  int64
	Dur    int64
	Op     Op
	Flags  uint8
	Handle uint32 // the open file within its client; 0 for namespace operations
	Ino    uint64
	Parent uint64
	Off    int64
	Len    int64
	N      int64
}

// End is when the operation returned.
func (r *Record) End() int64 { return r.Start + r.Dur }

// Batch is the records one client shipped at once.
type Batch struct {
	Client  string // the client's ID: host, process and a random part
	Records []Record
}

// batchVersion is the first byte of an encoded Batch.
const batchVersion = 1

// What a client serves, the last element of its ID (ClientVia): a FUSE
// mount, the S3 gateway.
const (
	ViaMount = "mount"
	ViaS3    = "s3"
)

// ClientVia returns what a client's ID (Batch.Client: host/pid/random,
// then /via when the client serves one, such as ViaMount) says it
// serves: "" for a program that uses the library itself.
func ClientVia(id string) string {
	parts := strings.Split(id, "/")
	if len(parts) < 4 {
		return ""
	}
	return parts[len(parts)-1]
}

// MaxClientID bounds Batch.Client.
const MaxClientID = 255

// Append appends b's encoding to dst: a version byte, the client ID, the
// record count, then each record with its start as the difference from
// the previous record's (zig-zag varint) and its other fields as varints.
func (b *Batch) Append(dst []byte) []byte {
	dst = append(dst, batchVersion)
	dst = binary.AppendUvarint(dst, uint64(len(b.Client)))
	dst = append(dst, b.Client...)
	dst = binary.AppendUvarint(dst, uint64(len(b.Records)))
	var prev int64
	for i := range b.Records {
		r := &b.Records[i]
		dst = append(dst, byte(r.Op), r.Flags)
		dst = binary.AppendVarint(dst, r.Start-prev)
		prev = r.Start
		dst = binary.AppendVarint(dst, r.Dur)
		dst = binary.AppendUvarint(dst, uint64(r.Handle))
		dst = binary.AppendUvarint(dst, r.Ino)
		dst = binary.AppendUvarint(dst, r.Parent)
		dst = binary.AppendVarint(dst, r.Off)
		dst = binary.AppendVarint(dst, r.Len)
		dst = binary.AppendVarint(dst, r.N)
	}
	return dst
}

// ErrMalformed is returned by Decode for bytes that are not a Batch.
var ErrMalformed = errors.New("profile: malformed record batch")

// minRecord is the fewest bytes one encoded record takes.
const minRecord = 2 + 8

// Decode decodes a Batch encoded by Append.
func Decode(p []byte) (Batch, error) {
	var b Batch
	if len(p) == 0 || p[0] != batchVersion {
		return b, ErrMalformed
	}
	p = p[1:]
	n, ok := uvarint(&p)
	if !ok || n > MaxClientID || n > uint64(len(p)) {
		return b, ErrMalformed
	}
	b.Client = string(p[:n])
	p = p[n:]
	count, ok := uvarint(&p)
	if !ok || count > uint64(len(p)/minRecord) {
		return b, ErrMalformed
	}
	b.Records = make([]Record, count)
	var prev int64
	for i := range b.Records {
		r := &b.Records[i]
		if len(p) < 2 {
			return Batch{}, ErrMalformed
		}
		r.Op, r.Flags = Op(p[0]), p[1]
		p = p[2:]
		d, ok1 := varint(&p)
		r.Dur, ok = varint(&p)
		ok = ok && ok1
		var h uint64
		var ok2, ok3, ok4 bool
		h, ok2 = uvarint(&p)
		r.Ino, ok3 = uvarint(&p)
		r.Parent, ok4 = uvarint(&p)
		ok = ok && ok2 && ok3 && ok4 && h <= 1<<32-1
		var ok5, ok6, ok7 bool
		r.Off, ok5 = varint(&p)
		r.Len, ok6 = varint(&p)
		r.N, ok7 = varint(&p)
		if !ok || !ok5 || !ok6 || !ok7 || r.Op == 0 || r.Op >= opEnd {
			return Batch{}, ErrMalformed
		}
		r.Handle = uint32(h)
		r.Start = prev + d
		prev = r.Start
	}
	if len(p) != 0 {
		return Batch{}, ErrMalformed
	}
	return b, nil
}

func uvarint(p *[]byte) (uint64, bool) {
	v, n := binary.Uvarint(*p)
	if n <= 0 {
		return 0, false
	}
	*p = (*p)[n:]
	return v, true
}

func varint(p *[]byte) (int64, bool) {
	v, n := binary.Varint(*p)
	if n <= 0 {
		return 0, false
	}
	*p = (*p)[n:]
	return v, true
}
