package profile

import (
	"cmp"
	"path"
	"slices"
)

// Report is the summary of a recorded workload (Summarize).
type Report struct {
	Records int     // records summarised
	Start   int64   // the first record's start (Unix ns)
	Seconds float64 // from the first start to the last end
	Clients int     // clients that shipped records
	Streams int     // open files (client, handle) with I/O

	Ops map[string]OpStats // by Op name

	Read, Write IOStats

	Opens       int   // files opened
	Files       int   // distinct files opened
	FileSizeP50 int64 // size at open, median over opens
	FileSizeP90 int64 //
	// FileSpanP50 is the median over files read or written of the bytes
	// each spanned: its size at open or the furthest byte read or
	// written, whichever is more (files written from empty count).
	FileSpanP50   int64
	OpensPerSec   float64 //
	MetaOpsPerSec float64 // namespace operations (create, mkdir, unlink, rmdir, lookup, stat, readdir, rename)
	// WholeFileReads is the fraction of streams that read their file from
	// offset 0 to its end (at open) and nothing else.
	WholeFileReads float64
	// Reread is the bytes read over the bytes of the files read up to the
	// furthest offset each was read to: 2 means everything was read twice.
	Reread float64

	// Concurrency: operations in flight, on average over the recording and
	// at most at any instant.
	MeanInFlight float64
	PeakInFlight int
	// DataInFlight is the reads and writes in flight on average while any
	// was (the parallelism of the data path).
	DataInFlight float64

	// Waiting on storage, over streams: the time inside reads, writes,
	// syncs and closes against the time from each stream's first operation
	// to its last (the rest is the application's own time).
	IOSeconds     float64
	StreamSeconds float64
	IOFraction    float64
	ThinkP50      int64 // ns between one operation's end and the next's start in a stream, median

	// WaitSeconds is the time inside every recorded operation.
	WaitSeconds float64
	// Repeats are the lookups and stats that found an inode the same
	// client had looked up or statted before in the recording: what a
	// cache of names and attributes in that client would have answered.
	// RepeatGaps counts them by the time since that client's previous
	// one ended, RepeatGapP90 is its 90th percentile (ns).
	Repeats       int
	RepeatSeconds float64
	RepeatGaps    []GapBucket `json:",omitempty"`
	RepeatGapP90  int64
	// MountClients are the clients that served a FUSE mount, S3Clients
	// those that served the S3 gateway (ClientVia); the others are
	// programs using the library.
	MountClients int
	S3Clients    int

	Hot      []HotFile // the files with the most bytes read and written, most first
	HotShare float64   // share of the bytes moved that went to the busiest 10% of files

	Dirs         int // directories with files created, looked up or opened
	FanOutMax    int // distinct files touched in one directory, most
	FanOutMedian int

	Kind string // a one-line description of the workload (Classify)
}

// OpStats is one operation's count and latency.
type OpStats struct {
	Count    int
	Errors   int
	P50, P99 int64   // ns
	Seconds  float64 // total time inside
}

// IOStats describes reads or writes.
type IOStats struct {
	Ops        int
	Bytes      int64
	MBps       float64 // bytes per second over the recording, in MB
	SizeP50    int64   // request size, median
	SizeP90    int64
	Sizes      []Bucket // request sizes, powers of two
	Sequential float64  // fractions of the bytes: following on from the stream's previous request,
	Strided    float64  // a constant gap from it,
	Random     float64  // or neither
}

// Bucket counts requests of up to Max bytes (and more than the previous
// bucket's Max).
type Bucket struct {
	Max   int64
	Count int
}

// GapBucket counts repeated lookups and stats whose previous one ended at
// most MaxGap ns before (and more than the previous bucket's MaxGap), and
// the time inside them.
type GapBucket struct {
	MaxGap  int64
	Count   int
	Seconds float64
}

// HotFile is one file's traffic.
type HotFile struct {
	Ino   uint64
	Path  string // "" when unknown
	Bytes int64
	Opens int
}

// hotFiles is how many files Report.Hot lists.
const hotFiles = 10

