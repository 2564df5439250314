package chunk

import (
	"bytes"
	"testing"
)

func TestEntryRoundTrip(t *testing.T) {
	t.Parallel()
	for _, e := range []entry{
		{},
		{cur: state{crc: 0xdeadbeef, n: 1}},
		{cur: state{crc: 1, n: BlockSize}, prev: state{crc: 2, n: 100}},
		{cur: state{n: 77}, zero: true},
	} {
		var b [entrySize]byte
		putEntry(b[:], 12, e)
		got, err := parseEntry(b[:], 12)
		if err != nil || got != e {
			t.Errorf("round trip of %+v = %+v, %v", e, got, err)
		}
		if e.present() {
			if _, err := parseEntry(b[:], 13); err == nil {
				t.Errorf("entry for block 12 accepted as block 13")
			}
		}
	}
}

func seedEntries(f *testing.F) {
	var b [entrySize]byte
	f.Add(b[:], uint32(0))
	putEntry(b[:], 3, entry{cur: state{crc: 0x1234, n: 4096}, prev: state{crc: 9, n: 10}})
	f.Add(bytes.Clone(b[:]), uint32(3))
	putEntry(b[:], 0, entry{cur: state{n: BlockSize}, zero: true})
	f.Add(bytes.Clone(b[:]), uint32(0))
	f.Add([]byte("short"), uint32(1))
}

// FuzzParseEntry: a sidecar entry decoder never panics; what it accepts
// re-encodes to the same bytes (so no garbage is taken for an entry).
func FuzzParseEntry(f *testing.F) {
	seedEntries(f)
	f.Fuzz(func(t *testing.T, b []byte, blk uint32) {
		e, err := parseEntry(b, blk)
		if err != nil {
			return
		}
		if e.cur.n > BlockSize || e.prev.n > BlockSize {
			t.Fatalf("accepted out-of-range lengths %+v", e)
		}
		var out [entrySize]byte
		putEntry(out[:], blk, e)
		if !bytes.Equal(out[:], b[:entrySize]) {
			t.Fatalf("accepted %x, which re-encodes as %x", b[:entrySize], out)
		}
	})
}

func FuzzParseFormat(f *testing.F) {
	f.Add(encodeFormat(formatInfo{Version: FormatVersion, Target: 7}))
	f.Add(encodeFormat(formatInfo{Version: 99, Target: 1 << 31}))
	f.Add([]byte("SLUICECS"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fi, err := parseFormat(b)
		if err != nil {
			return
		}
		if fi.Version == FormatVersion && !bytes.Equal(encodeFormat(fi), b) {
			t.Fatalf("accepted %x, which re-encodes differently", b)
		}
	})
}

func FuzzParseUndo(f *testing.F) {
	var oldE, newE [entrySize]byte
	putEntry(oldE[:], 1, entry{cur: state{crc: 5, n: 100}})
	putEntry(newE[:], 1, entry{cur: state{crc: 6, n: 200}, prev: state{crc: 5, n: 100}})
	rec := appendUndoHeader(nil, ID{Ino: 9, Slot: 2}, 2)
	rec = appendUndoBlock(rec, 1, oldE[:], newE[:], 10, 5)
	rec = append(rec, "hello"...)
	rec = appendUndoBlock(rec, 1, oldE[:], newE[:], 0, 0)
	rec = finishUndo(rec)
	f.Add(rec)
	f.Add(finishUndo(appendUndoHeader(nil, ID{}, 0)))
	f.Add(rec[:len(rec)-7])
	f.Add([]byte("SLUU"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseUndo(b)
		if err != nil {
			return
		}
		out := appendUndoHeader(nil, r.id, len(r.blocks))
		for _, ub := range r.blocks {
			if int(ub.off)+len(ub.old) > BlockSize {
				t.Fatalf("accepted out-of-range block %d+%d", ub.off, len(ub.old))
			}
			out = appendUndoBlock(out, ub.blk, ub.oldEntry[:], ub.newEntry[:], ub.off, uint32(len(ub.old)))
			out = append(out, ub.old...)
		}
		if out = finishUndo(out); !bytes.Equal(out, b) {
			t.Fatalf("accepted a record that re-encodes differently")
		}
	})
}
