package wire

import (
	"sync/atomic"

	"github.com/sluice-fs/sluice/internal/errs"
)

// OpSession declares who the client of a connection is, for every request
// it sends after (SessionReq -> Empty). The wire server answers it itself,
// before reading the connection's next frame, so a service sees the
// declaration on every later request (Request.Session). Connection ops
// are numbered from 128. A server that predates it answers
// errs.NotSupported, which a client ignores.
const OpSession Op = 128

// SessionReq is what a client declares for its connection: its QoS
// identity (the metadata service schedules the connection's requests by
// it; chunk requests carry their own tag).
type SessionReq struct {
	Qos QosTag
}

func (m *SessionReq) Encode(e *Encoder) { m.Qos.Encode(e) }
func (m *SessionReq) Decode(d *Decoder) { m.Qos.Decode(d) }

// Session is the per-connection state the server keeps: what the client
// declared with OpSession. Its zero value declares nothing.
type Session struct {
	qos atomic.Pointer[QosTag]
}

// Qos returns the identity the connection declared (the zero tag if none,
// also for a nil Session).
func (s *Session) Qos() QosTag {
	if s == nil {
		return QosTag{}
	}
	if t := s.qos.Load(); t != nil {
		return *t
	}
	return QosTag{}
}

// declare applies an OpSession request body to s.
func (s *Session) declare(body []byte) error {
	var m SessionReq
	if err := Unmarshal(body, &m); err != nil {
		return errs.New(errs.Protocol, "wire: malformed session request: %v", err)
	}
	if len(m.Qos.Job) > 255 {
		return errs.New(errs.Invalid, "wire: QoS job name of %d bytes (at most 255)", len(m.Qos.Job))
	}
	s.qos.Store(&m.Qos)
	return nil
}
