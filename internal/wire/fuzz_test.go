package wire

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/sluice-fs/sluice/internal/placement"
)

// messages returns one zero value of every message type.
func messages() []Message {
	return []Message{
		&Empty{}, &Cred{}, &LayoutMsg{}, &Attr{}, &ClusterInfo{}, &StatfsResp{}, &ResolveReq{},
		&NameReq{}, &InoReq{}, &SetAttrReq{}, &CreateReq{}, &SymlinkReq{}, &StringResp{},
		&BytesResp{}, &NamesResp{}, &RenameReq{}, &LinkReq{}, &ReadDirReq{}, &ReadDirResp{},
		&XattrReq{}, &SetLayoutReq{}, &CommitWriteReq{}, &RegisterReq{}, &RegisterResp{}, &HeartbeatReq{}, &HeartbeatResp{}, &SyncDoneReq{}, &ChainMsg{}, &ChunkListReq{}, &ChunkListResp{}, &ChunkRef{},
		&ChainRef{}, &ChunkWriteReq{}, &ChunkReadReq{}, &ChunkReadResp{}, &ChunkSyncReq{}, &ChunkTruncateReq{},
		&ChunkRemoveReq{}, &TargetReq{}, &TargetStat{}, &WriteInlineReq{}, &WriteInlineAttrReq{}, &CommitWriteAttrReq{}, &WriteInlineResp{}, &ReadInlineReq{}, &ReadInlineResp{}, &ResolveReadResp{},
		&EntryResp{}, &DirsResp{},
		&AbsorbSetReq{}, &AbsorbPolicy{}, &StagedReq{}, &StagedListResp{},
		&KVConfig{}, &KVReq{}, &KVCreateReq{}, &KVStatResp{}, &KVPutReq{}, &KVPutResp{}, &KVGetReq{}, &KVGetResp{},
		&KVKeysReq{}, &KVExistsResp{}, &KVDeleteResp{}, &KVListReq{}, &KVListResp{},
		&AuditListReq{}, &AuditRecord{}, &AuditListResp{}, &AuditVerifyResp{},
		&TierBackend{}, &TierSetReq{}, &TierListResp{}, &HsmRecord{}, &HsmUpdateReq{}, &HsmClaimReq{}, &HsmClaim{}, &HsmStats{}, &InosReq{}, &HsmStatesResp{}, &TierQueueReq{}, &TierQueueResp{}, &TierImportReq{}, &TierImportResp{}, &TierForgetReq{}, &TierForgetResp{}, &DirectOpenReq{}, &DirectOpenResp{},
		&PoolChangeReq{}, &PoolListResp{}, &SetPoolReq{},
		&XattrPair{}, &PutFileReq{},
		&QosTag{}, &QosJob{}, &QosConfig{}, &QosSetReq{}, &SessionReq{},
		&MigrateReq{}, &MigrateResp{}, &TargetDrainReq{},
		&ProfileSession{}, &ProfileSetReq{}, &ProfileListResp{}, &ProfileCheckReq{}, &ProfileAppendReq{}, &ProfileReadReq{}, &ProfileReadResp{},
		&StageCounts{}, &StageReportReq{},
		&Change{}, &WatchReq{}, &WatchResp{},
		&CutResp{}, &CutEndReq{}, &CommitResp{}, &ChunkPunchReq{}, &ChunkMapReq{}, &ChunkMapResp{}, &ClockResp{},
	}
}

// filler fills values from a byte string, reading zeros once it runs out,
// so that the fuzzer steers every field of a message.
type filler struct{ b []byte }

func (f *filler) bytes(n int) []byte {
	out := make([]byte, n)
	k := copy(out, f.b)
	f.b = f.b[k:]
	return out
}

func (f *filler) u64(size int) uint64 {
	var b [8]byte
	copy(b[:], f.bytes(size))
	return binary.LittleEndian.Uint64(b[:])
}

// length returns a length below max.
func (f *filler) length(max int) int { return int(f.u64(1)) % max }

