package wire

import "github.com/sluice-fs/sluice/internal/placement"

// OpMigrate is one step of a file's migration to a new layout (ADR 0020).
const OpMigrate Op = 35 // MigrateReq -> MigrateResp

// Migration steps (MigrateReq.Action), in the order a migrator takes them.
const (
	// MigrateBegin records the migration and picks the new layout, with a
	// data ID of its own. A file without chunks takes the layout at once
	// (MigrateResp.Done).
	MigrateBegin uint8 = 1 + iota
	// MigrateRenew extends the migration's lease.
	MigrateRenew
	// MigrateFreeze freezes the old chunks on their targets: from then on
	// writes to them fail with errs.Moved until the commit or an abort.
	MigrateFreeze
	// MigrateCommit switches the file to the new layout and queues the
	// old chunks for removal.
	MigrateCommit
	// MigrateAbort drops the new chunks and thaws the old ones.
	MigrateAbort
)

// MigrateReq asks for a step of file Ino's migration. Layout and Pool
// (Begin) describe the new layout: its stripe size, count and replicas,
// and optionally its chains; Pool limits the choice to a pool's targets.
// Data names the migration in the later steps (the new layout's data ID).
// Lease (Begin, Renew, Freeze) is how long, in nanoseconds, the migration
// stays valid without another step: past it, the metadata service aborts
// it.
type MigrateReq struct {
	Ino    uint64
	Action uint8
	Layout placement.Layout
	Pool   string
	Data   uint64
	Lease  int64
}

func (m *MigrateReq) Encode(e *Encoder) {
	e.U64(m.Ino)
	e.U8(m.Action)
	EncodeLayout(e, &m.Layout)
	e.String(m.Pool)
	e.U64(m.Data)
	e.I64(m.Lease)
}

func (m *MigrateReq) Decode(d *Decoder) {
	m.Ino = d.U64()
	m.Action = d.U8()
	DecodeLayout(d, &m.Layout)
	m.Pool = d.String()
	m.Data = d.U64()
	m.Lease = d.I64()
}

// MigrateResp is the migration as the step left it: the file's layout
// before (Old) and after (New), its size, and whether it is finished
// (Begin of a file without chunks, Commit).
type MigrateResp struct {
	Old, New placement.Layout
	Size     uint64
	Done     bool
}

func (m *MigrateResp) Encode(e *Encoder) {
	EncodeLayout(e, &m.Old)
	EncodeLayout(e, &m.New)
	e.U64(m.Size)
	e.Bool(m.Done)
}

func (m *MigrateResp) Decode(d *Decoder) {
	DecodeLayout(d, &m.Old)
	DecodeLayout(d, &m.New)
	m.Size = d.U64()
	m.Done = d.Bool()
}
