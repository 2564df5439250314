package wire

// The I/O profiler (docs/profile.md, issue 18): recordings are kept by the
// metadata service; clients of the recorded job ask it whether one runs
// (OpProfileCheck) and ship their access records to it in batches.
const (
	OpProfileSet    Op = 48 // ProfileSetReq -> Empty (start, stop or remove a recording)
	OpProfileList   Op = 56 // Empty -> ProfileListResp
	OpProfileCheck  Op = 57 // ProfileCheckReq -> ProfileSession (the job's running recording; Name "" if none)
	OpProfileAppend Op = 58 // ProfileAppendReq -> Empty (errs.NotFound once the recording is over)
	OpProfileRead   Op = 59 // ProfileReadReq -> ProfileReadResp
)

// ProfileSession is a recording: the clients of Job record from Start to
// Until (Unix ns, the metadata service's clock). Dir narrows the report
// to the files under it. Records and Dropped count what clients shipped
// and what they could not (the recording full, a client's buffer full).
type ProfileSession struct {
	Name       string
	Job        string
	Dir        string
	Start      int64
	Until      int64
	MaxRecords uint64
	Records    uint64
	Dropped    uint64
	Clients    uint32
	Batches    uint64
}

func (m *ProfileSession) Encode(e *Encoder) {
	e.String(m.Name)
	e.String(m.Job)
	e.String(m.Dir)
	e.I64(m.Start)
	e.I64(m.Until)
	e.U64(m.MaxRecords)
	e.U64(m.Records)
	e.U64(m.Dropped)
	e.U32(m.Clients)
	e.U64(m.Batches)
}

func (m *ProfileSession) Decode(d *Decoder) {
	m.Name = d.String()
	m.Job = d.String()
	m.Dir = d.String()
	m.Start = d.I64()
	m.Until = d.I64()
	m.MaxRecords = d.U64()
	m.Records = d.U64()
	m.Dropped = d.U64()
	m.Clients = d.U32()
	m.Batches = d.U64()
}

// Kinds of ProfileSetReq.
const (
	ProfileStart  uint8 = 1 + iota // start Session (Name, Job, Dir, Until, MaxRecords)
	ProfileStop                    // end Session.Name now
	ProfileRemove                  // delete Session.Name and its records
)

// ProfileSetReq starts, stops or removes a recording.
type ProfileSetReq struct {
	Kind    uint8
	Session ProfileSession
}

func (m *ProfileSetReq) Encode(e *Encoder) { e.U8(m.Kind); m.Session.Encode(e) }
func (m *ProfileSetReq) Decode(d *Decoder) { m.Kind = d.U8(); m.Session.Decode(d) }

// ProfileListResp lists the recordings, by name.
type ProfileListResp struct{ Sessions []ProfileSession }

func (m *ProfileListResp) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Sessions)))
	for i := range m.Sessions {
		m.Sessions[i].Encode(e)
	}
}

func (m *ProfileListResp) Decode(d *Decoder) {
	m.Sessions = nil
	if n := d.Count(55); n > 0 {
		m.Sessions = make([]ProfileSession, n)
		for i := range m.Sessions {
			m.Sessions[i].Decode(d)
		}
	}
}

// ProfileCheckReq asks for Job's running recording. First is true on a
// client's first check of a recording (it is counted as a client).
type ProfileCheckReq struct {
	Job   string
	Name  string // the recording the client records for already, if any
	First bool
}

func (m *ProfileCheckReq) Encode(e *Encoder) { e.String(m.Job); e.String(m.Name); e.Bool(m.First) }
func (m *ProfileCheckReq) Decode(d *Decoder) {
	m.Job = d.String()
	m.Name = d.String()
	m.First = d.Bool()
}

// ProfileAppendReq adds a batch of Records access records (profile.Batch
// encoded) to recording Name; Dropped counts records the client could
// not keep since its last batch.
type ProfileAppendReq struct {
	Name    string
	Records uint32
	Dropped uint64
	Batch   []byte
}

func (m *ProfileAppendReq) Encode(e *Encoder) {
	e.String(m.Name)
	e.U32(m.Records)
	e.U64(m.Dropped)
	e.Bytes(m.Batch)
}

func (m *ProfileAppendReq) Decode(d *Decoder) {
	m.Name = d.String()
	m.Records = d.U32()
	m.Dropped = d.U64()
	m.Batch = d.Bytes()
}

// ProfileReadReq reads recording Name's batches after batch number After
// (0: from the first), up to about MaxBytes.
type ProfileReadReq struct {
	Name     string
	After    uint64
	MaxBytes uint32
}

func (m *ProfileReadReq) Encode(e *Encoder) { e.String(m.Name); e.U64(m.After); e.U32(m.MaxBytes) }
func (m *ProfileReadReq) Decode(d *Decoder) {
	m.Name = d.String()
	m.After = d.U64()
	m.MaxBytes = d.U32()
}

// ProfileReadResp carries batches and the number of the last (Next, for
// the following read); More is false once the last batch was sent.
type ProfileReadResp struct {
	Batches [][]byte
	Next    uint64
	More    bool
}

func (m *ProfileReadResp) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Batches)))
	for _, b := range m.Batches {
		e.Bytes(b)
	}
	e.U64(m.Next)
	e.Bool(m.More)
}

func (m *ProfileReadResp) Decode(d *Decoder) {
	m.Batches = nil
	if n := d.Count(1); n > 0 {
		m.Batches = make([][]byte, n)
		for i := range m.Batches {
			m.Batches[i] = d.Bytes()
		}
	}
	m.Next = d.U64()
	m.More = d.Bool()
}
