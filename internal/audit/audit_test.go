package audit

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
)

func sampleEntry(i int) Entry {
	return Entry{
		Time: int64(1e18) + int64(i), Op: Op(1 + i%6), Ino: uint64(100 + i), Parent: 1, Name: "f" + strings.Repeat("x", i%5),
		NewParent: uint64(i), NewName: "", Replaced: uint64(i % 3), Who: Who{Known: i%2 == 0, Uid: uint32(i), Gid: 7},
		Changes: []Change{{Field: "mode", Old: "0644", New: "0600"}},
	}
}

// chain seals n sample entries and returns the sealed records (index i is
// sequence i+1) and the head.
func chain(n int) ([][]byte, Head) {
	var recs [][]byte
	var h Head
	for i := range n {
		e := sampleEntry(i)
		sealed, hash := Seal(uint64(i+1), h.Hash, e.Encode())
		recs = append(recs, sealed)
		h = Head{Seq: uint64(i + 1), Hash: hash}
	}
	return recs, h
}

// verify feeds recs with the given sequence numbers and returns the error.
func verify(seqs []uint64, recs [][]byte, h Head) (uint64, error) {
	var v Verifier
	for i, r := range recs {
		if _, err := v.Add(seqs[i], r); err != nil {
			return 0, err
		}
	}
	return v.Finish(h)
}

func seqs(n int) []uint64 {
	s := make([]uint64, n)
	for i := range s {
		s[i] = uint64(i + 1)
	}
	return s
}

func brokenAt(t *testing.T, err error) uint64 {
	t.Helper()
	var be *BrokenError
	if !errors.As(err, &be) {
		t.Fatalf("got %v, want a BrokenError", err)
	}
	if !errors.Is(err, errs.ErrCorruption) {
		t.Fatalf("%v does not wrap errs.ErrCorruption", err)
	}
	return be.Seq
}

func TestChainVerifies(t *testing.T) {
	for _, n := range []int{0, 1, 5} {
		recs, h := chain(n)
		got, err := verify(seqs(n), recs, h)
		if err != nil || got != uint64(n) {
			t.Fatalf("chain of %d: verified %d, %v", n, got, err)
		}
		var v Verifier
		for i, r := range recs {
			e, err := v.Add(uint64(i+1), r)
			if err != nil {
				t.Fatal(err)
			}
			if want := sampleEntry(i); !reflect.DeepEqual(e, want) {
				t.Fatalf("entry %d decoded as %+v, want %+v", i+1, e, want)
			}
		}
	}
}

