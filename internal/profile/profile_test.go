package profile

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func randomBatch(rng *rand.Rand) Batch {
	b := Batch{Client: strings.Repeat("c", rng.IntN(20))}
	t := rng.Int64N(1 << 60)
	for range rng.IntN(50) {
		t += rng.Int64N(1e6) - 1e5
		b.Records = append(b.Records, Record{
			Start: t, Dur: rng.Int64N(1e9), Op: Op(1 + rng.IntN(int(opEnd)-1)), Flags: uint8(rng.IntN(4)),
			Handle: rng.Uint32(), Ino: rng.Uint64(), Parent: rng.Uint64N(1000),
			Off: rng.Int64(), Len: rng.Int64N(1 << 30), N: rng.Int64N(1<<30) - 1,
		})
	}
	return b
}

func TestBatchRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := randomBatch(rng)
		got, err := Decode(b.Append(nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Records) == 0 {
			b.Records = []Record{}
		}
		if !reflect.DeepEqual(got, b) {
			t.Fatalf("decoded %+v, encoded %+v", got, b)
		}
	}
	for _, bad := range [][]byte{nil, {0}, {2, 0, 0}, {1, 5, 'a'}, {1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 0, 1, 99, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode(%v) succeeded", bad)
		}
	}
}

// FuzzBatch decodes arbitrary bytes; what decodes must encode to bytes
// that decode to the same batch.
func FuzzBatch(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		b := randomBatch(rng)
		f.Add(b.Append(nil))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		b, err := Decode(p)
		if err != nil {
			return
		}
		again, err := Decode(b.Append(nil))
		if err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, b) {
			t.Fatalf("round trip: %+v became %+v", b, again)
		}
		if !bytes.Equal(again.Append(nil), b.Append(nil)) {
			t.Fatal("encoding is not stable")
		}
	})
}

// workload builds records: each call adds one operation of a stream.
type workload struct {
	b Batch
	t int64
}

func (w *workload) op(r Record, think int64) {
	w.t += think
	r.Start = w.t
	w.t += r.Dur
	w.b.Records = append(w.b.Records, r)
}

const ms = int64(1e6)

func TestSummarizeSequential(t *testing.T) {
	var w workload
	w.b.Client = "a"
	// Two large files read in order, 1 MiB at a time, twice each.
	for epoch := range 2 {
		for f := uint64(1); f <= 2; f++ {
			h := uint32(10*epoch) + uint32(f)
			w.op(Record{Op: OpOpen, Handle: h, Ino: f, Len: 64 << 20, Dur: ms}, ms)
			for off := int64(0); off < 64<<20; off += 1 << 20 {
				w.op(Record{Op: OpRead, Handle: h, Ino: f, Off: off, Len: 1 << 20, N: 1 << 20, Dur: 2 * ms}, ms)
			}
			w.op(Record{Op: OpClose, Handle: h, Ino: f, Dur: ms / 10}, 0)
		}
	}
	r := Summarize([]Batch{w.b}, nil)
	if !strings.HasPrefix(r.Kind, KindSequential+" read") {
		t.Errorf("kind %q", r.Kind)
	}
	if r.Read.Sequential != 1 || r.Read.Random != 0 {
		t.Errorf("read pattern %+v", r.Read)
	}
	if r.Read.Bytes != 4*64<<20 || r.Read.Ops != 256 || r.Read.SizeP50 != 1<<20 {
		t.Errorf("reads %+v", r.Read)
	}
	if r.Reread != 2 {
		t.Errorf("re-read %v, want 2", r.Reread)
	}
	if r.Opens != 4 || r.Files != 2 || r.Streams != 4 || r.WholeFileReads != 1 {
		t.Errorf("opens %d files %d streams %d whole %v", r.Opens, r.Files, r.Streams, r.WholeFileReads)
	}
	if r.PeakInFlight != 1 {
		t.Errorf("peak in flight %d, want 1 (one operation at a time)", r.PeakInFlight)
	}
	if r.DataInFlight != 1 || r.FileSpanP50 != 64<<20 {
		t.Errorf("data in flight %v, file span %d; want 1 and 64 MiB", r.DataInFlight, r.FileSpanP50)
	}
	if r.ThinkP50 != ms {
		t.Errorf("think p50 %d, want %d", r.ThinkP50, ms)
	}
	// 2 ms of every 3 ms is a read.
	if r.IOFraction < 0.6 || r.IOFraction > 0.7 {
		t.Errorf("I/O fraction %v", r.IOFraction)
	}
}

