package kvcache

import (
	"encoding/binary"
	"hash/crc32"
	"reflect"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	for _, h := range []header{
		{Key: "k", Len: 0, Created: 1, Sums: []uint32{}},
		{Key: "prefix/0001", Len: blockSize + 1, Created: 5, Expires: 9, Sums: []uint32{7, 8}},
		{Key: "u", Len: 2, Created: 5, Upload: 1<<63 | 5, Sums: []uint32{3}},
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

// TestHeaderVersion1: files written before version 2 (no upload number)
// still decode, with upload 0.
func TestHeaderVersion1(t *testing.T) {
	t.Parallel()
	h := header{Key: "old", Len: blockSize + 7, Created: 11, Expires: 12, Sums: []uint32{1, 2}}
	b := []byte("SLKV\x01\x00")
	b = binary.LittleEndian.AppendUint16(b, 3)
	b = binary.LittleEndian.AppendUint64(b, h.Len)
	b = binary.LittleEndian.AppendUint64(b, uint64(h.Created))
	b = binary.LittleEndian.AppendUint64(b, uint64(h.Expires))
	b = append(b, h.Key...)
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint32(b, 2)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	got, n, err := decodeHeader(b)
	if err != nil || n != int64(len(b)) || !reflect.DeepEqual(got, h) {
		t.Fatalf("version 1 header: %+v, %d, %v; want %+v, %d", got, n, err, h, len(b))
	}
	if len(h.encode()) != len(b)+8 {
		t.Fatalf("version 2 header of %d bytes, want version 1's %d + 8", len(h.encode()), len(b))
	}
}
