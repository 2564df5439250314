package s3

import (
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

func TestCompleteParts(t *testing.T) {
	t.Parallel()
	parts := func(nums ...int) *completeRequest {
		r := &completeRequest{}
		for i, n := range nums {
			r.Parts = append(r.Parts, completePart{PartNumber: n, ETag: string(rune('a' + i))})
		}
		return r
	}
	tests := []struct {
		req  *completeRequest
		want []int
		etag string // the ETag kept for the last part
		code string
	}{
		{parts(1, 2, 3), []int{1, 2, 3}, "c", ""},
		{parts(1, 3, 7), []int{1, 3, 7}, "c", ""},
		{parts(1, 2, 2), []int{1, 2}, "c", ""}, // listed twice: the last entry counts
		{parts(1, 1, 1, 2), []int{1, 2}, "d", ""},
		{parts(2, 1), nil, "", "InvalidPartOrder"},
		{parts(1, 2, 2, 1), nil, "", "InvalidPartOrder"},
		{parts(0), nil, "", "InvalidPart"},
		{parts(10001), nil, "", "InvalidPart"},
		{parts(), nil, "", "MalformedXML"},
	}
	for _, tc := range tests {
		got, err := completeParts(tc.req)
		if tc.code != "" {
			if !isCode(err, tc.code) {
				t.Errorf("%+v: %v, want %s", tc.req.Parts, err, tc.code)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%+v: %+v %v", tc.req.Parts, got, err)
			continue
		}
		for i, n := range tc.want {
			if got[i].PartNumber != n {
				t.Errorf("%+v: part %d is %d, want %d", tc.req.Parts, i, got[i].PartNumber, n)
			}
		}
		if got[len(got)-1].ETag != tc.etag {
			t.Errorf("%+v: last ETag %q, want %q", tc.req.Parts, got[len(got)-1].ETag, tc.etag)
		}
	}
}

func crc32b64(b []byte) (string, []byte) {
	var d [4]byte
	binary.BigEndian.PutUint32(d[:], crc32.ChecksumIEEE(b))
	return base64.StdEncoding.EncodeToString(d[:]), d[:]
}

func TestMultipartChecksum(t *testing.T) {
	t.Parallel()
	p1, p2 := []byte("first part"), []byte("second")
	m := newMultipartChecksum("crc32")
	m.Write(p1[:3])
	m.Write(p1[3:])
	m.endPart()
	m.Write(p2)
	m.endPart()
	v1, d1 := crc32b64(p1)
	v2, d2 := crc32b64(p2)
	if m.parts[0] != v1 || m.parts[1] != v2 {
		t.Errorf("part checksums %v, want %s %s", m.parts, v1, v2)
	}
	comp, _ := crc32b64(append(d1, d2...))
	full, _ := crc32b64(append(append([]byte(nil), p1...), p2...))
	if m.composite() != comp+"-2" || m.full() != full {
		t.Errorf("composite %s full %s, want %s-2 %s", m.composite(), m.full(), comp, full)
	}
	if checksumType(m.composite()) != checksumComposite || checksumType(m.full()) != checksumFullObject {
		t.Error("checksumType")
	}

	tests := []struct {
		sent, typ, want, code string
	}{
		{comp + "-2", "", comp + "-2", ""},
		{comp, "", comp + "-2", ""},
		{comp, checksumComposite, comp + "-2", ""},
		{full, "", full, ""},
		{full, checksumFullObject, full, ""},
		{comp + "-3", "", "", "BadDigest"},
		{comp, checksumFullObject, "", "BadDigest"},
		{full, checksumComposite, "", "BadDigest"},
		{full + "-2", "", "", "BadDigest"},
		{"AAAAAA==", "", "", "BadDigest"},
		{comp, "OTHER", "", "InvalidRequest"},
	}
	for _, tc := range tests {
		got, err := matchObjectChecksum(tc.sent, tc.typ, m.composite(), m.full())
		if tc.code != "" {
			if !isCode(err, tc.code) {
				t.Errorf("match(%q, %q): %q %v, want %s", tc.sent, tc.typ, got, err, tc.code)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("match(%q, %q) = %q %v, want %q", tc.sent, tc.typ, got, err, tc.want)
		}
	}
}
