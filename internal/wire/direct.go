package wire

import (
	"os"
	"strings"

	"github.com/sluice-fs/sluice/internal/placement"
)

// BootID is the boot ID of this machine's running kernel ("" if unknown):
// processes that see the same one share the kernel, so descriptors can
// pass between them.
func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Direct reads (docs/adr/0025-direct-reads.md): a client on the machine of
// a storage service reads unreplicated chunks' files itself, with
// descriptors the service passes over a Unix socket.

// OpDirectInfo asks a storage service for the Unix socket that hands out
// chunks' files, and the boot ID of its machine's kernel: a client whose
// kernel has the same boot ID may use the socket (empty Socket: the
// service offers none).
const OpDirectInfo Op = 73 // Empty -> DirectInfoResp

// DirectInfoResp is the answer to OpDirectInfo.
type DirectInfoResp struct {
	Socket string // the socket's path, or "" for none
	Boot   string // /proc/sys/kernel/random/boot_id of the service's machine
}

func (m *DirectInfoResp) Encode(e *Encoder) { e.String(m.Socket); e.String(m.Boot) }
func (m *DirectInfoResp) Decode(d *Decoder) { m.Socket = d.String(); m.Boot = d.String() }

// DirectOpenReq is one message on the Unix socket (a SOCK_SEQPACKET
// socket: one message per request): open chunk Ino/Slot of the
// unreplicated target Target for direct reading. The answer is a
// DirectOpenResp message; when it is OK, the message carries the chunk's
// data and checksum files' descriptors, in that order (SCM_RIGHTS).
//
// With Data set (appended 2026-12-02, sent only when set), the service
// opens the chunk's data file alone for FUSE passthrough, as for its own
// mount (chunk.Store.OpenData: the whole chunk checked against its
// checksums first; refused with NotSupported for a chunk with holes or
// partial blocks): the answer has Data and Len set and carries that one
// descriptor. An older service ignores Data and answers with two
// descriptors and without Data, which the client must refuse.
type DirectOpenReq struct {
	Target placement.TargetID
	Ino    uint64
	Slot   uint32
	Data   bool
}

func (m *DirectOpenReq) Encode(e *Encoder) {
	e.U32(uint32(m.Target))
	e.U64(m.Ino)
	e.U32(m.Slot)
	if m.Data {
		e.Bool(true)
	}
}

func (m *DirectOpenReq) Decode(d *Decoder) {
	m.Target = placement.TargetID(d.U32())
	m.Ino = d.U64()
	m.Slot = d.U32()
	m.Data = d.More() && d.Bool()
}

// DirectOpenResp answers a DirectOpenReq: Code 0 and the two descriptors,
// or an error code (package errs's numbering, as on the wire) and its
// message.
// Data and Len (appended, sent only with Data) answer a request with
// Data: the one descriptor is the data file, Len the chunk's length.
type DirectOpenResp struct {
	Code uint16
	Msg  string
	Data bool
	Len  uint64
}

func (m *DirectOpenResp) Encode(e *Encoder) {
	e.U16(m.Code)
	e.String(m.Msg)
	if m.Data || m.Len != 0 {
		e.Bool(m.Data)
		e.U64(m.Len)
	}
}

func (m *DirectOpenResp) Decode(d *Decoder) {
	m.Code = d.U16()
	m.Msg = d.String()
	m.Data, m.Len = false, 0
	if d.More() {
		m.Data, m.Len = d.Bool(), d.U64()
	}
}