func TestChainDetectsTampering(t *testing.T) {
	const n = 6
	cases := []struct {
		name   string
		tamper func(s []uint64, r [][]byte, h *Head) ([]uint64, [][]byte)
		at     uint64
	}{
		{"edit middle", func(s []uint64, r [][]byte, h *Head) ([]uint64, [][]byte) {
			r[2] = append([]byte(nil), r[2]...)
			r[2][len(r[2])-1] ^= 1
			return s, r
		}, 3},
		{"edit last", func(s []uint64, r [][]byte, h *Head) ([]uint64, [][]byte) {
			r[n-1] = append([]byte(nil), r[n-1]...)
			r[n-1][len(r[n-1])-1] ^= 1
			return s, r
		}, n},
		{"delete middle", func(s []uint64, r [][]byte, h *Head) ([]uint64, [][]byte) {
			return append(s[:3:3], s[4:]...), append(r[:3:3], r[4:]...)
		}, 4},
		{"delete middle and renumber", func(s []uint64, r [][]byte, h *Head) ([]uint64, [][]byte) {
			return s[:n-1], append(r[:3:3], r[4:]...)
		}, 4},
		{"swap two", func(s []uint64, r [][]byte, h *Head) ([]uint64, [][]byte) {
			r[1], r[2] = r[2], r[1]
			return s, r
		}, 2},
		{"rewrite middle with its own hash", func(s []uint64, r [][]byte, h *Head) ([]uint64, [][]byte) {
			prev, _, _, _ := Open(r[2])
			e := sampleEntry(99)
			r[2], _ = Seal(3, prev, e.Encode())
			return s, r
		}, 4},
		{"truncate", func(s []uint64, r [][]byte, h *Head) ([]uint64, [][]byte) {
			return s[:n-2], r[:n-2]
		}, n - 1},
		{"truncate and rewind head", func(s []uint64, r [][]byte, h *Head) ([]uint64, [][]byte) {
			h.Seq = n - 1
			return s[:n-1], r[:n-1]
		}, n - 1},
		{"delete first", func(s []uint64, r [][]byte, h *Head) ([]uint64, [][]byte) {
			return s[1:], r[1:]
		}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recs, h := chain(n)
			s, r := c.tamper(seqs(n), recs, &h)
			_, err := verify(s, r, h)
			if got := brokenAt(t, err); got != c.at {
				t.Fatalf("broken at %d (%v), want %d", got, err, c.at)
			}
		})
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	e := sampleEntry(3)
	b := e.Encode()
	for i := range len(b) {
		if _, err := Decode(b[:i]); !errors.Is(err, errs.ErrCorruption) {
			t.Fatalf("prefix of %d bytes: %v, want corruption", i, err)
		}
	}
	if _, err := Decode(append(b, 0)); !errors.Is(err, errs.ErrCorruption) {
		t.Fatalf("trailing byte: %v", err)
	}
}

func TestJSON(t *testing.T) {
	e := sampleEntry(0)
	b, err := e.JSON(9)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"seq":9`, `"op":"setattr"`, `"uid":0`, `"mode":{"old":"0644","new":"0600"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	e.Who.Known = false
	b, _ = e.JSON(9)
	if strings.Contains(string(b), `"uid"`) {
		t.Errorf("%s has a uid though none is known", b)
	}
}

// FuzzEntryRoundTrip decodes what Encode wrote from fuzzed fields and
// compares; and decodes fuzzed bytes without panicking, re-encoding what
// decodes to the same bytes.
func FuzzEntryRoundTrip(f *testing.F) {
	f.Add(int64(1), uint8(1), uint64(2), "name", "new", uint32(3), "mode", "0644", "0600", []byte{1})
	f.Fuzz(func(t *testing.T, tm int64, op uint8, ino uint64, name, newName string, uid uint32, field, old, nw string, raw []byte) {
		e := Entry{Time: tm, Op: Op(op), Ino: ino, Parent: ino / 2, Name: name, NewParent: ino ^ 1, NewName: newName,
			Replaced: ino + 1, Who: Who{Known: uid&1 == 1, Uid: uid, Gid: uid / 3}}
		if field != "" {
			e.Changes = []Change{{Field: field, Old: old, New: nw}}
		}
		got, err := Decode(e.Encode())
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("decoded %+v, want %+v", got, e)
		}
		if d, err := Decode(raw); err == nil {
			if re := d.Encode(); string(re) != string(raw) {
				t.Fatalf("%x decodes to %+v, which encodes to %x", raw, d, re)
			}
		}
		h, err := DecodeHead(raw)
		if err == nil && string(h.Encode()) != string(raw) {
			t.Fatalf("head %x re-encodes to %x", raw, h.Encode())
		}
	})
}

func TestRandomChainsVerify(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		n := r.IntN(30)
		recs, h := chain(n)
		if _, err := verify(seqs(n), recs, h); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			continue
		}
		i := r.IntN(n)
		recs[i] = append([]byte(nil), recs[i]...)
		recs[i][1+r.IntN(len(recs[i])-1)] ^= byte(1 + r.IntN(255))
		if _, err := verify(seqs(n), recs, h); err == nil {
			t.Fatalf("flipping a byte of entry %d of %d went unnoticed", i+1, n)
		}
	}
}