func TestSummarizeSmallFilesAndHot(t *testing.T) {
	var batches []Batch
	// Two clients, reading 100 files of 100 KiB whole; file 7 ten times.
	for c, name := range []string{"x", "y"} {
		w := workload{b: Batch{Client: name}, t: int64(c)}
		h := uint32(0)
		read := func(ino uint64) {
			h++
			w.op(Record{Op: OpLookup, Parent: 1000 + ino%4, Ino: ino, Dur: ms / 5}, 0)
			w.op(Record{Op: OpOpen, Handle: h, Ino: ino, Len: 100 << 10, Dur: ms / 5}, 0)
			w.op(Record{Op: OpRead, Handle: h, Ino: ino, Off: 0, Len: 128 << 10, N: 100 << 10, Dur: ms}, 0)
			w.op(Record{Op: OpClose, Handle: h, Ino: ino, Dur: ms / 10}, 0)
		}
		for ino := uint64(1); ino <= 50; ino++ {
			read(ino + uint64(50*c))
		}
		for range 5 {
			read(7)
		}
		batches = append(batches, w.b)
	}
	r := Summarize(batches, func(ino uint64) (string, bool) {
		if ino == 7 {
			return "/data/seven", true
		}
		return "", false
	})
	if !strings.HasPrefix(r.Kind, KindSmallFiles+" read") {
		t.Errorf("kind %q", r.Kind)
	}
	if r.Clients != 2 || r.Files != 100 || r.Opens != 110 {
		t.Errorf("clients %d files %d opens %d", r.Clients, r.Files, r.Opens)
	}
	if r.Hot[0].Ino != 7 || r.Hot[0].Opens != 11 || r.Hot[0].Path != "/data/seven" || r.Hot[0].Bytes != 11*100<<10 {
		t.Errorf("hottest %+v", r.Hot[0])
	}
	if r.WholeFileReads != 1 {
		t.Errorf("whole-file reads %v", r.WholeFileReads)
	}
	// The clients' operations overlap (their clocks start together).
	if r.PeakInFlight != 2 {
		t.Errorf("peak in flight %d, want 2", r.PeakInFlight)
	}
	// Both clients read at once: 2 reads in flight while any is.
	if math.Abs(r.DataInFlight-2) > 1e-3 {
		t.Errorf("data in flight %v, want 2", r.DataInFlight)
	}
	if r.Dirs != 4 || r.FanOutMax != 25 {
		t.Errorf("dirs %d fan-out max %d", r.Dirs, r.FanOutMax)
	}
	if r.Ops["lookup"].Count != 110 {
		t.Errorf("lookups %+v", r.Ops["lookup"])
	}
	var out strings.Builder
	Format(&out, &r)
	for _, want := range []string{"small-files read", "/data/seven", "lookup", "opens/s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestSummarizePatterns(t *testing.T) {
	var w workload
	w.b.Client = "s"
	w.op(Record{Op: OpOpen, Handle: 1, Ino: 1, Len: 1 << 30, Dur: 1}, 0)
	// Strided: 4 KiB every 64 KiB.
	for i := range int64(100) {
		w.op(Record{Op: OpRead, Handle: 1, Ino: 1, Off: i * 64 << 10, Len: 4 << 10, N: 4 << 10, Dur: 10}, 1)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	w.op(Record{Op: OpOpen, Handle: 2, Ino: 2, Len: 1 << 30, Dur: 1}, 0)
	for range 300 {
		w.op(Record{Op: OpRead, Handle: 2, Ino: 2, Off: rng.Int64N(1<<30) &^ 4095, Len: 4 << 10, N: 4 << 10, Dur: 10}, 1)
	}
	r := Summarize([]Batch{w.b}, nil)
	// 100 strided reads (the first two not yet: the first starts the
	// file, the second sets the stride) and 300 random ones.
	if got, want := r.Read.Strided, 98.0/400; got != want {
		t.Errorf("strided %v, want %v", got, want)
	}
	if r.Read.Random < 0.74 {
		t.Errorf("random %v", r.Read.Random)
	}
	if !strings.HasPrefix(r.Kind, KindRandom) {
		t.Errorf("kind %q", r.Kind)
	}
	if len(r.Read.Sizes) != 1 || r.Read.Sizes[0] != (Bucket{Max: 4 << 10, Count: 400}) {
		t.Errorf("sizes %+v", r.Read.Sizes)
	}
}

func TestSummarizeMetadataAndEmpty(t *testing.T) {
	if r := Summarize(nil, nil); r.Kind != KindIdle || r.Records != 0 {
		t.Errorf("empty: %+v", r)
	}
	var w workload
	w.b.Client = "m"
	for i := range uint64(1000) {
		w.op(Record{Op: OpCreate, Parent: 1 + i%10, Ino: 100 + i, Dur: ms}, 0)
		w.op(Record{Op: OpUnlink, Parent: 1 + i%10, Dur: ms, Flags: uint8(i%2) * FlagError}, 0)
	}
	r := Summarize([]Batch{w.b}, nil)
	if r.Kind != KindMetadata {
		t.Errorf("kind %q", r.Kind)
	}
	if r.Ops["unlink"].Errors != 500 || r.Ops["create"].P50 != ms {
		t.Errorf("ops %+v", r.Ops)
	}
	if r.MetaOpsPerSec < 999 || r.MetaOpsPerSec > 1001 {
		t.Errorf("%v namespace operations per second, want 1000", r.MetaOpsPerSec)
	}
	if r.Dirs != 10 || r.FanOutMax != 100 || r.FanOutMedian != 100 {
		t.Errorf("dirs %d fan-out %d/%d", r.Dirs, r.FanOutMedian, r.FanOutMax)
	}
}

func TestSizeAndDur(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 4096: "4KiB", 1536: "1.5KiB", 1 << 30: "1GiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{500: "500ns", 1500: "1.5us", 2 * ms: "2.0ms", 3e9: "3.00s"} {
		if got := Dur(n); got != want {
			t.Errorf("Dur(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestFanOutByPath: files opened by path (no lookup records) count in
// their directories by the names given.
func TestFanOutByPath(t *testing.T) {
	var w workload
	w.b.Client = "p"
	for i := uint64(1); i <= 3; i++ {
		w.op(Record{Op: OpOpen, Handle: uint32(i), Ino: i, Len: 10, Dur: 1}, 1)
		w.op(Record{Op: OpRead, Handle: uint32(i), Ino: i, Len: 10, N: 10, Dur: 1}, 1)
	}
	paths := map[uint64]string{1: "/a/x", 2: "/a/y", 3: "/b/z"}
	r := Summarize([]Batch{w.b}, func(ino uint64) (string, bool) { p, ok := paths[ino]; return p, ok })
	if r.Dirs != 2 || r.FanOutMax != 2 || r.FanOutMedian != 1 {
		t.Errorf("dirs %d, fan-out max %d median %d; want 2, 2, 1", r.Dirs, r.FanOutMax, r.FanOutMedian)
	}
}

// TestRepeats: a lookup or stat counts as a repeat when the same client
// looked up or statted the inode before (failed ones and other clients'
// do not), bucketed by the time since its previous one ended; a client ID
// ending in /mount is a mount's.
func TestRepeats(t *testing.T) {
	const s = int64(1e9)
	mount := Batch{Client: "host/1/aa/" + ViaMount, Records: []Record{
		{Start: 0, Dur: 1e6, Op: OpLookup, Parent: 1, Ino: 5},
		{Start: 10 * s, Dur: 2e6, Op: OpStat, Ino: 5},                        // repeat, 10 s after
		{Start: 20 * s, Dur: 1e6, Op: OpLookup, Parent: 1, Flags: FlagError}, // failed: not counted
		{Start: 100 * s, Dur: 3e6, Op: OpLookup, Parent: 1, Ino: 5},          // repeat, 90 s after
		{Start: 101 * s, Dur: 1e6, Op: OpLookup, Parent: 1, Ino: 6},          // first of 6
	}}
	lib := Batch{Client: "host/2/bb", Records: []Record{
		{Start: 1 * s, Dur: 5e6, Op: OpLookup, Parent: 1, Ino: 5}, // its first
	}}
	r := Summarize([]Batch{mount, lib}, nil)
	if r.Clients != 2 || r.MountClients != 1 {
		t.Errorf("clients %d, through a mount %d; want 2 and 1", r.Clients, r.MountClients)
	}
	if r.Repeats != 2 || math.Abs(r.RepeatSeconds-0.005) > 1e-12 {
		t.Errorf("repeats %d in %.6f s, want 2 in 0.005 s", r.Repeats, r.RepeatSeconds)
	}
	want := map[int64]int{16 * s: 1, 128 * s: 1}
	n := 0
	for _, b := range r.RepeatGaps {
		if b.Count != want[b.MaxGap] {
			t.Errorf("gap bucket up to %d s: %d repeats, want %d", b.MaxGap/s, b.Count, want[b.MaxGap])
		}
		n += b.Count
	}
	if n != 2 || r.RepeatGapP90 < 10*s-3e6 || r.RepeatGapP90 > 90*s {
		t.Errorf("%d repeats in the buckets, p90 gap %d ns", n, r.RepeatGapP90)
	}
	if math.Abs(r.WaitSeconds-0.013) > 1e-12 {
		t.Errorf("time inside operations %.6f s, want 0.013", r.WaitSeconds)
	}
	for id, via := range map[string]string{"h/1/aa": "", "h/1/aa/mount": ViaMount, "mount": "", "": ""} {
		if got := ClientVia(id); got != via {
			t.Errorf("ClientVia(%q) = %q, want %q", id, got, via)
		}
	}
}
