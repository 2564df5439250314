package wire

import (
	"reflect"
	"testing"

	"github.com/sluice-fs/sluice/internal/placement"
)

// TestChunkRequestsTagAppended: the QoS tag of chunk syncs, removes and
// truncates (version 2.6) is appended, so that a body from an older sender
// decodes with no tag and a tagged one round-trips.
func TestChunkRequestsTagAppended(t *testing.T) {
	set := ChunkSetReq{Target: 4, ChainRef: ChainRef{Chain: placement.FirstReplicatedChain, ChainVer: 2}, Ino: 77, Slots: []uint32{1, 9}}
	tagged := &ChunkSyncReq{ChunkSetReq: set, Qos: QosTag{Job: "ckpt", Class: 3}}
	if err := roundTrip(tagged); err != nil {
		t.Fatal(err)
	}
	var old ChunkRemoveReq
	if err := Unmarshal(Marshal(&set), &old); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(old.ChunkSetReq, set) || old.Qos != (QosTag{}) {
		t.Fatalf("an untagged body decoded as %+v", old)
	}
	// A decoded message is reused: a later untagged body clears the tag.
	if err := Unmarshal(Marshal(&set), tagged); err != nil || tagged.Qos != (QosTag{}) {
		t.Fatalf("reused message kept tag %+v (%v)", tagged.Qos, err)
	}

	tr := &ChunkTruncateReq{ChunkRef: ChunkRef{Target: 1, Ino: 5, Slot: 2}, Size: 1 << 30, Qos: QosTag{Job: "gc", Class: 4}}
	if err := roundTrip(tr); err != nil {
		t.Fatal(err)
	}
	e := &Encoder{}
	tr.ChunkRef.Encode(e)
	e.U64(tr.Size)
	var oldTr ChunkTruncateReq
	if err := Unmarshal(e.B, &oldTr); err != nil {
		t.Fatal(err)
	}
	if oldTr.ChunkRef != tr.ChunkRef || oldTr.Size != tr.Size || oldTr.Qos != (QosTag{}) {
		t.Fatalf("an untagged truncate decoded as %+v", oldTr)
	}
}
