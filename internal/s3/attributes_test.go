package s3

import (
	"encoding/xml"
	"reflect"
	"strings"
	"testing"
)

func TestParseObjectAttributes(t *testing.T) {
	t.Parallel()
	got, err := parseObjectAttributes([]string{"ETag, ObjectSize", "Checksum"})
	if err != nil || !reflect.DeepEqual(got, map[string]bool{"ETag": true, "ObjectSize": true, "Checksum": true}) {
		t.Errorf("got %v %v", got, err)
	}
	for _, bad := range [][]string{nil, {""}, {" , "}, {"ETag,Size"}, {"etag"}} {
		if _, err := parseObjectAttributes(bad); !isCode(err, "InvalidArgument") {
			t.Errorf("%q: %v, want InvalidArgument", bad, err)
		}
	}
}

func TestObjectAttributes(t *testing.T) {
	t.Parallel()
	all := map[string]bool{"ETag": true, "Checksum": true, "ObjectParts": true, "StorageClass": true, "ObjectSize": true}
	r := objectAttributes(all, "abc-3", "STANDARD", 11, map[string]string{"crc32": "AAAAAA==-3"}, []int64{5, 5, 1}, 2, 0)
	if r.ETag != "abc-3" || r.StorageClass != "STANDARD" || *r.ObjectSize != 11 || r.Checksum.ChecksumCRC32 != "AAAAAA==-3" || r.Checksum.ChecksumType != "COMPOSITE" {
		t.Errorf("attributes: %+v", r)
	}
	p := r.ObjectParts
	if p.PartsCount != 3 || !p.IsTruncated || p.NextPartNumberMarker != 2 || !reflect.DeepEqual(p.Parts, []attributePart{{1, 5}, {2, 5}}) {
		t.Errorf("first page of parts: %+v", p)
	}
	p = objectAttributes(all, "abc-3", "STANDARD", 11, nil, []int64{5, 5, 1}, 2, 2).ObjectParts
	if p.IsTruncated || p.PartNumberMarker != 2 || !reflect.DeepEqual(p.Parts, []attributePart{{3, 1}}) {
		t.Errorf("second page of parts: %+v", p)
	}
	// Only what is asked for; no ObjectParts for an object that is not
	// multipart, no Checksum without one.
	r = objectAttributes(map[string]bool{"ObjectSize": true, "ObjectParts": true, "Checksum": true}, "e", "STANDARD", 0, nil, nil, 1000, 0)
	b, _ := xml.Marshal(r)
	if want := `<GetObjectAttributesResponse xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ObjectSize>0</ObjectSize></GetObjectAttributesResponse>`; string(b) != want {
		t.Errorf("document %s, want %s", b, want)
	}
	if b, _ := xml.Marshal(objectAttributes(all, "e", "GLACIER", 1, map[string]string{"sha256": "x"}, nil, 1, 0)); !strings.Contains(string(b), "<Checksum><ChecksumSHA256>x</ChecksumSHA256><ChecksumType>FULL_OBJECT</ChecksumType></Checksum>") || !strings.Contains(string(b), "<StorageClass>GLACIER</StorageClass>") {
		t.Errorf("checksum or storage class element: %s", b)
	}
}