// fill sets v, and everything it points to, from the bytes: every number
// and bool, strings and byte slices of 0-31 bytes, lists of 0-3 elements,
// and pointers nil or not. Empty slices are nil, as decoders may return.
func (f *filler) fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(f.u64(1)&1 != 0)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		v.SetUint(f.u64(int(v.Type().Size())))
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		v.SetInt(int64(f.u64(int(v.Type().Size()))))
	case reflect.String:
		v.SetString(string(f.bytes(f.length(32))))
	case reflect.Slice:
		n := f.length(4)
		if v.Type().Elem().Kind() == reflect.Uint8 {
			n = f.length(32)
		}
		if n == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			f.fill(v.Index(i))
		}
	case reflect.Pointer:
		if f.u64(1)&1 == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
		if l, ok := v.Addr().Interface().(*placement.Layout); ok {
			l.Replicas &= 0x3f // the top bits say a data ID and components follow (EncodeLayout)
		}
	case reflect.Array:
		for i := range v.Len() {
			f.fill(v.Index(i))
		}
	default:
		panic(fmt.Sprintf("filler: cannot fill a %v; teach it", v.Type()))
	}
}

// normalize replaces empty slices with nil in v and what it points to, so
// that DeepEqual does not tell a decoder's make(T, 0) from nil.
func normalize(v reflect.Value) {
	switch v.Kind() {
	case reflect.Slice:
		if v.Len() == 0 {
			if v.CanSet() {
				v.SetZero()
			}
			return
		}
		for i := range v.Len() {
			normalize(v.Index(i))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			normalize(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				normalize(v.Field(i))
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			normalize(v.Index(i))
		}
	}
}

// newLike returns a new zero message of m's type.
func newLike(m Message) Message {
	return reflect.New(reflect.TypeOf(m).Elem()).Interface().(Message)
}

// roundTrip encodes m, decodes it into a new message of its type and
// reports any difference: a decode error, a changed value, bytes left over,
// or an encoding that is not the same when encoded again.
func roundTrip(m Message) error {
	b := Marshal(m)
	got := newLike(m)
	d := Decoder{B: b}
	got.Decode(&d)
	if err := d.Err(); err != nil {
		return fmt.Errorf("%T: %#v does not decode: %v", m, m, err)
	}
	if len(d.B) != 0 {
		return fmt.Errorf("%T: %d of %d bytes left after decoding %#v", m, len(d.B), len(b), m)
	}
	normalize(reflect.ValueOf(got))
	if !reflect.DeepEqual(got, m) {
		return fmt.Errorf("%T: encoded %#v, decoded %#v", m, m, got)
	}
	if again := Marshal(got); string(again) != string(b) {
		return fmt.Errorf("%T: %#v encodes as %x, then as %x", m, m, b, again)
	}
	return nil
}

// FuzzRoundTrip builds a random message of every type from the fuzz input,
// encodes it, decodes it and compares: a codec that swaps, drops or
// truncates a field fails.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 256))
	ff := make([]byte, 512)
	for i := range ff {
		ff[i] = 0xff
	}
	f.Add(ff)
	r := rand.New(rand.NewPCG(1, 2))
	for range 16 {
		b := make([]byte, r.IntN(2048))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fl := filler{b: b}
		for _, m := range messages() {
			fl.fill(reflect.ValueOf(m).Elem())
			canonicalize(m)
			if err := roundTrip(m); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// canonicalize clears the fields that an encoding leaves out while their
// presence flag is off (version 2.7's data checksums), as a decoder does.
func canonicalize(m Message) {
	switch m := m.(type) {
	case *CommitWriteReq:
		canonicalCommit(m)
	case *SetAttrReq:
		canonicalSetAttr(m)
	case *CommitWriteAttrReq:
		canonicalCommit(&m.Commit)
		canonicalSetAttr(&m.Attr)
	case *WriteInlineAttrReq:
		canonicalSetAttr(&m.Attr)
	case *EntryResp:
		if !m.HasCut {
			m.Cut = 0
		}
	case *CommitResp:
		if !m.Known {
			m.Cut, m.Refused = 0, false
		}
	case *ChunkWriteReq:
		if !m.HasDataCRC {
			m.DataCRC, m.ApplyBy = 0, 0
		}
	case *ChunkReadResp:
		if !m.HasDataSums {
			m.DataSums = nil
		}
	case *KVPutReq:
		if !m.HasDataCRC {
			m.DataCRC = 0
		}
	case *KVGetResp:
		if !m.HasDataCRC || m.HasBlockSums {
			m.DataCRC, m.HasDataCRC = 0, false
		}
		if !m.HasBlockSums {
			m.BlockSums = nil
		}
	}
}

func canonicalCommit(m *CommitWriteReq) {
	if !m.CutIf {
		m.Cut = 0
	}
}

func canonicalSetAttr(m *SetAttrReq) {
	if m.Valid&SetIfCut == 0 {
		m.Cut = 0
	}
}

// TestRoundTripCatchesSwappedField checks the checker: a codec that decodes
// two fields in the wrong order must fail roundTrip on random values.
func TestRoundTripCatchesSwappedField(t *testing.T) {
	m := &swappedCred{}
	(&filler{b: []byte{1, 0, 0, 0, 2, 0, 0, 0}}).fill(reflect.ValueOf(m).Elem())
	if err := roundTrip(m); err == nil {
		t.Fatalf("roundTrip accepted a codec that swaps Uid and Gid: %+v", m)
	}
	if err := roundTrip(&Cred{Uid: 1, Gid: 2}); err != nil {
		t.Fatal(err)
	}
}

type swappedCred struct{ Uid, Gid uint32 }

func (c *swappedCred) Encode(e *Encoder) { e.U32(c.Uid); e.U32(c.Gid) }
func (c *swappedCred) Decode(d *Decoder) { c.Gid = d.U32(); c.Uid = d.U32() }

// FuzzDecode feeds arbitrary bytes to every message decoder: no panic, and
// whatever decodes must re-encode to a message that decodes to the same
// value.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add(Marshal(&ReadDirResp{Entries: []DirEntry{{Name: "a", Ino: 2, Attr: &Attr{Ino: 2}}}, Cursor: "a"}))
	f.Add(Marshal(&ReadDirResp{Entries: []DirEntry{{Name: "a", Ino: 2, Attr: &Attr{Ino: 2}}}, Cursor: "a", Xattrs: []DirXattr{{Has: true, Value: []byte("v")}}}))
	f.Add(Marshal(&ClusterInfo{FSID: "x", RootIno: 1, Targets: []TargetAddr{{ID: 1, Addr: "127.0.0.1:1"}}}))
	f.Add(Marshal(&CreateReq{Parent: 1, Name: "n", Mode: 0o644}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range messages() {
			m = newLike(m)
			if err := Unmarshal(b, m); err != nil {
				continue
			}
			normalize(reflect.ValueOf(m))
			again := newLike(m)
			if err := Unmarshal(Marshal(m), again); err != nil {
				t.Fatalf("%T: re-encoded message does not decode: %v", m, err)
			}
			normalize(reflect.ValueOf(again))
			if !reflect.DeepEqual(m, again) {
				t.Fatalf("%T: decoded %#v, re-encoded and decoded %#v", m, m, again)
			}
		}
	})
}

// FuzzHeader checks that ParseHeader never panics and enforces its limits.
func FuzzHeader(f *testing.F) {
	f.Add(frameHeader(10, 20, 0))
	f.Add(frameHeader(MaxBody+1, 0, 0))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			return
		}
		if h.BodyLen > MaxBody || h.DataLen > MaxData || h.Flags&^flagResponse != 0 {
			t.Fatalf("accepted a header over limits: %+v", h)
		}
		var out [HeaderSize]byte
		h.Put(out[:])
		if string(out[:]) != string(b[:HeaderSize]) {
			t.Fatalf("header does not round-trip")
		}
	})
}

