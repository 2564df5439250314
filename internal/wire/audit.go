package wire

// AuditListReq asks for the audit trail's entries after sequence After
// (0: from the start), at most Limit of them (0: the service's page size),
// those at or after Since (Unix ns; 0: all) and, if Path is set, those
// about the entry at Path, inside the directory at Path, or about the
// inode Path resolves to now.
type AuditListReq struct {
	After uint64
	Limit uint32
	Since int64
	Path  string
}

func (m *AuditListReq) Encode(e *Encoder) {
	e.U64(m.After)
	e.U32(m.Limit)
	e.I64(m.Since)
	e.String(m.Path)
}

func (m *AuditListReq) Decode(d *Decoder) {
	m.After = d.U64()
	m.Limit = d.U32()
	m.Since = d.I64()
	m.Path = d.String()
}

// AuditRecord is one audit entry: its sequence number and its record as
// internal/audit encodes it (Entry.Encode).
type AuditRecord struct {
	Seq    uint64
	Record []byte
}

func (m *AuditRecord) Encode(e *Encoder) { e.U64(m.Seq); e.Bytes(m.Record) }
func (m *AuditRecord) Decode(d *Decoder) { m.Seq = d.U64(); m.Record = d.Bytes() }

// AuditListResp is one page of entries. Next is the sequence to pass as
// After for the next page, 0 when the trail has no more entries.
type AuditListResp struct {
	Entries []AuditRecord
	Next    uint64
}

func (m *AuditListResp) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Entries)))
	for i := range m.Entries {
		m.Entries[i].Encode(e)
	}
	e.U64(m.Next)
}

func (m *AuditListResp) Decode(d *Decoder) {
	n := d.Count(9)
	m.Entries = nil
	if n > 0 {
		m.Entries = make([]AuditRecord, n)
		for i := range m.Entries {
			m.Entries[i].Decode(d)
		}
	}
	m.Next = d.U64()
}

// AuditVerifyResp reports a check of the audit trail's hash chain: how many
// entries were checked, the chain head (its sequence and hash, which an
// administrator can record elsewhere to detect a rewrite of the whole
// chain), and, if the chain is broken, the first bad entry (BrokenSeq > 0)
// and why.
type AuditVerifyResp struct {
	Entries   uint64
	HeadSeq   uint64
	HeadHash  []byte
	BrokenSeq uint64
	Reason    string
}

func (m *AuditVerifyResp) Encode(e *Encoder) {
	e.U64(m.Entries)
	e.U64(m.HeadSeq)
	e.Bytes(m.HeadHash)
	e.U64(m.BrokenSeq)
	e.String(m.Reason)
}

func (m *AuditVerifyResp) Decode(d *Decoder) {
	m.Entries = d.U64()
	m.HeadSeq = d.U64()
	m.HeadHash = d.Bytes()
	m.BrokenSeq = d.U64()
	m.Reason = d.String()
}
