package wire

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/sluice-fs/sluice/internal/placement"
)

func TestChunkFenceReqRoundTrip(t *testing.T) {
	m := &ChunkFenceReq{
		ChunkSetReq: ChunkSetReq{Target: 3, ChainRef: ChainRef{Chain: placement.FirstReplicatedChain, ChainVer: 9, Flags: FlagForwarded}, Ino: 1 << 40, Slots: []uint32{0, 7}},
		Mode:        FenceThaw,
	}
	if err := roundTrip(m); err != nil {
		t.Fatal(err)
	}
	// The set request's fields come first, unchanged: Mode is appended.
	b, set := Marshal(m), Marshal(&m.ChunkSetReq)
	if string(b[:len(set)]) != string(set) || len(b) != len(set)+1 || b[len(set)] != FenceThaw {
		t.Fatalf("encoding %x, set request %x", b, set)
	}
	// Every strict prefix fails to decode.
	for i := range len(b) {
		if err := Unmarshal(b[:i], &ChunkFenceReq{}); err == nil {
			t.Fatalf("prefix of %d bytes of %d decodes", i, len(b))
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		buf := make([]byte, 64)
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
		m := &ChunkFenceReq{}
		(&filler{b: buf}).fill(reflect.ValueOf(m).Elem())
		if err := roundTrip(m); err != nil {
			t.Fatal(err)
		}
	}
}

func FuzzChunkFenceReqDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add(Marshal(&ChunkFenceReq{ChunkSetReq: ChunkSetReq{Target: 1, Ino: 2, Slots: []uint32{3}}, Mode: FenceFreeze}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m ChunkFenceReq
		if Unmarshal(b, &m) != nil {
			return
		}
		normalize(reflect.ValueOf(&m))
		var again ChunkFenceReq
		if err := Unmarshal(Marshal(&m), &again); err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		normalize(reflect.ValueOf(&again))
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("decoded %#v, re-encoded and decoded %#v", m, again)
		}
	})
}