func TestRoundTripAllMessages(t *testing.T) {
	for _, m := range messages() {
		b := Marshal(m)
		if err := Unmarshal(b, m); err != nil {
			t.Errorf("%T: %v", m, err)
		}
		// Every strict prefix of a non-empty encoding must fail, not panic.
		for i := 0; i < len(b); i++ {
			_ = Unmarshal(b[:i], m)
		}
	}
}

// TestFSAppended: the targets' file systems (FS) are appended to the
// messages of version 2, so a version-2 encoding is a prefix of the new one
// (older decoders ignore trailing bytes) and decodes with FS 0; a metadata
// DB's node records, which hold HeartbeatReq encodings, read unchanged.
func TestFSAppended(t *testing.T) {
	stats := []TargetStat{{Target: 1, Capacity: 100, Used: 10, Free: 90, FS: 2049}, {Target: 2, Capacity: 100, Free: 90, FS: 2049}}
	for _, tc := range []struct {
		m     Message
		fsLen int // FS values appended
		after int // bytes appended after them (version 2.2 and later)
	}{
		{&HeartbeatReq{Node: "n1", Addr: "a:1", Incarnation: 5, Targets: stats, Resyncs: []ResyncStat{{Chain: 3}}}, 2, 1},                                             // then QosUse (none)
		{&ClusterInfo{FSID: "x", RootIno: 1, Targets: []TargetAddr{{ID: 1, Node: "n1", Capacity: 100, FS: 2049}, {ID: 2, Node: "n1", FS: 7}, {ID: 3}}}, 3, 4 + 1 + 3}, // then InlineMax, the draining flags
		{&TargetStat{Target: 4, Capacity: 100, Free: 3, FS: 2049}, -1, 0},
	} {
		b := Marshal(tc.m)
		cut := 8 // TargetStat: one u64
		if tc.fsLen >= 0 {
			cut = 1 + 8*tc.fsLen + tc.after
		}
		old := b[:len(b)-cut]
		got := newLike(tc.m)
		if err := Unmarshal(old, got); err != nil {
			t.Fatalf("%T: the version-2 encoding does not decode: %v", tc.m, err)
		}
		// The same message with FS 0 is what the old encoding says.
		want := newLike(tc.m)
		if err := Unmarshal(b, want); err != nil {
			t.Fatal(err)
		}
		zeroFS(want)
		normalize(reflect.ValueOf(got))
		normalize(reflect.ValueOf(want))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%T: version 2 decodes as %#v, want %#v", tc.m, got, want)
		}
		// A list of FS of the wrong length is malformed.
		if tc.fsLen > 0 {
			bad := append(append([]byte(nil), old...), byte(tc.fsLen-1))
			for range tc.fsLen - 1 {
				bad = append(bad, make([]byte, 8)...)
			}
			if err := Unmarshal(bad, newLike(tc.m)); err == nil {
				t.Errorf("%T: %d FS for %d targets decoded", tc.m, tc.fsLen-1, tc.fsLen)
			}
		}
	}
}

