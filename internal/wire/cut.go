package wire

// Cut generations (2026-12-05): how a truncate that shrinks a file and a
// write another client makes to it are ordered (docs/design.md,
// Consistency model; docs/format.md, "Cut generations").
//
// Every regular file has a cut generation, 0 until its first cut. A
// truncate that cuts chunks moves it to the next odd number before it cuts
// (OpCutBegin) and to the even number after that once the size is set
// (SetAttrReq with SetIfCut); while it is odd no conditional commit
// applies. A writer sends with its size commit (CommitWriteReq.CutIf) the
// generation it knew before it wrote the data; the commit applies only if
// that is still the file's, and even. Otherwise a cut ran since the data
// left the writer, maybe over it: the commit is refused (CommitResp
// Refused) and the writer writes its data again once the cut has ended,
// and commits under the new generation. So an acknowledged write is never
// cut by a truncate that the commit order puts before it.
//
// A cut whose truncate stopped (its client killed) would hold writers
// off for ever: after CutHold the service takes it over (the generation
// moves on to even) at the next commit, OpCutGen or OpCutBegin. A
// truncating client gives its chunk truncates less time than that
// (CutTimeout, counted from when it sent OpCutBegin), and a target refuses
// one that arrives after that (their ApplyBy, applyby.go), so none of them
// lands after the take-over.

import "time"

const (
	// OpCutBegin begins a cut of a file's chunks: the cut generation moves
	// to the next odd number (errs.Busy while another cut runs that has
	// not yet been taken over). The answer has the generation, which the
	// size change that ends the cut names (SetIfCut), and the file's
	// attributes.
	OpCutBegin Op = 88 // InoReq -> CutResp
	// OpCutGen answers a file's cut generation (and attributes), taking
	// over a cut held past CutHold: what a writer whose commit was refused
	// polls until the cut has ended.
	OpCutGen Op = 89 // InoReq -> CutResp
	// OpCutEnd ends a cut without a size change: a truncate that failed,
	// or whose size change went without SetIfCut so that it could cut
	// again under the same cut. errs.Busy if the generation is no longer
	// Cut (the cut was taken over or ended).
	OpCutEnd Op = 90 // CutEndReq -> CutResp
)

// CutEndReq is the body of OpCutEnd: the file and its cut's generation.
type CutEndReq struct {
	Ino uint64
	Cut uint64
}

func (m *CutEndReq) Encode(e *Encoder) { e.U64(m.Ino); e.U64(m.Cut) }
func (m *CutEndReq) Decode(d *Decoder) { m.Ino = d.U64(); m.Cut = d.U64() }

// CutHold is how long a cut may hold writers' commits off before the
// metadata service takes it over: well within a client's flush timeout
// (60 s by default), so that a flush held off by a truncating client that
// died still lands. CutTimeout, well below CutHold, bounds the chunk
// truncates and size change of one cut, from the moment its client sent
// OpCutBegin.
const (
	CutHold    = 30 * time.Second
	CutTimeout = 15 * time.Second
)

// CutResp answers OpCutBegin and OpCutGen: the file's cut generation and
// its attributes.
type CutResp struct {
	Cut  uint64
	Attr Attr
}

func (m *CutResp) Encode(e *Encoder) { e.U64(m.Cut); m.Attr.Encode(e) }
func (m *CutResp) Decode(d *Decoder) { m.Cut = d.U64(); m.Attr.Decode(d) }

// CommitResp answers a size commit that carried a cut condition
// (CommitWriteReq.CutIf): the file's attributes after it (before it,
// when refused), then its cut generation, and whether the commit was
// refused because the generation was not the one the writer knew or a
// cut was running. An older service answers a bare Attr (it ignored the
// condition): Known is false then.
type CommitResp struct {
	Attr    Attr
	Known   bool // the service knows cut generations: Cut and Refused follow Attr
	Cut     uint64
	Refused bool
}

func (m *CommitResp) Encode(e *Encoder) {
	m.Attr.Encode(e)
	if m.Known {
		e.U64(m.Cut)
		e.Bool(m.Refused)
	}
}

func (m *CommitResp) Decode(d *Decoder) {
	m.Attr.Decode(d)
	m.Known, m.Cut, m.Refused = false, 0, false
	if d.More() {
		m.Known = true
		m.Cut = d.U64()
		m.Refused = d.Bool()
	}
}

// encodeOptCut writes a commit's trailing cut condition, when it has one.
func encodeOptCut(e *Encoder, cutIf bool, cut uint64) {
	if cutIf {
		e.U64(cut)
	}
}

// decodeOptCut reads a commit's trailing cut condition: none from a
// client that sent none.
func decodeOptCut(d *Decoder) (bool, uint64) {
	if !d.More() {
		return false, 0
	}
	return true, d.U64()
}
