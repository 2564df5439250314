package kv_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

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

// TestCloseStopsGoroutines checks that Close stops the committer of every
// engine.
func TestCloseStopsGoroutines(t *testing.T) {
	dbs := []kv.DB{kv.NewMemory(), openPebble(t, t.TempDir())}
	for _, db := range dbs {
		if err := db.Update(t.Context(), func(tx kv.Txn) error { tx.Set([]byte("k"), nil); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	// A lone Update commits on its own goroutine (committer.commit), so a
	// committer goroutine may not have been scheduled yet: wait for it.
	for deadline := time.Now().Add(10 * time.Second); committers() < len(dbs) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := committers(); n < len(dbs) {
		t.Fatalf("found %d committer goroutines with %d open DBs", n, len(dbs))
	}
	for _, db := range dbs {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := committers(); n != 0 {
		t.Fatalf("%d committer goroutines still running after Close", n)
	}
}

// committers counts the committer goroutines of all DBs in the process;
// the test using it must not run in parallel with others.
func committers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "kv.(*committer).run")
		}
		buf = make([]byte, 2*len(buf))
	}
}
