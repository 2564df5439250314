package profile

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Workload kinds (Report.Kind's first word).
const (
	KindIdle       = "idle"
	KindMetadata   = "metadata"    // namespace operations outnumber reads and writes
	KindSmallFiles = "small-files" // many files opened, each read or written whole and small
	KindSequential = "sequential"  // large files read or written in order
	KindRandom     = "random"      // requests at scattered offsets
	KindMixed      = "mixed"
)

// SmallFile is the file size up to which a workload of many opens counts
// as small files: a file of this size or less is one request to one
// target of a default layout (the default chunk, docs/placement.md).
const SmallFile = 1 << 20

// Classify names the workload: its kind, then whether it reads or writes
// more (for example "small-files read").
func Classify(r *Report) string {
	data := r.Read.Ops + r.Write.Ops
	meta := 0
	for _, op := range []Op{OpCreate, OpMkdir, OpUnlink, OpRmdir, OpLookup, OpStat, OpReaddir, OpRename} {
		meta += r.Ops[op.String()].Count
	}
	if data+meta == 0 {
		return KindIdle
	}
	dir := "read"
	if r.Write.Bytes > r.Read.Bytes {
		dir = "write"
	}
	io := r.Read
	if dir == "write" {
		io = r.Write
	}
	switch {
	case meta > 2*data && r.Read.Bytes+r.Write.Bytes < int64(meta)*4096:
		return KindMetadata
	case r.Opens > 0 && r.FileSizeP50 <= SmallFile && r.Opens*4 >= data:
		return KindSmallFiles + " " + dir
	case io.Sequential >= 0.8:
		return KindSequential + " " + dir
	case io.Random >= 0.5:
		return KindRandom + " " + dir
	}
	return KindMixed + " " + dir
}

// Format writes r as text.
func Format(w io.Writer, r *Report) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("workload: %s\n", r.Kind)
	p("records: %d from %d client(s) (%d through a mount, %d through the S3 gateway), %d stream(s), over %.1f s\n", r.Records, r.Clients, r.MountClients, r.S3Clients, r.Streams, r.Seconds)
	if r.Records == 0 {
		return
	}
	p("files: %d opened %d times (%.0f opens/s); size at open p50 %s, p90 %s; %.0f%% of reading streams read their file whole\n",
		r.Files, r.Opens, r.OpensPerSec, Size(r.FileSizeP50), Size(r.FileSizeP90), 100*r.WholeFileReads)
	for _, x := range []struct {
		name string
		io   *IOStats
	}{{"reads", &r.Read}, {"writes", &r.Write}} {
		io := x.io
		if io.Ops == 0 {
			p("%s: none\n", x.name)
			continue
		}
		p("%s: %d, %s (%.1f MB/s); size p50 %s, p90 %s; sequential %.0f%%, strided %.0f%%, random %.0f%% of bytes\n",
			x.name, io.Ops, Size(io.Bytes), io.MBps, Size(io.SizeP50), Size(io.SizeP90), 100*io.Sequential, 100*io.Strided, 100*io.Random)
		var b []string
		for _, k := range io.Sizes {
			b = append(b, fmt.Sprintf("<=%s:%d", Size(k.Max), k.Count))
		}
		p("  sizes: %s\n", strings.Join(b, " "))
	}
	if r.Reread > 0 {
		p("re-read: %.2fx the bytes of the files read\n", r.Reread)
	}
	p("namespace: %.0f operations/s\n", r.MetaOpsPerSec)
	names := make([]string, 0, len(r.Ops))
	for n := range r.Ops {
		names = append(names, n)
	}
	slices.Sort(names)
	p("  %-8s %10s %8s %10s %10s %9s\n", "op", "count", "errors", "p50", "p99", "seconds")
	for _, n := range names {
		s := r.Ops[n]
		p("  %-8s %10d %8d %10s %10s %9.2f\n", n, s.Count, s.Errors, Dur(s.P50), Dur(s.P99), s.Seconds)
	}
	if r.Repeats > 0 {
		p("  repeated: %d lookups and stats of files their client had looked up before, %.2f s (%.0f%% of the time inside operations); p90 %s after the previous\n",
			r.Repeats, r.RepeatSeconds, 100*r.RepeatSeconds/max(r.WaitSeconds, 1e-9), Dur(r.RepeatGapP90))
	}
	p("concurrency: %.1f operations in flight on average, %d at most\n", r.MeanInFlight, r.PeakInFlight)
	p("waiting on storage: %.1f s of %.1f s of stream time (%.0f%%); think time between operations p50 %s\n",
		r.IOSeconds, r.StreamSeconds, 100*r.IOFraction, Dur(r.ThinkP50))
	if r.Dirs > 0 {
		p("directories: %d; files touched per directory p50 %d, max %d\n", r.Dirs, r.FanOutMedian, r.FanOutMax)
	}
	if len(r.Hot) > 0 {
		p("hot files (the busiest 10%% moved %.0f%% of the bytes):\n", 100*r.HotShare)
		for _, h := range r.Hot {
			name := h.Path
			if name == "" {
				name = fmt.Sprintf("inode %d", h.Ino)
			}
			p("  %10s %5d opens  %s\n", Size(h.Bytes), h.Opens, name)
		}
	}
}

// Size formats a byte count with a binary unit.
func Size(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	v := float64(n)
	i := -1
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d%ciB", int64(v), units[i])
	}
	return fmt.Sprintf("%.1f%ciB", v, units[i])
}

// Dur formats nanoseconds.
func Dur(ns int64) string {
	switch {
	case ns < 1000:
		return fmt.Sprintf("%dns", ns)
	case ns < 1000_000:
		return fmt.Sprintf("%.1fus", float64(ns)/1e3)
	case ns < 1000_000_000:
		return fmt.Sprintf("%.1fms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.2fs", float64(ns)/1e9)
}
