package wire

// The namespace change feed (docs/adr/0022-namespace-feed.md): a mount
// long-polls the metadata service for the names and inodes other clients
// changed, and drops what the kernel cached of them, so that the kernel
// may cache names and attributes far longer than a bare timeout allows.
const OpWatch Op = 61 // WatchReq -> WatchResp

// Kinds of a Change.
const (
	ChangeEntry uint8 = 1 // the entry Name in directory Ino was added, removed or replaced
	ChangeInode uint8 = 2 // inode Ino's attributes changed
)

// Change is one changed name or inode.
type Change struct {
	Kind uint8
	Ino  uint64
	Name string // ChangeEntry only
}

func (m *Change) Encode(e *Encoder) {
	e.U8(m.Kind)
	e.U64(m.Ino)
	e.String(m.Name)
}

func (m *Change) Decode(d *Decoder) {
	m.Kind = d.U8()
	m.Ino = d.U64()
	m.Name = d.String()
}

// WatchReq asks for the changes after Cursor of the feed Epoch, made
// through connections other than the caller's, waiting up to WaitMs for
// the first one. Epoch 0 (a new watcher) gets the current epoch and
// cursor and no changes.
type WatchReq struct {
	Epoch  uint64
	Cursor uint64
	WaitMs uint32
	Max    uint32 // most changes to return (0: the service's default)
}

func (m *WatchReq) Encode(e *Encoder) {
	e.U64(m.Epoch)
	e.U64(m.Cursor)
	e.U32(m.WaitMs)
	e.U32(m.Max)
}

func (m *WatchReq) Decode(d *Decoder) {
	m.Epoch = d.U64()
	m.Cursor = d.U64()
	m.WaitMs = d.U32()
	m.Max = d.U32()
}

// WatchResp carries the changes after the request's cursor and the cursor
// to ask from next. Reset says that changes were lost since the request's
// cursor (the service restarted: another epoch; or the watcher fell
// further behind than the service keeps): the watcher cannot know what
// changed in between. Complete says the service sees every change of the
// namespace (its engine is not shared with other metadata services); a
// feed that is not complete must not lengthen the kernel's caching.
type WatchResp struct {
	Epoch    uint64
	Cursor   uint64
	Reset    bool
	Complete bool
	Changes  []Change
}

func (m *WatchResp) Encode(e *Encoder) {
	e.U64(m.Epoch)
	e.U64(m.Cursor)
	e.Bool(m.Reset)
	e.Bool(m.Complete)
	e.Uvarint(uint64(len(m.Changes)))
	for i := range m.Changes {
		m.Changes[i].Encode(e)
	}
}

func (m *WatchResp) Decode(d *Decoder) {
	m.Epoch = d.U64()
	m.Cursor = d.U64()
	m.Reset = d.Bool()
	m.Complete = d.Bool()
	n := d.Count(1 + 8 + 1)
	m.Changes = nil
	if n > 0 {
		m.Changes = make([]Change, n)
		for i := range m.Changes {
			m.Changes[i].Decode(d)
		}
	}
}
