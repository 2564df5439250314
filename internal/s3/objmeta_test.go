package s3

import (
	"reflect"
	"regexp"
	"testing"
)

// TestDecodeMetaCopies checks that metadata decoded from the cache is the
// caller's own: changing it changes nothing decoded later.
func TestDecodeMetaCopies(t *testing.T) {
	want := &objectMeta{ETag: "abc", Size: 3, Mtime: 7, User: map[string]string{"k": "v"}, Tags: map[string]string{"t": "1"}, Headers: map[string]string{"Cache-Control": "no-cache"}, Checksum: map[string]string{"CRC32": "x"}}
	raw := want.encode()
	for i := range 3 {
		m, ok := decodeMeta(raw)
		if !ok || !reflect.DeepEqual(m, want) {
			t.Fatalf("decode %d: %+v, want %+v", i, m, want)
		}
		m.User["k"], m.Tags["t"], m.Headers["Cache-Control"], m.Checksum["CRC32"] = "changed", "changed", "changed", "changed"
		m.ETag = "changed"
	}
	if _, ok := decodeMeta([]byte("{not json")); ok {
		t.Fatal("malformed metadata decoded")
	}
}

func TestRequestIDs(t *testing.T) {
	seen := make(map[string]bool)
	form := regexp.MustCompile(`^[0-9A-F]{16}$`)
	for range 1000 {
		id := newRequestID()
		if !form.MatchString(id) || seen[id] {
			t.Fatalf("request ID %q: malformed or repeated", id)
		}
		seen[id] = true
	}
}
