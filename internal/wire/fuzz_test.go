package wire

import (
	"testing"
)

// messages returns one zero value of every message type.
func messages() []Message {
	return []Message{
		&Empty{}, &Cred{}, &LayoutMsg{}, &Attr{}, &ClusterInfo{}, &StatfsResp{}, &ResolveReq{},
		&NameReq{}, &InoReq{}, &SetAttrReq{}, &CreateReq{}, &SymlinkReq{}, &StringResp{},
		&BytesResp{}, &NamesResp{}, &RenameReq{}, &LinkReq{}, &ReadDirReq{}, &ReadDirResp{},
		&XattrReq{}, &SetLayoutReq{}, &CommitWriteReq{}, &RegisterReq{}, &RegisterResp{}, &HeartbeatReq{}, &HeartbeatResp{}, &SyncDoneReq{}, &ChainMsg{}, &ChunkListReq{}, &ChunkListResp{}, &ChunkRef{},
		&ChunkWriteReq{}, &ChunkReadReq{}, &ChunkReadResp{}, &ChunkSyncReq{}, &ChunkTruncateReq{},
		&ChunkRemoveReq{}, &TargetReq{}, &TargetStat{},
	}
}

// FuzzDecode feeds arbitrary bytes to every message decoder: no panic, and
// whatever decodes must re-encode to a message that decodes the same way.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add(Marshal(&ReadDirResp{Entries: []DirEntry{{Name: "a", Ino: 2, Attr: &Attr{Ino: 2}}}, Cursor: "a"}))
	f.Add(Marshal(&ClusterInfo{FSID: "x", RootIno: 1, Targets: []TargetAddr{{ID: 1, Addr: "127.0.0.1:1"}}}))
	f.Add(Marshal(&CreateReq{Parent: 1, Name: "n", Mode: 0o644}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range messages() {
			if err := Unmarshal(b, m); err != nil {
				continue
			}
			again := Marshal(m)
			if err := Unmarshal(again, m); err != nil {
				t.Fatalf("%T: re-encoded message does not decode: %v", m, err)
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
