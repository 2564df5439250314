package wire

import (
	"encoding/binary"
	"math"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Encoder appends little-endian fields to a byte slice. Strings and byte
// slices are written as a uvarint length followed by the bytes.
type Encoder struct{ B []byte }

func (e *Encoder) U8(v uint8)   { e.B = append(e.B, v) }
func (e *Encoder) U16(v uint16) { e.B = binary.LittleEndian.AppendUint16(e.B, v) }
func (e *Encoder) U32(v uint32) { e.B = binary.LittleEndian.AppendUint32(e.B, v) }
func (e *Encoder) U64(v uint64) { e.B = binary.LittleEndian.AppendUint64(e.B, v) }
func (e *Encoder) I64(v int64)  { e.U64(uint64(v)) }
func (e *Encoder) Bool(v bool) {
	if v {
		e.U8(1)
	} else {
		e.U8(0)
	}
}
func (e *Encoder) Uvarint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }

// OptU32 appends v if has: a trailing optional field, left out when unset
// (Decoder.OptU32).
func (e *Encoder) OptU32(v uint32, has bool) {
	if has {
		e.U32(v)
	}
}
func (e *Encoder) Bytes(v []byte) {
	e.Uvarint(uint64(len(v)))
	e.B = append(e.B, v...)
}
func (e *Encoder) String(v string) {
	e.Uvarint(uint64(len(v)))
	e.B = append(e.B, v...)
}

// Decoder reads what Encoder wrote. The first error sticks: later reads
// return zero values, and Err reports it. Decoding never panics on any input
// and never allocates more than the input's length.
type Decoder struct {
	B []byte
	// Owned says that B belongs to the message decoded from it alone (a
	// response body read into a buffer of its own): Bytes then returns
	// slices of B instead of copies.
	Owned bool
	err   error
}

func (d *Decoder) fail() {
	if d.err == nil {
		d.err = errs.New(errs.Protocol, "wire: truncated or malformed message")
	}
	d.B = nil
}

// Err returns the first decoding error.
func (d *Decoder) Err() error { return d.err }

// More reports whether input is left: a message reads the fields appended
// in later versions only when it is (older senders end before them).
func (d *Decoder) More() bool { return d.err == nil && len(d.B) > 0 }

// OptU32 reads a trailing optional u32 (Encoder.OptU32): (0, false) when
// the input has ended (an older sender's).
func (d *Decoder) OptU32() (uint32, bool) {
	if !d.More() {
		return 0, false
	}
	return d.U32(), true
}

func (d *Decoder) take(n int) []byte {
	if d.err != nil || n < 0 || len(d.B) < n {
		d.fail()
		return nil
	}
	b := d.B[:n:n]
	d.B = d.B[n:]
	return b
}

func (d *Decoder) U8() uint8 {
	b := d.take(1)
	if b == nil {
		return 0
	}
	return b[0]
}
func (d *Decoder) U16() uint16 {
	b := d.take(2)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint16(b)
}
func (d *Decoder) U32() uint32 {
	b := d.take(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}
func (d *Decoder) U64() uint64 {
	b := d.take(8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}
func (d *Decoder) I64() int64 { return int64(d.U64()) }
func (d *Decoder) Bool() bool { return d.U8() != 0 }
func (d *Decoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Len reads a length prefix and checks it against what is left, so that a
// hostile length cannot make the caller allocate.
func (d *Decoder) Len() int {
	n := d.Uvarint()
	if n > uint64(len(d.B)) || n > math.MaxInt32 {
		d.fail()
		return 0
	}
	return int(n)
}

// Bytes returns a copy of a length-prefixed byte string.
func (d *Decoder) Bytes() []byte {
	b := d.take(d.Len())
	if len(b) == 0 {
		return nil
	}
	if d.Owned {
		return b // take limits its capacity: an append copies
	}
	return append([]byte(nil), b...)
}
func (d *Decoder) String() string { return string(d.take(d.Len())) }

// Count reads an element count for a list whose elements take at least
// minSize bytes each, refusing counts the remaining input cannot hold.
func (d *Decoder) Count(minSize int) int {
	n := d.Uvarint()
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(len(d.B)/minSize) {
		d.fail()
		return 0
	}
	return int(n)
}
