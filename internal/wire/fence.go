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
// target; the fences are durable when the reply comes. ApplyBy is as in
// ChunkTruncateReq (appended 2026-12-05, sent only when not 0): a thaw of
// a release given up that arrived after the next release's freeze would
// let writes in under it.
type ChunkFenceReq struct {
	ChunkSetReq
	Mode    uint8
	ApplyBy uint64
}

func (m *ChunkFenceReq) setApplyBy(us uint64) { m.ApplyBy = us }

func (m *ChunkFenceReq) Encode(e *Encoder) {
	m.ChunkSetReq.Encode(e)
	e.U8(m.Mode)
	if m.ApplyBy != 0 {
		e.U64(m.ApplyBy)
	}
}

func (m *ChunkFenceReq) Decode(d *Decoder) {
	m.ChunkSetReq.Decode(d)
	m.Mode = d.U8()
	m.ApplyBy = 0
	if d.More() {
		m.ApplyBy = d.U64()
	}
}

// OpChunkInfo asks a serving replica of a chain for the length and content
// digest (package chunk's ChunkInfo: block checksums, not the bytes) of
// some chunks of one inode. The answer is a ChunkListResp (More false)
// that leaves out the chunks that do not exist. A migration compares its
// copy with the frozen original by it (client/migrate.go).
const OpChunkInfo Op = 72 // ChunkInfoReq -> ChunkListResp

// ChunkInfoReq is the body of OpChunkInfo: slots Slots of inode Ino on a
// target.
type ChunkInfoReq = ChunkSetReq
