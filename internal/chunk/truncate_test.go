package chunk

import (
	"bytes"
	"fmt"
	"testing"
)

// TestOverwriteThenTruncate is issue 12's sequence at the chunk store: a
// write, an in-place overwrite of part of it, an optional sync, a truncate
// inside the overwritten range; the overwrite must survive the truncate,
// also across a restart of the store.
func TestOverwriteThenTruncate(t *testing.T) {
	for _, syncAt := range []string{"none", "each write", "before truncate"} {
		t.Run(syncAt, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			id := ID{Ino: 5, Slot: 0}
			mustWrite(t, s, id, 0, bytes.Repeat([]byte{'A'}, 200000), syncAt == "each write")
			mustWrite(t, s, id, 20000, bytes.Repeat([]byte{'B'}, 40000), syncAt == "each write")
			if syncAt == "before truncate" {
				if err := s.Sync(id); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Truncate(id, 50000); err != nil {
				t.Fatal(err)
			}
			want := append(bytes.Repeat([]byte{'A'}, 20000), bytes.Repeat([]byte{'B'}, 30000)...)
			check := func(when string) {
				got, clen := mustRead(t, s, id, 0, 60000)
				if clen != 50000 || !bytes.Equal(got, want) {
					t.Fatalf("%s: length %d, read %d bytes, first difference at %d", when, clen, len(got), diffAt(got, want))
				}
			}
			check("after truncate")
			s.Close()
			s = openStore(t, dir)
			check("after reopen")
			// Growing again must read zeros past the cut, never old bytes.
			if err := s.Truncate(id, 70000); err != nil {
				t.Fatal(err)
			}
			got, _ := mustRead(t, s, id, 50000, 20000)
			if !bytes.Equal(got, make([]byte, 20000)) {
				t.Fatalf("bytes past the cut came back after growing: %q", fmt.Sprint(got[:16]))
			}
		})
	}
}

func diffAt(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
