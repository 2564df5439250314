package kv_test

import (
	"bytes"
	"testing"

	"github.com/sluice-fs/sluice/internal/kv"
)

func TestPrefixEnd(t *testing.T) {
	tests := []struct{ prefix, want []byte }{
		{[]byte("a"), []byte("b")},
		{[]byte("a/"), []byte("a0")},
		{[]byte("a\xff"), []byte("b")},
		{[]byte("a\xff\xff"), []byte("b")},
		{[]byte("\xff"), nil},
		{[]byte("\xff\xff"), nil},
		{nil, nil},
	}
	for _, tc := range tests {
		if got := kv.PrefixEnd(tc.prefix); !bytes.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("PrefixEnd(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
	// PrefixEnd must not modify its argument.
	p := []byte("ab")
	kv.PrefixEnd(p)
	if string(p) != "ab" {
		t.Errorf("PrefixEnd modified its argument to %q", p)
	}
}