// Summarize summarises records (in any order). names, when not nil, gives
// the paths of inodes it knows (the report names hot files and counts
// directory fan-out with them); it must not do I/O per call that the
// caller has not planned for.
func Summarize(batches []Batch, names func(ino uint64) (string, bool)) Report {
	var r Report
	r.Ops = map[string]OpStats{}
	clients := map[string]bool{}
	var recs []srec
	for bi := range batches {
		if len(batches[bi].Records) > 0 {
			clients[batches[bi].Client] = true
		}
		for i := range batches[bi].Records {
			recs = append(recs, srec{Record: &batches[bi].Records[i], client: bi})
		}
	}
	r.Clients = len(clients)
	for c := range clients {
		switch ClientVia(c) {
		case ViaMount:
			r.MountClients++
		case ViaS3:
			r.S3Clients++
		}
	}
	r.Records = len(recs)
	if len(recs) == 0 {
		r.Kind = Classify(&r)
		return r
	}
	// Batches of one client keep its records in order within a handle, but
	// streams are keyed by client name: the same client ships many batches.
	clientKey := make([]int, len(batches))
	byName := map[string]int{}
	for i, b := range batches {
		k, ok := byName[b.Client]
		if !ok {
			k = len(byName)
			byName[b.Client] = k
		}
		clientKey[i] = k
	}
	for i := range recs {
		recs[i].client = clientKey[recs[i].client]
	}
	slices.SortStableFunc(recs, func(a, b srec) int { return cmp.Compare(a.Start, b.Start) })
	r.Start = recs[0].Start
	end := r.Start
	for _, x := range recs {
		end = max(end, x.End())
	}
	r.Seconds = float64(end-r.Start) / 1e9
	secs := max(r.Seconds, 1e-9)

	// Operation latencies.
	lat := map[Op][]int64{}
	for _, x := range recs {
		lat[x.Op] = append(lat[x.Op], x.Dur)
		s := r.Ops[x.Op.String()]
		s.Count++
		if x.Flags&FlagError != 0 {
			s.Errors++
		}
		s.Seconds += float64(x.Dur) / 1e9
		r.Ops[x.Op.String()] = s
	}
	for _, s := range r.Ops {
		r.WaitSeconds += s.Seconds
	}
	repeats(&r, recs)
	for op, ds := range lat {
		slices.Sort(ds)
		s := r.Ops[op.String()]
		s.P50, s.P99 = quantile(ds, 0.5), quantile(ds, 0.99)
		r.Ops[op.String()] = s
	}
	for _, op := range []Op{OpCreate, OpMkdir, OpUnlink, OpRmdir, OpLookup, OpStat, OpReaddir, OpRename} {
		r.MetaOpsPerSec += float64(r.Ops[op.String()].Count) / secs
	}

	// Streams, files, patterns.
	type skey struct {
		client int
		handle uint32
	}
	type stream struct {
		ino         uint64
		size        int64 // at open; -1 if the open was not recorded
		first, last int64
		io          int64 // ns inside operations
		next, gap   [2]int64
		seen        [2]bool
		whole       bool // every read so far continued from offset 0
		reads       int
		readEnd     int64
		writes      int
		prevOpEnd   int64
		havePrev    bool
	}
	streams := map[skey]*stream{}
	type fileStat struct {
		bytes   int64
		opens   int
		readMax int64
		span    int64
		size    int64
	}
	files := map[uint64]*fileStat{}
	file := func(ino uint64) *fileStat {
		f := files[ino]
		if f == nil {
			f = &fileStat{}
			files[ino] = f
		}
		return f
	}
	var sizes []int64
	var reqs [2][]int64
	var think []int64
	children := map[uint64]map[uint64]bool{}
	hasParent := map[uint64]bool{}
	addChild := func(parent, ino uint64) {
		if parent == 0 || ino == 0 {
			return
		}
		hasParent[ino] = true
		m := children[parent]
		if m == nil {
			m = map[uint64]bool{}
			children[parent] = m
		}
		m[ino] = true
	}
	var ioBytes [2]struct{ seq, strided, random int64 }
	for _, x := range recs {
		switch x.Op {
		case OpCreate, OpMkdir, OpLookup:
			addChild(x.Parent, x.Ino)
			continue
		case OpOpen, OpRead, OpWrite, OpSync, OpClose:
		default:
			continue
		}
		k := skey{x.client, x.Handle}
		s := streams[k]
		if s == nil {
			s = &stream{ino: x.Ino, size: -1, first: x.Start, whole: true}
			streams[k] = s
		}
		if s.havePrev && x.Start > s.prevOpEnd {
			think = append(think, x.Start-s.prevOpEnd)
		}
		s.havePrev = true
		s.prevOpEnd = max(s.prevOpEnd, x.End())
		s.last = max(s.last, x.End())
		switch x.Op {
		case OpOpen:
			s.size = x.Len
			r.Opens++
			f := file(x.Ino)
			f.opens++
			f.size = max(f.size, x.Len)
			sizes = append(sizes, x.Len)
			continue
		case OpSync, OpClose:
			s.io += x.Dur
			continue
		}
		s.io += x.Dur
		w := 0
		n := x.N
		if x.Op == OpWrite {
			w = 1
			n = x.Len
			s.writes++
		} else {
			s.reads++
			if x.Off != s.readEnd {
				s.whole = false
			}
			s.readEnd = x.Off + n
			f := file(x.Ino)
			f.readMax = max(f.readMax, x.Off+n)
		}
		fs := file(x.Ino)
		fs.bytes += n
		fs.span = max(fs.span, x.Off+n)
		reqs[w] = append(reqs[w], x.Len)
		st := &ioBytes[w]
		switch {
		case !s.seen[w]:
			// A stream's first request: sequential if it starts the file.
			if x.Off == 0 {
				st.seq += n
			} else {
				st.random += n
			}
		case x.Off == s.next[w]:
			st.seq += n
		case x.Off-s.next[w] == s.gap[w]:
			st.strided += n
		default:
			st.random += n
		}
		if s.seen[w] {
			s.gap[w] = x.Off - s.next[w]
		}
		s.seen[w] = true
		s.next[w] = x.Off + n
	}
	r.Streams = 0
	whole := 0
	reading := 0
	for _, s := range streams {
		if s.reads+s.writes == 0 {
			continue
		}
		r.Streams++
		r.IOSeconds += float64(s.io) / 1e9
		r.StreamSeconds += float64(s.last-s.first) / 1e9
		if s.reads > 0 && s.writes == 0 {
			reading++
			if s.whole && s.size >= 0 && s.readEnd >= s.size {
				whole++
			}
		}
	}
	if reading > 0 {
		r.WholeFileReads = float64(whole) / float64(reading)
	}
	if r.StreamSeconds > 0 {
		r.IOFraction = min(1, r.IOSeconds/r.StreamSeconds)
	}
	slices.Sort(think)
	r.ThinkP50 = quantile(think, 0.5)
	r.Files = len(files)
	slices.Sort(sizes)
	r.FileSizeP50, r.FileSizeP90 = quantile(sizes, 0.5), quantile(sizes, 0.9)
	r.OpensPerSec = float64(r.Opens) / secs
	var spans []int64
	for _, f := range files {
		if f.bytes > 0 {
			spans = append(spans, max(f.span, f.size))
		}
	}
	slices.Sort(spans)
	r.FileSpanP50 = quantile(spans, 0.5)
	for w, io := range []*IOStats{&r.Read, &r.Write} {
		rs := reqs[w]
		io.Ops = len(rs)
		b := ioBytes[w]
		io.Bytes = b.seq + b.strided + b.random
		io.MBps = float64(io.Bytes) / secs / 1e6
		slices.Sort(rs)
		io.SizeP50, io.SizeP90 = quantile(rs, 0.5), quantile(rs, 0.9)
		io.Sizes = buckets(rs)
		if io.Bytes > 0 {
			t := float64(io.Bytes)
			io.Sequential, io.Strided, io.Random = float64(b.seq)/t, float64(b.strided)/t, float64(b.random)/t
		}
	}
	var readBytes, readSpan int64
	for _, f := range files {
		readSpan += f.readMax
	}
	readBytes = r.Read.Bytes
	if readSpan > 0 {
		r.Reread = float64(readBytes) / float64(readSpan)
	}

	// Hot files.
	hot := make([]HotFile, 0, len(files))
	var total int64
	for ino, f := range files {
		hot = append(hot, HotFile{Ino: ino, Bytes: f.bytes, Opens: f.opens})
		total += f.bytes
	}
	slices.SortFunc(hot, func(a, b HotFile) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.Ino, b.Ino)
	})
	if total > 0 {
		var top int64
		for _, h := range hot[:max(1, len(hot)/10)] {
			top += h.Bytes
		}
		r.HotShare = float64(top) / float64(total)
	}
	r.Hot = hot[:min(len(hot), hotFiles)]
	if names != nil {
		for i := range r.Hot {
			r.Hot[i].Path, _ = names(r.Hot[i].Ino)
		}
	}

	// Directory fan-out: children seen in lookups and creates (by parent
	// inode), and the directories of other opened files whose paths are
	// known (by path).
	var fan []int64
	for _, m := range children {
		fan = append(fan, int64(len(m)))
	}
	if names != nil {
		byDir := map[string]int64{}
		for ino := range files {
			if p, ok := names(ino); ok && !hasParent[ino] {
				byDir[path.Dir(p)]++
			}
		}
		for _, n := range byDir {
			fan = append(fan, n)
		}
	}
	slices.Sort(fan)
	r.Dirs = len(fan)
	if len(fan) > 0 {
		r.FanOutMax = int(fan[len(fan)-1])
		r.FanOutMedian = int(quantile(fan, 0.5))
	}

	r.MeanInFlight, r.PeakInFlight = inFlight(recs, secs)
	r.DataInFlight = dataInFlight(recs)
	r.Kind = Classify(&r)
	return r
}

