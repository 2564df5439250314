package client

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Staging records (docs/format.md, "Client staging area"): one file per
// acknowledged unit of work in a client's staging directory, written to a
// temporary name, synced and renamed into place, so that a record exists
// whole or not at all. The record is the commit point of the unit: a
// segment's data file without its record was never acknowledged.

const (
	recMagic   = "SLSR"
	recVersion = 1

	recSegment = 1 // staged data of one file: drain it to the targets
	recRename  = 2 // a rename ordered after the drains before it
)

// maxRecExtents bounds a segment record's extents (a record past it is
// refused: a corrupt count must not make the decoder allocate without end).
const maxRecExtents = 1 << 20

// stageRec is a decoded staging record.
type stageRec struct {
	Kind uint8
	Seq  uint64
	// Segment: the file, its size after the segment's writes, and the
	// byte ranges written (sorted, disjoint), held in the data file at
	// the same offsets.
	Ino     uint64
	Size    int64
	Extents []stageExtent
	// Rename: the request to send.
	Rename wire.RenameReq
}

// stageExtent is a written byte range [Off, Off+Len).
type stageExtent struct{ Off, Len int64 }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (r *stageRec) encode() []byte {
	e := wire.Encoder{B: make([]byte, 0, 64+len(r.Extents)*8)}
	e.B = append(e.B, recMagic...)
	e.U8(recVersion)
	e.U8(r.Kind)
	e.U64(r.Seq)
	switch r.Kind {
	case recSegment:
		e.U64(r.Ino)
		e.U64(uint64(r.Size))
		e.Uvarint(uint64(len(r.Extents)))
		for _, x := range r.Extents {
			e.Uvarint(uint64(x.Off))
			e.Uvarint(uint64(x.Len))
		}
	case recRename:
		r.Rename.Encode(&e)
	}
	return binary.LittleEndian.AppendUint32(e.B, crc32.Checksum(e.B, castagnoli))
}

func decodeStageRec(b []byte) (stageRec, error) {
	bad := func(why string) (stageRec, error) {
		return stageRec{}, errs.New(errs.Corruption, "client: staging record: %s", why)
	}
	if len(b) < len(recMagic)+2+8+4 || string(b[:4]) != recMagic {
		return bad("no magic")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return bad("checksum mismatch")
	}
	d := wire.Decoder{B: body[4:]}
	if v := d.U8(); v != recVersion {
		return bad("unknown version")
	}
	r := stageRec{Kind: d.U8(), Seq: d.U64()}
	switch r.Kind {
	case recSegment:
		r.Ino = d.U64()
		r.Size = int64(d.U64())
		n := d.Uvarint()
		if n > maxRecExtents || n > uint64(len(d.B)) {
			return bad("too many extents")
		}
		r.Extents = make([]stageExtent, n)
		end := int64(0)
		for i := range r.Extents {
			off, ln := d.Uvarint(), d.Uvarint()
			if off > 1<<62 || ln == 0 || ln > 1<<62 || int64(off) < end {
				return bad("extents out of order")
			}
			r.Extents[i] = stageExtent{Off: int64(off), Len: int64(ln)}
			end = int64(off + ln)
		}
		if r.Size < 0 || r.Size < end {
			return bad("size below the extents")
		}
	case recRename:
		r.Rename.Decode(&d)
	default:
		return bad("unknown kind")
	}
	if d.Err() != nil || len(d.B) != 0 {
		return bad("malformed body")
	}
	return r, nil
}

// addExtent merges [off, off+n) into the sorted, disjoint list xs and
// returns how many bytes the list grew by (those of the range it did not
// hold yet).
func addExtent(xs []stageExtent, off, n int64) ([]stageExtent, int64) {
	if n <= 0 {
		return xs, 0
	}
	end := off + n
	out := make([]stageExtent, 0, len(xs)+1)
	i := 0
	for ; i < len(xs) && xs[i].Off+xs[i].Len < off; i++ {
		out = append(out, xs[i])
	}
	var had int64 // bytes of the extents merged
	for ; i < len(xs) && xs[i].Off <= end; i++ {
		off = min(off, xs[i].Off)
		end = max(end, xs[i].Off+xs[i].Len)
		had += xs[i].Len
	}
	out = append(out, stageExtent{Off: off, Len: end - off})
	return append(out, xs[i:]...), end - off - had
}