func zeroFS(m Message) {
	switch m := m.(type) {
	case *HeartbeatReq:
		for i := range m.Targets {
			m.Targets[i].FS = 0
		}
	case *ClusterInfo:
		for i := range m.Targets {
			m.Targets[i].FS = 0
		}
		m.InlineMax = 0
	case *TargetStat:
		m.FS = 0
	}
}

// TestQosAppended: the QoS fields appended in version 2.4 are absent from
// an older peer's encoding, which must decode with them zero (a chunk
// request with no identity, a heartbeat reply with no settings), and an
// older decoder reading the new encoding finds its own fields first.
func TestQosAppended(t *testing.T) {
	ref := ChunkRef{Target: 3, ChainRef: ChainRef{Chain: 2, ChainVer: 9}, Ino: 77, Slot: 4}
	for _, tc := range []struct {
		m, old Message // the new message and its old fields, as an old peer encodes them
		want   Message // how the old encoding decodes
	}{
		{&ChunkWriteReq{ChunkRef: ref, Off: 5, Sync: true, Qos: QosTag{Job: "ckpt", Class: 3}},
			oldWrite{ChunkRef: ref, Off: 5, Sync: true}, &ChunkWriteReq{ChunkRef: ref, Off: 5, Sync: true}},
		{&ChunkReadReq{ChunkRef: ref, Off: 5, Len: 4096, Qos: QosTag{Job: "infer", Class: 1}},
			oldRead{ChunkRef: ref, Off: 5, Len: 4096}, &ChunkReadReq{ChunkRef: ref, Off: 5, Len: 4096}},
		{&HeartbeatResp{ChainsVersion: 8, Qos: &QosConfig{Weights: []uint32{8, 4}, Jobs: []QosJob{{Job: "a", Rate: 1, Burst: 2}}}},
			oldHeartbeat{8}, &HeartbeatResp{ChainsVersion: 8}},
		{&QosConfig{Weights: []uint32{8}, Jobs: []QosJob{{Job: "a", Rate: 1, Burst: 2}}, MetaJobs: []QosJob{{Job: "m", Rate: 3, Burst: 4}}},
			oldQosConfig{Weights: []uint32{8}, Jobs: []QosJob{{Job: "a", Rate: 1, Burst: 2}}},
			&QosConfig{Weights: []uint32{8}, Jobs: []QosJob{{Job: "a", Rate: 1, Burst: 2}}}},
		// Version 2.5: ClusterJobs after MetaJobs.
		{&QosConfig{Weights: []uint32{8}, Jobs: []QosJob{{Job: "a", Rate: 1, Burst: 2}}, MetaJobs: []QosJob{{Job: "m", Rate: 3, Burst: 4}}, ClusterJobs: []QosJob{{Job: "c", Rate: 5, Burst: 6}}},
			oldQosConfig{Weights: []uint32{8}, Jobs: []QosJob{{Job: "a", Rate: 1, Burst: 2}}, MetaJobs: []QosJob{{Job: "m", Rate: 3, Burst: 4}}},
			&QosConfig{Weights: []uint32{8}, Jobs: []QosJob{{Job: "a", Rate: 1, Burst: 2}}, MetaJobs: []QosJob{{Job: "m", Rate: 3, Burst: 4}}}},
		// Version 2.5: a heartbeat's QosUse after the targets' FS.
		{&HeartbeatReq{Node: "n", Addr: "a:1", Incarnation: 2, Targets: []TargetStat{{Target: 1}}, QosUse: []QosUse{{Job: "j", Demand: 7}}},
			oldHeartbeatReq{HeartbeatReq{Node: "n", Addr: "a:1", Incarnation: 2, Targets: []TargetStat{{Target: 1}}}},
			&HeartbeatReq{Node: "n", Addr: "a:1", Incarnation: 2, Targets: []TargetStat{{Target: 1}}, Resyncs: []ResyncStat{}}},
	} {
		oldB := Marshal(tc.old)
		got := newLike(tc.m)
		if err := Unmarshal(oldB, got); err != nil {
			t.Fatalf("%T: the old encoding does not decode: %v", tc.m, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%T: old encoding decodes as %#v, want %#v", tc.m, got, tc.want)
		}
		newB := Marshal(tc.m)
		if len(newB) <= len(oldB) || string(newB[:len(oldB)]) != string(oldB) {
			t.Errorf("%T: the old encoding is not a prefix of the new one", tc.m)
		}
	}
}

// The messages as version 2.3 encoded them.
type oldWrite struct {
	ChunkRef
	Off  uint64
	Sync bool
}

func (m oldWrite) Encode(e *Encoder) { m.ChunkRef.Encode(e); e.U64(m.Off); e.Bool(m.Sync) }
func (m oldWrite) Decode(*Decoder)   {}

type oldRead struct {
	ChunkRef
	Off uint64
	Len uint32
}

func (m oldRead) Encode(e *Encoder) { m.ChunkRef.Encode(e); e.U64(m.Off); e.U32(m.Len) }
func (m oldRead) Decode(*Decoder)   {}

type oldHeartbeat struct{ ChainsVersion uint64 }

// oldQosConfig is QosConfig before MetaJobs (MetaJobs nil) or before
// ClusterJobs.
type oldQosConfig struct {
	Weights  []uint32
	Jobs     []QosJob
	MetaJobs []QosJob
}

func (m oldQosConfig) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Weights)))
	for _, w := range m.Weights {
		e.U32(w)
	}
	encodeJobs(e, m.Jobs)
	if m.MetaJobs != nil {
		encodeJobs(e, m.MetaJobs)
	}
}