// repeats fills r's Repeats from recs, sorted by start: the successful
// lookups and stats of an inode that the same client had looked up or
// statted before.
func repeats(r *Report, recs []srec) {
	type key struct {
		client int
		ino    uint64
	}
	last := map[key]int64{} // when the client's previous one ended
	var gaps []int64
	for _, x := range recs {
		if (x.Op != OpLookup && x.Op != OpStat) || x.Flags&FlagError != 0 || x.Ino == 0 {
			continue
		}
		k := key{x.client, x.Ino}
		prev, ok := last[k]
		last[k] = max(prev, x.End())
		if !ok {
			continue
		}
		gap := max(x.Start-prev, 0)
		gaps = append(gaps, gap)
		r.Repeats++
		r.RepeatSeconds += float64(x.Dur) / 1e9
		i := gapBucket(gap)
		for len(r.RepeatGaps) <= i {
			r.RepeatGaps = append(r.RepeatGaps, GapBucket{MaxGap: int64(1e9) << len(r.RepeatGaps)})
		}
		r.RepeatGaps[i].Count++
		r.RepeatGaps[i].Seconds += float64(x.Dur) / 1e9
	}
	slices.Sort(gaps)
	r.RepeatGapP90 = quantile(gaps, 0.9)
}

// gapBucket is the index of the GapBucket of a gap of ns: 0 up to a
// second, then one per power of two seconds.
func gapBucket(ns int64) int {
	i := 0
	for max := int64(1e9); ns > max && i < 40; max <<= 1 {
		i++
	}
	return i
}

