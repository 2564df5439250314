package wire

import "github.com/sluice-fs/sluice/internal/placement"

// Draining and removing targets (docs/placement.md).
const (
	OpTargetDrain  Op = 36 // TargetDrainReq -> Empty (mark a target draining or not)
	OpTargetRemove Op = 47 // TargetReq -> Empty (remove a drained, empty target)
)

// TargetDrainReq marks Target as draining (On) or not.
type TargetDrainReq struct {
	Target placement.TargetID
	On     bool
}

func (m *TargetDrainReq) Encode(e *Encoder) { e.U32(uint32(m.Target)); e.Bool(m.On) }
func (m *TargetDrainReq) Decode(d *Decoder) {
	m.Target = placement.TargetID(d.U32())
	m.On = d.Bool()
}