// oldHeartbeatReq is HeartbeatReq before QosUse.
type oldHeartbeatReq struct{ HeartbeatReq }

func (m oldHeartbeatReq) Encode(e *Encoder) {
	e.String(m.Node)
	e.String(m.Addr)
	e.U64(m.Incarnation)
	e.Uvarint(uint64(len(m.Targets)))
	for i := range m.Targets {
		m.Targets[i].encodeFields(e)
	}
	encodeResyncs(e, m.Resyncs)
	e.Uvarint(uint64(len(m.Targets)))
	for i := range m.Targets {
		e.U64(m.Targets[i].FS)
	}
}
func (m oldHeartbeatReq) Decode(*Decoder) {}
func (m oldQosConfig) Decode(*Decoder)    {}

func (m oldHeartbeat) Encode(e *Encoder) { e.U64(m.ChainsVersion) }
func (m oldHeartbeat) Decode(*Decoder)   {}

// TestStageTotalsAppended: a stage report from an older client (no
// totals field) decodes as a delta; one from this version keeps it.
func TestStageTotalsAppended(t *testing.T) {
	m := StageReportReq{Job: "train", Stager: "a", Add: StageCounts{Hits: 3}, Depth: 8, Done: true, Totals: true}
	b := Marshal(&m)
	var got StageReportReq
	if err := Unmarshal(b, &got); err != nil || got != m {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, m)
	}
	got = StageReportReq{}
	if err := Unmarshal(b[:len(b)-1], &got); err != nil {
		t.Fatal(err)
	}
	if want := (StageReportReq{Job: "train", Stager: "a", Add: StageCounts{Hits: 3}, Depth: 8, Done: true}); got != want {
		t.Fatalf("older report: %+v, want %+v", got, want)
	}
}