type srec struct {
	*Record
	client int
}

// inFlight returns the operations in flight on average over secs and at
// most at once.
func inFlight(recs []srec, secs float64) (float64, int) {
	type ev struct {
		t int64
		d int
	}
	evs := make([]ev, 0, 2*len(recs))
	var busy float64
	for _, x := range recs {
		evs = append(evs, ev{x.Start, 1}, ev{x.End(), -1})
		busy += float64(x.Dur) / 1e9
	}
	// Ends before starts at the same instant: back-to-back operations do
	// not overlap.
	slices.SortFunc(evs, func(a, b ev) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		return cmp.Compare(a.d, b.d)
	})
	cur, peak := 0, 0
	for _, e := range evs {
		cur += e.d
		peak = max(peak, cur)
	}
	return busy / secs, peak
}

// dataInFlight returns the reads and writes in flight on average over
// the time any was.
func dataInFlight(recs []srec) float64 {
	var busy, span int64
	var cur, curEnd int64 = -1, -1 // the union of intervals so far
	for _, x := range recs {       // sorted by start
		if x.Op != OpRead && x.Op != OpWrite {
			continue
		}
		busy += x.Dur
		switch {
		case cur < 0:
			cur, curEnd = x.Start, x.End()
		case x.Start > curEnd:
			span += curEnd - cur
			cur, curEnd = x.Start, x.End()
		default:
			curEnd = max(curEnd, x.End())
		}
	}
	if cur >= 0 {
		span += curEnd - cur
	}
	if span <= 0 {
		return 0
	}
	return float64(busy) / float64(span)
}

// quantile returns the q-quantile of sorted (the lower middle value).
func quantile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

// buckets counts sorted sizes by powers of two from 4 KiB.
func buckets(sorted []int64) []Bucket {
	var out []Bucket
	lim := int64(4 << 10)
	i := 0
	for i < len(sorted) {
		n := 0
		for i < len(sorted) && sorted[i] <= lim {
			n++
			i++
		}
		if n > 0 {
			out = append(out, Bucket{Max: lim, Count: n})
		}
		lim *= 2
	}
	return out
}
