package wire

// Messages of the checkpoint absorb policy (ADR 0013).

// Absorb modes of a directory (AbsorbSetReq.Mode, AbsorbPolicy.Mode).
const (
	AbsorbInherit uint8 = 0 // no policy of its own: the nearest ancestor's applies
	AbsorbOn      uint8 = 1 // files below are absorbed into clients' staging
	AbsorbOff     uint8 = 2 // files below are written straight to the targets
)

// AbsorbSetReq sets (or with AbsorbInherit clears) a directory's policy.
type AbsorbSetReq struct {
	Ino  uint64
	Mode uint8
}

func (m *AbsorbSetReq) Encode(e *Encoder) { e.U64(m.Ino); e.U8(m.Mode) }
func (m *AbsorbSetReq) Decode(d *Decoder) { m.Ino = d.U64(); m.Mode = d.U8() }

// AbsorbPolicy is the policy in force for a directory: Mode (never
// AbsorbInherit: AbsorbOff when no directory up to the root sets one) and
// From, the directory whose own policy it is (0 when none).
type AbsorbPolicy struct {
	Mode uint8
	From uint64
}

func (m *AbsorbPolicy) Encode(e *Encoder) { e.U8(m.Mode); e.U64(m.From) }
func (m *AbsorbPolicy) Decode(d *Decoder) { m.Mode = d.U8(); m.From = d.U64() }

// StagedReq names a file with data staged by one client (Owner: the
// client's staging directory, "host/name").
type StagedReq struct {
	Ino   uint64
	Owner string
}

func (m *StagedReq) Encode(e *Encoder) { e.U64(m.Ino); e.String(m.Owner) }
func (m *StagedReq) Decode(d *Decoder) { m.Ino = d.U64(); m.Owner = d.String() }

// StagedListResp lists the files with staged data, in inode order.
type StagedListResp struct {
	Files []StagedReq
}

func (m *StagedListResp) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Files)))
	for i := range m.Files {
		m.Files[i].Encode(e)
	}
}

func (m *StagedListResp) Decode(d *Decoder) {
	n := d.Count(9)
	m.Files = make([]StagedReq, n)
	for i := range m.Files {
		m.Files[i].Decode(d)
	}
}