// TestIfFieldsAppended: commits and inline writes from older clients (no
// If fields) decode with no check asked.
func TestIfFieldsAppended(t *testing.T) {
	c := CommitWriteReq{Ino: 7, End: 100, Mtime: 5, IfMtime: 4, IfSize: 3}
	b := Marshal(&c)
	var gc CommitWriteReq
	if err := Unmarshal(b[:len(b)-16], &gc); err != nil || gc != (CommitWriteReq{Ino: 7, End: 100, Mtime: 5}) {
		t.Fatalf("older commit: %+v, %v", gc, err)
	}
	sa := SetAttrReq{Ino: 7, Valid: SetSize, Size: 9, Cred: &Cred{Uid: 1}, IfMtime: 4, IfSize: 3, AtMtime: 2, AtSize: 1}
	b = Marshal(&sa)
	var gs SetAttrReq
	if err := Unmarshal(b[:len(b)-32], &gs); err != nil || gs.IfMtime != 0 || gs.IfSize != 0 || gs.AtMtime != 0 || gs.AtSize != 0 || gs.Cred == nil || gs.Cred.Uid != 1 || gs.Size != 9 {
		t.Fatalf("older setattr: %+v, %v", gs, err)
	}
	// One from before the At fields (late 2026-12-04) has the If fields only.
	gs = SetAttrReq{}
	if err := Unmarshal(b[:len(b)-16], &gs); err != nil || gs.IfMtime != 4 || gs.IfSize != 3 || gs.AtMtime != 0 || gs.AtSize != 0 || gs.Size != 9 {
		t.Fatalf("setattr without At fields: %+v, %v", gs, err)
	}
	w := WriteInlineReq{Ino: 7, Off: 1, Mtime: 5, Data: []byte("xy"), IfMtime: 4, IfSize: 3}
	b = Marshal(&w)
	var gw WriteInlineReq
	if err := Unmarshal(b[:len(b)-16], &gw); err != nil || gw.IfMtime != 0 || gw.IfSize != 0 || string(gw.Data) != "xy" {
		t.Fatalf("older inline write: %+v, %v", gw, err)
	}
}

// TestResolveReadHsmAppended: a ResolveReadResp from an older service (no
// HSM record after the xattr, or no feed position after it) decodes with
// no record and a zero position; one with them keeps them.
func TestResolveReadHsmAppended(t *testing.T) {
	r := ResolveReadResp{Attr: Attr{Ino: 7, Size: 3}, Data: []byte("abc"), HasXattr: true, Xattr: []byte("x")}
	b := Marshal(&r)
	// The zero record flag and the two zero varints of the position.
	var old ResolveReadResp
	if err := Unmarshal(b[:len(b)-3], &old); err != nil || old.Hsm != nil || string(old.Data) != "abc" || string(old.Xattr) != "x" {
		t.Fatalf("older reply: %+v, %v", old, err)
	}
	r.Hsm = &HsmRecord{State: HsmReleased, Backend: "cold", Key: "k", Size: 3, Gen: 9}
	r.FeedEpoch, r.FeedCursor = 1<<40+1, 300
	b = Marshal(&r)
	var got ResolveReadResp
	if err := Unmarshal(b, &got); err != nil || got.Hsm == nil || got.Hsm.Backend != "cold" || got.Hsm.Gen != 9 || got.FeedEpoch != r.FeedEpoch || got.FeedCursor != 300 {
		t.Fatalf("reply with a record and a position: %+v, %v", got, err)
	}
	var noPos ResolveReadResp
	if err := Unmarshal(b[:len(b)-len(binary.AppendUvarint(binary.AppendUvarint(nil, r.FeedEpoch), r.FeedCursor))], &noPos); err != nil || noPos.Hsm == nil || noPos.FeedEpoch != 0 || noPos.FeedCursor != 0 {
		t.Fatalf("reply with a record, without a position: %+v, %v", noPos, err)
	}
}

