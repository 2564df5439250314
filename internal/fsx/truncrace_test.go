package fsx

import (
	"bytes"
	"strings"
	"testing"
)

// TestTruncRaceCheck: the truncate race's checker accepts the two orders'
// files and names what is wrong in each broken one.
func TestTruncRaceCheck(t *testing.T) {
	r := TruncRace{Size: 4096, Cut: 100, At: 2000, Old: 'a', Mark: bytes.Repeat([]byte{'X'}, 500)}
	end := r.At + int64(len(r.Mark))
	cutFile := func() []byte {
		b := make([]byte, r.Size)
		copy(b, bytes.Repeat([]byte{'a'}, int(r.Cut)))
		return b
	}
	written := func() []byte {
		b := cutFile()
		copy(b[r.At:], r.Mark)
		return b
	}
	if o, err := r.Check(cutFile(), r.Cut); err != nil || o != WrittenThenCut {
		t.Fatalf("written then cut: %v, %v", o, err)
	}
	if o, err := r.Check(written(), end); err != nil || o != CutThenWritten {
		t.Fatalf("cut then written: %v, %v", o, err)
	}
	broken := []struct {
		name  string
		got   func() []byte
		ended int64
		want  string
	}{
		{"short", func() []byte { return cutFile()[:100] }, r.Cut, "bytes after growing"},
		{"old byte back", func() []byte { b := cutFile(); b[3000] = 'a'; return b }, r.Cut, "old byte came back at offset 3000"},
		{"garbage before the write", func() []byte { b := written(); b[1500] = 7; return b }, end, "byte 1500"},
		{"write past the cut size", written, r.Cut, "write committed between the cut and the size change"},
		{"write lost", cutFile, end, "acknowledged write lost"},
		{"write torn", func() []byte { b := written(); b[end-1] = 0; return b }, end, "acknowledged write lost"},
		{"other size", cutFile, 777, "ended at 777 bytes"},
	}
	for _, b := range broken {
		_, err := r.Check(b.got(), b.ended)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: %v, want an error with %q", b.name, err, b.want)
		}
	}
}

func TestTruncRaceRounds(t *testing.T) {
	t.Setenv("SLUICE_TRUNCRACE_ROUNDS", "")
	if n, err := TruncRaceRounds(7); n != 7 || err != nil {
		t.Fatalf("default: %d, %v", n, err)
	}
	t.Setenv("SLUICE_TRUNCRACE_ROUNDS", "40")
	if n, err := TruncRaceRounds(7); n != 40 || err != nil {
		t.Fatalf("40: %d, %v", n, err)
	}
	for _, v := range []string{"0", "-3", "many"} {
		t.Setenv("SLUICE_TRUNCRACE_ROUNDS", v)
		if _, err := TruncRaceRounds(7); err == nil {
			t.Fatalf("%q accepted", v)
		}
	}
}
