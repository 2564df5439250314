package s3

import (
	"encoding/xml"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParseTaggingHeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want map[string]string
		code string
	}{
		{"", nil, ""},
		{"a=1&b=two%20words", map[string]string{"a": "1", "b": "two words"}, ""},
		{"k=&x=y+z", map[string]string{"k": "", "x": "y z"}, ""},
		{"proj=ai%2Fdatasets&t=a%3Db%40c", map[string]string{"proj": "ai/datasets", "t": "a=b@c"}, ""},
		{"a=1&a=2", nil, "InvalidTag"},
		{"=v", nil, "InvalidTag"},
		{"aws:x=1", nil, "InvalidTag"},
		{"a=%zz", nil, "InvalidArgument"},
		{"a=b%3Cc", nil, "InvalidTag"}, // '<' is not allowed
		{"k=" + strings.Repeat("v", 257), nil, "InvalidTag"},
		{strings.Repeat("k", 129) + "=v", nil, "InvalidTag"},
		{strings.Repeat("é", 128) + "=" + strings.Repeat("ü", 256), map[string]string{strings.Repeat("é", 128): strings.Repeat("ü", 256)}, ""},
	} {
		got, err := parseTaggingHeader(tc.in)
		if tc.code != "" {
			if !hasCode(err, tc.code) {
				t.Errorf("%q: %v, want %s", tc.in, err, tc.code)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
	var ten, eleven []string
	for i := range 11 {
		if i < 10 {
			ten = append(ten, fmt.Sprintf("k%d=v", i))
		}
		eleven = append(eleven, fmt.Sprintf("k%d=v", i))
	}
	if got, err := parseTaggingHeader(strings.Join(ten, "&")); err != nil || len(got) != 10 {
		t.Errorf("10 tags: %v %v", got, err)
	}
	if _, err := parseTaggingHeader(strings.Join(eleven, "&")); !hasCode(err, "InvalidTag") {
		t.Errorf("11 tags on an object: %v, want InvalidTag", err)
	}
	pairs := make([][2]string, 51)
	for i := range pairs {
		pairs[i] = [2]string{fmt.Sprintf("k%d", i), "v"}
	}
	if _, err := checkTags(pairs[:50], maxBucketTags, true); err != nil {
		t.Errorf("50 bucket tags: %v", err)
	}
	if _, err := checkTags(pairs, maxBucketTags, true); !hasCode(err, "InvalidTag") {
		t.Errorf("51 bucket tags: %v, want InvalidTag", err)
	}
}

func TestTagSetDocument(t *testing.T) {
	t.Parallel()
	b, err := xml.Marshal(tagSetOf(nil))
	if err != nil || !strings.Contains(string(b), "<TagSet></TagSet>") {
		t.Errorf("empty tag set: %s %v", b, err)
	}
	b, _ = xml.Marshal(tagSetOf(map[string]string{"b": "2", "a": "1"}))
	if want := "<TagSet><Tag><Key>a</Key><Value>1</Value></Tag><Tag><Key>b</Key><Value>2</Value></Tag></TagSet>"; !strings.Contains(string(b), want) {
		t.Errorf("tag set: %s, want %s", b, want)
	}
	var doc tagging
	if _, err := decodeXML(strings.NewReader(`<Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>`), &doc, false); err != nil || len(doc.TagSet.Tags) != 1 || doc.TagSet.Tags[0] != (tagXML{"k", "v"}) {
		t.Errorf("decode: %+v %v", doc, err)
	}
}
