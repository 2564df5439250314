package wire

// Chunk fences for online migration (see package chunk, "Fences").

// OpChunkFence freezes or thaws chunks on a chain; like OpChunkRemove it
// goes to the chain's head, which passes it along the chain.
const OpChunkFence Op = 71 // ChunkFenceReq -> Empty (freeze or thaw chunks for a migration)

// Modes of ChunkFenceReq.
const (
	// FenceFreeze freezes the chunks: writes and truncates fail with
	// errs.Moved, and so do reads once the chunks are removed.
	FenceFreeze uint8 = 1
	// FenceThaw removes their fences (a migration given up).
	FenceThaw uint8 = 2
)

// ChunkFenceReq freezes or thaws (Mode) slots Slots of inode Ino on a
// target; the fences are durable when the reply comes.
type ChunkFenceReq struct {
	ChunkSetReq
	Mode uint8
}

func (m *ChunkFenceReq) Encode(e *Encoder) {
	m.ChunkSetReq.Encode(e)
	e.U8(m.Mode)
}

func (m *ChunkFenceReq) Decode(d *Decoder) {
	m.ChunkSetReq.Decode(d)
	m.Mode = d.U8()
}
