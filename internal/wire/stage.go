package wire

// Staging metrics (docs/tier.md, `sluice stage`): a stager, a client
// process, reports what it did to the metadata service it talks to, which
// keeps them in the metadata KV and exports their sums per job as
// sluice_stage_*.
const OpStageReport Op = 60 // StageReportReq -> Empty

// StageCounts are a stager's counters. Hits and Misses count the readers'
// first reads of a file (restored before the read started, or not);
// BytesAhead and BytesOnDemand are the sizes of those files. Restored,
// RestoredBytes and Failed count the stager's own restores.
type StageCounts struct {
	Hits, Misses              uint64
	BytesAhead, BytesOnDemand uint64
	Restored, RestoredBytes   uint64
	Failed                    uint64
}

func (m *StageCounts) Encode(e *Encoder) {
	e.U64(m.Hits)
	e.U64(m.Misses)
	e.U64(m.BytesAhead)
	e.U64(m.BytesOnDemand)
	e.U64(m.Restored)
	e.U64(m.RestoredBytes)
	e.U64(m.Failed)
}

func (m *StageCounts) Decode(d *Decoder) {
	m.Hits = d.U64()
	m.Misses = d.U64()
	m.BytesAhead = d.U64()
	m.BytesOnDemand = d.U64()
	m.Restored = d.U64()
	m.RestoredBytes = d.U64()
	m.Failed = d.U64()
}

// Add adds o to m.
func (m *StageCounts) Add(o StageCounts) {
	m.Hits += o.Hits
	m.Misses += o.Misses
	m.BytesAhead += o.BytesAhead
	m.BytesOnDemand += o.BytesOnDemand
	m.Restored += o.Restored
	m.RestoredBytes += o.RestoredBytes
	m.Failed += o.Failed
}

// StageReportReq adds a stager's counts since its last acknowledged report
// to Job's sums (deltas, so that a stager whose client moves to another
// metadata service is not counted twice: each service exports what it
// was told, and a cluster's total is their sum). Stager names the run
// (unique per run), Depth is its current depth (follow mode; 0 else),
// and Done says the run has ended. With Totals, Add holds the run's totals
// so far instead of a delta: the service keeps the larger of each count
// and what it had for Stager, so a report repeated after a lost answer
// counts once (clients of this version always send totals; a delta is
// what older clients send, without the field).
type StageReportReq struct {
	Job    string
	Stager string
	Add    StageCounts
	Depth  uint32
	Done   bool
	Totals bool
}

func (m *StageReportReq) Encode(e *Encoder) {
	e.String(m.Job)
	e.String(m.Stager)
	m.Add.Encode(e)
	e.U32(m.Depth)
	e.Bool(m.Done)
	e.Bool(m.Totals)
}

func (m *StageReportReq) Decode(d *Decoder) {
	m.Job = d.String()
	m.Stager = d.String()
	m.Add.Decode(d)
	m.Depth = d.U32()
	m.Done = d.Bool()
	if d.More() {
		m.Totals = d.Bool()
	}
}
