package kvcache

import (
	"reflect"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	for _, h := range []header{
		{Key: "k", Len: 0, Created: 1, Sums: []uint32{}},
		{Key: "prefix/0001", Len: blockSize + 1, Created: 5, Expires: 9, Sums: []uint32{7, 8}},
	} {
		b := h.encode()
		got, n, err := decodeHeader(append(b, 1, 2, 3))
		if err != nil || n != int64(len(b)) || !reflect.DeepEqual(got, h) {
			t.Fatalf("round trip of %+v: %+v, %d, %v", h, got, n, err)
		}
		b[len(b)-5] ^= 1
		if _, _, err := decodeHeader(b); err == nil {
			t.Fatalf("a flipped bit decoded")
		}
	}
}

// FuzzHeader: the decoder never panics, and what it accepts encodes to a
// header that decodes the same.
func FuzzHeader(f *testing.F) {
	f.Add((&header{Key: "a", Len: 3, Sums: []uint32{1}}).encode())
	f.Add([]byte("SLKV"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, _, err := decodeHeader(b)
		if err != nil {
			return
		}
		again, _, err := decodeHeader(h.encode())
		if err != nil || !reflect.DeepEqual(again, h) {
			t.Fatalf("decoded %+v, after a round trip %+v, %v", h, again, err)
		}
	})
}
