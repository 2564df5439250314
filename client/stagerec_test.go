package client

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/wire"
)

func TestAddExtent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   [][2]int64
		want []stageExtent
	}{
		{[][2]int64{{0, 10}}, []stageExtent{{0, 10}}},
		{[][2]int64{{0, 10}, {10, 5}}, []stageExtent{{0, 15}}},
		{[][2]int64{{20, 5}, {0, 10}}, []stageExtent{{0, 10}, {20, 5}}},
		{[][2]int64{{0, 10}, {20, 5}, {5, 16}}, []stageExtent{{0, 25}}},
		{[][2]int64{{0, 10}, {2, 3}}, []stageExtent{{0, 10}}},
		{[][2]int64{{30, 5}, {0, 1}, {10, 1}, {12, 0}}, []stageExtent{{0, 1}, {10, 1}, {30, 5}}},
	}
	for _, tc := range tests {
		var xs []stageExtent
		var grew int64
		for _, x := range tc.in {
			var n int64
			xs, n = addExtent(xs, x[0], x[1])
			grew += n
		}
		if !reflect.DeepEqual(xs, tc.want) {
			t.Errorf("addExtent(%v) = %v, want %v", tc.in, xs, tc.want)
		}
		if want := extentBytes(tc.want); grew != want {
			t.Errorf("addExtent(%v) grew by %d in all, want %d", tc.in, grew, want)
		}
	}
}

// TestAddExtentRandom checks addExtent against a bitmap of the bytes
// written: the list covers exactly those bytes, stays sorted and disjoint
// (not even touching), and each call's growth is the bytes it added.
func TestAddExtentRandom(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for range 200 {
		var xs []stageExtent
		var bits [512]bool
		for range 1 + rng.IntN(40) {
			off, n := rng.Int64N(480), rng.Int64N(32)
			var grew int64
			xs, grew = addExtent(xs, off, n)
			var want int64
			for i := off; i < off+n; i++ {
				if !bits[i] {
					bits[i], want = true, want+1
				}
			}
			if grew != want {
				t.Fatalf("seed %d: addExtent(%d, %d) grew by %d, want %d", seed, off, n, grew, want)
			}
		}
		var got [512]bool
		for i, x := range xs {
			if x.Len <= 0 || (i > 0 && xs[i-1].Off+xs[i-1].Len >= x.Off) {
				t.Fatalf("seed %d: extents %v not sorted and disjoint", seed, xs)
			}
			for b := x.Off; b < x.Off+x.Len; b++ {
				got[b] = true
			}
		}
		if got != bits {
			t.Fatalf("seed %d: extents %v do not cover the bytes written", seed, xs)
		}
	}
}

func extentBytes(xs []stageExtent) (n int64) {
	for _, x := range xs {
		n += x.Len
	}
	return n
}

func TestStageRecRoundTrip(t *testing.T) {
	t.Parallel()
	recs := []stageRec{
		{Kind: recSegment, Seq: 7, Ino: 42, Size: 100, Extents: []stageExtent{{0, 10}, {20, 80}}},
		{Kind: recSegment, Seq: 1, Ino: 1, Size: 0, Extents: []stageExtent{}},
		{Kind: recRename, Seq: 9, Rename: wire.RenameReq{OldParent: 1, OldName: ".metadata.tmp", NewParent: 1, NewName: ".metadata"}},
	}
	for _, r := range recs {
		b := r.encode()
		got, err := decodeStageRec(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", r, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("round trip: got %+v, want %+v", got, r)
		}
		b[len(b)/2] ^= 1
		if _, err := decodeStageRec(b); err == nil {
			t.Errorf("a flipped bit in %+v decoded without error", r)
		}
	}
}

// FuzzStageRec checks that the decoder never panics and that whatever it
// accepts encodes to bytes that decode to the same record.
func FuzzStageRec(f *testing.F) {
	f.Add((&stageRec{Kind: recSegment, Seq: 3, Ino: 5, Size: 9, Extents: []stageExtent{{1, 8}}}).encode())
	f.Add((&stageRec{Kind: recRename, Seq: 4, Rename: wire.RenameReq{OldParent: 2, OldName: "a", NewParent: 3, NewName: "b", Flags: 1}}).encode())
	f.Add([]byte("SLSR"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeStageRec(b)
		if err != nil {
			return
		}
		again, err := decodeStageRec(r.encode())
		if err != nil {
			t.Fatalf("re-encoded %+v does not decode: %v", r, err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("decoded %+v, after a round trip %+v", r, again)
		}
	})
}
