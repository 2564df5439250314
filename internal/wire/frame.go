// Package wire is Sluice's network protocol: length-prefixed binary frames
// over TCP, many requests in flight on one connection, matched by request ID.
//
// A connection starts with an 8-byte hello each way: "SLCE", a little-endian
// uint16 protocol version, and a uint16 status (0 = accepted). Then each
// frame is a 24-byte header, a body (an encoded Message, or an error text in
// a failed response) and raw data (the bytes of a chunk read or write):
//
//	u32 bodyLen | u32 dataLen | u64 requestID | u16 op | u16 flags | u32 status
//
// Frame checksums: a client that sets helloSums in its hello's status asks
// for them, and a server that can answers with helloSums (older peers send
// and answer 0, and then there are none). With them every frame has the
// CRC32C of its header and body (u32, little-endian) between its body and
// its data, both ways; a frame that does not match closes the connection
// (errs.Unavailable for the calls in flight): a bit flipped in transit can
// neither change a message nor send a reply to the wrong call. The data
// is not covered (a chunk read's or write's carries its own CRC32C,
// wire.ChunkWriteReq).
//
// Data is sent with writev straight from the caller's buffer and read
// straight into the caller's buffer, so bulk bytes are not copied in user
// space on either side. A peer that sends a malformed frame is disconnected;
// the server keeps serving other connections. docs/format.md has the details.
package wire

import (
	"encoding/binary"
	"sync"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/errs"
)

// Version is the protocol version this package speaks.
const Version = 2

const (
	// HeaderSize is the size of a frame header.
	HeaderSize = 24
	// MaxBody bounds a frame's body.
	MaxBody = 4 << 20
	// MaxData bounds a frame's data.
	MaxData = 64 << 20

	flagResponse = 1
	helloSize    = 8

	// helloSums in a hello's status: frame checksums (see above).
	helloSums = 0x8000
	sumSize   = 4
)

// frameSum is the checksum of a frame's header and body.
func frameSum(hdr, body []byte) uint32 { return checksum.DataCRC(hdr, body) }

var magic = [4]byte{'S', 'L', 'C', 'E'}

// Header is a decoded frame header.
type Header struct {
	BodyLen uint32
	DataLen uint32
	ID      uint64
	Op      Op
	Flags   uint16
	Status  errs.Code
}

// Put writes h into b[:HeaderSize].
func (h *Header) Put(b []byte) {
	binary.LittleEndian.PutUint32(b[0:], h.BodyLen)
	binary.LittleEndian.PutUint32(b[4:], h.DataLen)
	binary.LittleEndian.PutUint64(b[8:], h.ID)
	binary.LittleEndian.PutUint16(b[16:], uint16(h.Op))
	binary.LittleEndian.PutUint16(b[18:], h.Flags)
	binary.LittleEndian.PutUint32(b[20:], uint32(h.Status))
}

// ParseHeader decodes and checks a frame header.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, errs.New(errs.Protocol, "wire: short frame header (%d bytes)", len(b))
	}
	h := Header{
		BodyLen: binary.LittleEndian.Uint32(b[0:]),
		DataLen: binary.LittleEndian.Uint32(b[4:]),
		ID:      binary.LittleEndian.Uint64(b[8:]),
		Op:      Op(binary.LittleEndian.Uint16(b[16:])),
		Flags:   binary.LittleEndian.Uint16(b[18:]),
		Status:  errs.Code(binary.LittleEndian.Uint32(b[20:])),
	}
	switch {
	case h.BodyLen > MaxBody:
		return h, errs.New(errs.Protocol, "wire: frame body of %d bytes is over the limit of %d", h.BodyLen, MaxBody)
	case h.DataLen > MaxData:
		return h, errs.New(errs.Protocol, "wire: frame data of %d bytes is over the limit of %d", h.DataLen, MaxData)
	case h.Flags&^flagResponse != 0:
		return h, errs.New(errs.Protocol, "wire: unknown frame flags %#x", h.Flags)
	}
	return h, nil
}

func putHello(b []byte, status uint16) {
	copy(b, magic[:])
	binary.LittleEndian.PutUint16(b[4:], Version)
	binary.LittleEndian.PutUint16(b[6:], status)
}

func parseHello(b []byte) (version, status uint16, err error) {
	if [4]byte(b[:4]) != magic {
		return 0, 0, errs.New(errs.Protocol, "wire: peer does not speak the Sluice protocol (bad magic %q)", b[:4])
	}
	return binary.LittleEndian.Uint16(b[4:]), binary.LittleEndian.Uint16(b[6:]), nil
}

// Marshal encodes m into a new byte slice.
func Marshal(m Message) []byte {
	e := Encoder{B: make([]byte, 0, 64)}
	m.Encode(&e)
	return e.B
}

// Unmarshal decodes b into m, failing with errs.Protocol on malformed input.
func Unmarshal(b []byte, m Message) error {
	d := Decoder{B: b}
	m.Decode(&d)
	return d.Err()
}

// unmarshalOwned is Unmarshal of a b that nothing else uses or reuses (a
// response body): the byte fields of m are slices of b, not copies.
func unmarshalOwned(b []byte, m Message) error {
	d := Decoder{B: b, Owned: true}
	m.Decode(&d)
	return d.Err()
}

// Buffer pool for bulk data, by power-of-two size class from 4 KiB to MaxData.
const minClass = 12

var pools [27 - minClass + 1]sync.Pool

func class(n int) int {
	c := minClass
	for 1<<c < n {
		c++
	}
	return c
}

// GetBuf returns a buffer of length n from a pool. Give it back with PutBuf
// when nothing refers to it any more.
func GetBuf(n int) []byte {
	c := class(n)
	if c-minClass >= len(pools) {
		return make([]byte, n)
	}
	if b, ok := pools[c-minClass].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, 1<<c)
}

// PutBuf returns a buffer obtained from GetBuf to its pool.
func PutBuf(b []byte) {
	c := class(cap(b))
	if 1<<c != cap(b) || c-minClass >= len(pools) {
		return
	}
	b = b[:0]
	pools[c-minClass].Put(&b)
}