// TestDataCRCAppended: the data CRC32Cs appended in version 2.7 (one for a
// chunk write's data, one per piece of a read reply's) are absent from an
// older peer's chunk write and read reply, which decode with none (not
// checked), and an older decoder reads its own fields from the new
// encodings.
func TestDataCRCAppended(t *testing.T) {
	ref := ChunkRef{Target: 3, ChainRef: ChainRef{Chain: 2, ChainVer: 9}, Ino: 77, Slot: 4}
	w := &ChunkWriteReq{ChunkRef: ref, Off: 5, Sync: true, Qos: QosTag{Job: "j", Class: 2}, DataCRC: 0xdeadbeef, HasDataCRC: true}
	var back ChunkWriteReq
	if err := Unmarshal(Marshal(w), &back); err != nil || !reflect.DeepEqual(&back, w) {
		t.Fatalf("write request round trip: %#v, %v", back, err)
	}
	old := &ChunkWriteReq{ChunkRef: ref, Off: 5, Qos: QosTag{Job: "j", Class: 2}} // 2.4-2.6: ends with the tag
	if err := Unmarshal(Marshal(old), &back); err != nil || back.HasDataCRC || !reflect.DeepEqual(&back, old) {
		t.Fatalf("a write request without a CRC decodes as %#v, %v", back, err)
	}
	for _, r := range []*ChunkReadResp{{ChunkLen: 1 << 20, DataSums: []uint32{7, 8, 9}, HasDataSums: true}, {ChunkLen: 3, DataSums: []uint32{}, HasDataSums: true}} {
		var rb ChunkReadResp
		if err := Unmarshal(Marshal(r), &rb); err != nil || !reflect.DeepEqual(&rb, r) {
			t.Fatalf("read reply round trip: %#v, %v", rb, err)
		}
		var o oldReadResp
		d := Decoder{B: Marshal(r)}
		o.decode(&d)
		if d.Err() != nil || o.ChunkLen != r.ChunkLen {
			t.Fatalf("an older decoder reads %#v, %v from the new reply", o, d.Err())
		}
	}
	var rb ChunkReadResp
	if err := Unmarshal(Marshal(oldReadResp{1 << 20}), &rb); err != nil || !reflect.DeepEqual(rb, ChunkReadResp{ChunkLen: 1 << 20}) {
		t.Fatalf("an older read reply decodes as %#v, %v", rb, err)
	}
}

// oldReadResp is ChunkReadResp before version 2.7.
type oldReadResp struct{ ChunkLen uint64 }

func (m oldReadResp) Encode(e *Encoder)  { e.U64(m.ChunkLen) }
func (m oldReadResp) Decode(*Decoder)    {}
func (m *oldReadResp) decode(d *Decoder) { m.ChunkLen = d.U64() }

// TestReadFlagsAppended: version 2.8 appends flags to a chunk read
// request. A request without them (an older client's, or flags 0) decodes
// with none; with them, the older encoding is a prefix, which an older
// target decodes as before and ignores the rest of.
func TestReadFlagsAppended(t *testing.T) {
	ref := ChunkRef{Target: 3, ChainRef: ChainRef{Chain: 2, ChainVer: 9}, Ino: 77, Slot: 4}
	old := &ChunkReadReq{ChunkRef: ref, Off: 1 << 16, Len: 4096, Qos: QosTag{Job: "j", Class: 1}}
	flagged := *old
	flagged.Flags = ReadFlagUnverified
	var back ChunkReadReq
	if err := Unmarshal(Marshal(&flagged), &back); err != nil || !reflect.DeepEqual(back, flagged) {
		t.Fatalf("read request round trip: %#v, %v", back, err)
	}
	oldB, newB := Marshal(old), Marshal(&flagged)
	if len(newB) != len(oldB)+4 || string(newB[:len(oldB)]) != string(oldB) {
		t.Fatalf("the request without flags (%d bytes) is not the flagged one's prefix (%d bytes)", len(oldB), len(newB))
	}
	if err := Unmarshal(oldB, &back); err != nil || back.Flags != 0 || !reflect.DeepEqual(&back, old) {
		t.Fatalf("a request without flags decodes as %#v, %v", back, err)
	}
}
