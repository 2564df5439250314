package s3

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestPartSizes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	worst := make([]int64, maxParts)
	for i := range worst {
		worst[i] = 5<<30 - int64(i) // 10,000 different sizes of about 5 GiB
	}
	cases := [][]int64{
		{5 << 20},
		{5 << 20, 5 << 20, 5 << 20, 1},
		{0},
		{7, 5 << 20, 5 << 20, 9, 9},
		worst,
	}
	for range 20 {
		s := make([]int64, 1+rng.IntN(50))
		for i := range s {
			s[i] = int64(rng.IntN(3)) << 20
		}
		cases = append(cases, s)
	}
	for _, sizes := range cases {
		b := encodePartSizes(sizes)
		got, err := decodePartSizes(b)
		if err != nil || !slices.Equal(got, sizes) {
			t.Fatalf("round trip of %d sizes: %v, %d sizes back", len(sizes), err, len(got))
		}
	}
	if n := len(encodePartSizes(worst)); n > 64<<10-4<<10 {
		t.Errorf("10,000 different part sizes take %d bytes: too close to the 64 KiB xattr limit", n)
	}
	if n := len(encodePartSizes(slices.Repeat([]int64{8 << 20}, maxParts))); n > 8 {
		t.Errorf("10,000 equal parts take %d bytes", n)
	}
	bad := [][]byte{nil, {}, {2, 1, 1}, {1, 5}, {1, 5, 0}, {1, 0x80}, append(encodePartSizes([]int64{1}), 1),
		{1, 1, 0x90, 0x4e, 1, 1}} // 10,000 + 1 parts
	for _, b := range bad {
		if got, err := decodePartSizes(b); err == nil {
			t.Errorf("decodePartSizes(%x) = %v, want an error", b, got)
		}
	}
}

func TestPartRange(t *testing.T) {
	t.Parallel()
	sizes := []int64{5, 5, 3}
	tests := []struct {
		sizes         []int64
		size          int64
		n             int
		start, length int64
		count         int
		invalid       bool
	}{
		{sizes, 13, 1, 0, 5, 3, false},
		{sizes, 13, 2, 5, 5, 3, false},
		{sizes, 13, 3, 10, 3, 3, false},
		{sizes, 13, 4, 0, 0, 3, true},
		{sizes, 13, 0, 0, 0, 3, true},
		{nil, 13, 1, 0, 13, 1, false}, // not multipart: one part
		{nil, 13, 2, 0, 0, 1, true},
		{nil, 0, 1, 0, 0, 1, false},
		{sizes, 14, 1, 0, 14, 1, false}, // sizes do not add up: one part
		{sizes, 14, 2, 0, 0, 1, true},
	}
	for _, tc := range tests {
		r, count, err := partRange(tc.sizes, tc.size, tc.n)
		if tc.invalid {
			if !isCode(err, "InvalidPartNumber") || count != tc.count {
				t.Errorf("partRange(%v, %d, %d): %v (count %d), want InvalidPartNumber", tc.sizes, tc.size, tc.n, err, count)
			}
			continue
		}
		if err != nil || r.Start != tc.start || r.Length != tc.length || count != tc.count {
			t.Errorf("partRange(%v, %d, %d) = %+v %d %v, want %d+%d of %d", tc.sizes, tc.size, tc.n, r, count, err, tc.start, tc.length, tc.count)
		}
	}
}

func FuzzPartSizes(f *testing.F) {
	f.Add(encodePartSizes([]int64{5 << 20, 5 << 20, 1}))
	f.Add([]byte{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		sizes, err := decodePartSizes(b)
		if err != nil {
			return
		}
		if len(sizes) > maxParts {
			t.Fatalf("%d parts decoded", len(sizes))
		}
		back, err := decodePartSizes(encodePartSizes(sizes))
		if err != nil || !slices.Equal(back, sizes) {
			t.Fatalf("re-encoding %v: %v %v", sizes, back, err)
		}
	})
}
