// Package fsx is Sluice's randomized data-integrity exerciser, in the
// spirit of fsx and xfstests: it runs a random sequence of file operations
// (writes and reads at random offsets and sizes, truncates up and down,
// syncs, close and re-open, mmap reads and writes with msync,
// copy_file_range, O_DIRECT reads) on a few files of a Target, keeps an
// in-memory reference copy of every file, and checks every byte every read
// returns against it.
//
// The sequence depends only on the seed and the configuration, never on
// what the target answers (the reference decides sizes), so a failure is
// replayed exactly by running the same seed again (Config.Ops set to the
// failing operation's number + 1 stops right after it). A failure reports
// the seed, the operation, the first wrong byte, which earlier write the
// wrong bytes came from when one matches, and the last operations.
//
// Targets: Dir (any mounted path: a Sluice FUSE mount, or a local
// directory as a control) and Client (the Go client library).
package fsx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// File is one open file of a target. Every method has the meaning of its
// POSIX counterpart; ReadAt returns io.EOF (or a short count) at the end.
type File interface {
	WriteAt(p []byte, off int64) (int, error)
	ReadAt(p []byte, off int64) (int, error)
	Truncate(size int64) error
	Sync() error
	Datasync() error
	Size() (int64, error)
	Close() error
}

// Target is the file system under test.
type Target interface {
	// Open opens name read-write, creating it empty if it does not exist.
	Open(name string) (File, error)
	// Name describes the target in reports.
	Name() string
}

// Limiter is a Target that turns off operations it does not support
// (Config's NoMmap, NoCopyRange, NoDirect) before a run.
type Limiter interface {
	Limit(*Config)
}

// Lister is a Target that can list its files with their sizes, as a
// directory listing with attributes does (ls -l): each stat operation then
// also checks every file's listed size, which must be the model's, as the
// file's own stat is (on a FUSE mount the kernel caches what a listing
// says). Listing does not draw from the operation sequence.
type Lister interface {
	List() (map[string]int64, error)
}

// Optional operations a File may support; the exerciser uses those the
// target's files have (and that Config does not turn off).
type (
	// Mmapper writes and reads through a shared mapping; MmapWrite
	// returns once msync(MS_SYNC) has. Both need off+len(p) <= size.
	Mmapper interface {
		MmapWrite(p []byte, off int64) error
		MmapRead(p []byte, off int64) error
	}
	// CopyRanger copies n bytes from src at srcOff to this file at off,
	// like copy_file_range(2); src is a File of the same target.
	CopyRanger interface {
		CopyRange(src File, srcOff, off int64, n int) (int, error)
	}
	// DirectReader reads with O_DIRECT (off and len(p) multiples of 4096).
	DirectReader interface {
		DirectRead(p []byte, off int64) (int, error)
	}
	// Allocator is fallocate(2) in one of the modes AllocMode names, on
	// the n bytes at off.
	Allocator interface {
		Allocate(mode AllocMode, off, n int64) error
	}
	// Seeker is lseek(2)'s SEEK_DATA and SEEK_HOLE: the first byte at or
	// after off that may hold data, the first hole's (the end counts as
	// one); io.EOF where lseek answers ENXIO. Each stat walks the file's
	// data and holes with them (drawing nothing from the sequence).
	Seeker interface {
		SeekData(off int64) (int64, error)
		SeekHole(off int64) (int64, error)
	}
)

// AllocMode is an fallocate(2) mode the exerciser draws.
type AllocMode uint8

const (
	AllocExtend   AllocMode = iota // no flags: the file grows to off+n if shorter
	AllocKeepSize                  // FALLOC_FL_KEEP_SIZE: nothing visible changes
	AllocPunch                     // FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE: zeros within the size
	AllocZero                      // FALLOC_FL_ZERO_RANGE: zeros, the file grows to off+n if shorter
	AllocZeroKeep                  // FALLOC_FL_ZERO_RANGE|FALLOC_FL_KEEP_SIZE: zeros within the size
	numAllocModes
)

var allocNames = [...]string{"extend", "keep-size", "punch-hole", "zero-range", "zero-range keep-size"}

func (m AllocMode) String() string {
	if int(m) < len(allocNames) {
		return allocNames[m]
	}
	return fmt.Sprintf("mode(%d)", m)
}

// Config says what to run. The zero value of a field means its default.
type Config struct {
	Seed    uint64
	Ops     int   // operations to run (default 10,000)
	Files   int   // files written at once (default 3)
	MaxSize int64 // largest file size (default 16 MiB)
	MaxIO   int   // largest write, read or copy (default 4 MiB)
	// Boundaries are sizes whose multiples offsets and lengths are drawn
	// near (default 4 KiB, 64 KiB and 1 MiB: pages, checksum blocks,
	// stripes); put the target's stripe size here.
	Boundaries []int64
	// NoMmap, NoCopyRange, NoDirect, NoAllocate turn off optional
	// operations the target has.
	NoMmap, NoCopyRange, NoDirect, NoAllocate bool
	// VerifyEvery reads every file whole after this many operations
	// (default 500; negative: only at the end).
	VerifyEvery int
	History     int       // operations shown in a failure report (default 40)
	Log         io.Writer // if set, every operation is written to it
	// Progress, if set, gets a line of Stats every ProgressEvery
	// operations (default 10,000).
	Progress      io.Writer
	ProgressEvery int
	// Prefix is put before the file names (f0, f1, ...).
	Prefix string
}

func (c *Config) defaults() {
	if c.Ops <= 0 {
		c.Ops = 10000
	}
	if c.Files <= 0 {
		c.Files = 3
	}
	if c.MaxSize <= 0 {
		c.MaxSize = 16 << 20
	}
	if c.MaxIO <= 0 {
		c.MaxIO = 4 << 20
	}
	if len(c.Boundaries) == 0 {
		c.Boundaries = []int64{4 << 10, 64 << 10, 1 << 20}
	}
	if c.VerifyEvery == 0 {
		c.VerifyEvery = 500
	}
	if c.History <= 0 {
		c.History = 40
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 10000
	}
}

// Kind is an operation's kind.
type Kind uint8

const (
	OpWrite Kind = iota
	OpRead
	OpTruncate
	OpSync
	OpDatasync
	OpReopen
	OpMmapWrite
	OpMmapRead
	OpCopyRange
	OpDirectRead
	OpStat
	OpVerify
	OpAllocate
	numKinds
)

var kindNames = [...]string{"write", "read", "truncate", "fsync", "fdatasync", "reopen", "mmap-write", "mmap-read", "copy_file_range", "direct-read", "stat", "verify", "fallocate"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Op is one operation of a run.
type Op struct {
	N      int // its number in the run, from 0
	Kind   Kind
	File   int
	Off    int64
	Len    int
	Src    int   // copy_file_range: source file
	SrcOff int64 // copy_file_range: source offset
	Size   int64 // truncate: the new size
	Alloc  AllocMode
}

func (o Op) String() string {
	switch o.Kind {
	case OpWrite, OpRead, OpMmapWrite, OpMmapRead, OpDirectRead:
		return fmt.Sprintf("#%d %s f%d [%d, +%d)", o.N, o.Kind, o.File, o.Off, o.Len)
	case OpTruncate:
		return fmt.Sprintf("#%d %s f%d to %d", o.N, o.Kind, o.File, o.Size)
	case OpCopyRange:
		return fmt.Sprintf("#%d %s f%d [%d, +%d) -> f%d at %d", o.N, o.Kind, o.Src, o.SrcOff, o.Len, o.File, o.Off)
	case OpAllocate:
		return fmt.Sprintf("#%d %s %s f%d [%d, +%d)", o.N, o.Kind, o.Alloc, o.File, o.Off, o.Len)
	default:
		return fmt.Sprintf("#%d %s f%d", o.N, o.Kind, o.File)
	}
}

// Stats counts what a run did.
type Stats struct {
	Ops          int
	ByKind       [numKinds]int
	BytesWritten int64
	BytesRead    int64
	Seeks        int // SEEK_DATA and SEEK_HOLE asked (Seeker)
	Holes        int // holes before a file's end that SEEK_HOLE found
	Elapsed      time.Duration
}

func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d ops in %v (%.0f ops/s), %d MiB written, %d MiB read-checked:", s.Ops, s.Elapsed.Round(time.Millisecond),
		float64(s.Ops)/max(s.Elapsed.Seconds(), 1e-9), s.BytesWritten>>20, s.BytesRead>>20)
	for k, n := range s.ByKind {
		if n > 0 {
			fmt.Fprintf(&b, " %s %d", Kind(k), n)
		}
	}
	if s.Seeks > 0 {
		fmt.Fprintf(&b, " (seeks %d, holes found %d)", s.Seeks, s.Holes)
	}
	return b.String()
}

// Failure is the error of a run that found wrong data or a failed
// operation.
type Failure struct {
	Seed    uint64
	Op      Op
	Target  string
	Detail  string
	History []Op
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fsx: %s: seed %d, operation %v: %s\n", f.Target, f.Seed, f.Op, f.Detail)
	fmt.Fprintf(&b, "replay: the same seed and configuration with ops = %d stops right after it\n", f.Op.N+1)
	fmt.Fprintf(&b, "last %d operations:\n", len(f.History))
	for _, o := range f.History {
		fmt.Fprintf(&b, "  %v\n", o)
	}
	return b.String()
}

// Run runs cfg against t and returns what it did; the error is a *Failure
// when the target misbehaved, or ctx's error.
func Run(ctx context.Context, t Target, cfg Config) (Stats, error) {
	if l, ok := t.(Limiter); ok {
		l.Limit(&cfg)
	}
	cfg.defaults()
	r := &runner{cfg: cfg, t: t, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)), start: time.Now()}
	defer r.closeAll()
	r.files = make([]File, cfg.Files)
	r.model = make([][]byte, cfg.Files)
	for i := range r.files {
		f, err := t.Open(r.name(i))
		if err != nil {
			return r.stats, r.fail(Op{N: -1, Kind: OpReopen, File: i}, "open: %v", err)
		}
		// A file left by an earlier run starts empty.
		if err := f.Truncate(0); err != nil {
			f.Close()
			return r.stats, r.fail(Op{N: -1, Kind: OpTruncate, File: i}, "truncate to 0: %v", err)
		}
		r.files[i] = f
	}
	for n := range cfg.Ops {
		if err := ctx.Err(); err != nil {
			return r.finish(), err
		}
		op := r.next(n)
		if cfg.Log != nil {
			fmt.Fprintln(cfg.Log, op)
		}
		r.remember(op)
		if err := r.do(op); err != nil {
			if ctx.Err() != nil {
				// Stopped (Ctrl-C): a target that uses ctx fails the
				// operation in progress; that is no finding.
				return r.finish(), ctx.Err()
			}
			return r.finish(), err
		}
		r.stats.Ops++
		r.stats.ByKind[op.Kind]++
		if cfg.Progress != nil && (n+1)%cfg.ProgressEvery == 0 {
			fmt.Fprintf(cfg.Progress, "fsx: seed %d: %v\n", cfg.Seed, r.finish())
		}
		if cfg.VerifyEvery > 0 && (n+1)%cfg.VerifyEvery == 0 {
			for i := range r.files {
				v := Op{N: n, Kind: OpVerify, File: i}
				if err := r.verify(v); err != nil {
					return r.finish(), err
				}
			}
		}
	}
	for i := range r.files {
		if err := r.verify(Op{N: cfg.Ops, Kind: OpVerify, File: i}); err != nil {
			return r.finish(), err
		}
	}
	// What was written must also be there after closing and re-opening.
	for i := range r.files {
		if err := r.do(Op{N: cfg.Ops, Kind: OpReopen, File: i}); err != nil {
			return r.finish(), err
		}
		if err := r.verify(Op{N: cfg.Ops, Kind: OpVerify, File: i}); err != nil {
			return r.finish(), err
		}
	}
	return r.finish(), nil
}

type runner struct {
	cfg     Config
	t       Target
	rng     *rand.Rand
	files   []File
	model   [][]byte
	history []Op
	stats   Stats
	start   time.Time
	buf     []byte
}

func (r *runner) name(i int) string { return fmt.Sprintf("%sf%d", r.cfg.Prefix, i) }

func (r *runner) finish() Stats {
	r.stats.Elapsed = time.Since(r.start)
	return r.stats
}

func (r *runner) closeAll() {
	for _, f := range r.files {
		if f != nil {
			f.Close()
		}
	}
}

func (r *runner) remember(op Op) {
	if len(r.history) == r.cfg.History {
		copy(r.history, r.history[1:])
		r.history = r.history[:len(r.history)-1]
	}
	r.history = append(r.history, op)
}

func (r *runner) fail(op Op, format string, args ...any) error {
	return &Failure{Seed: r.cfg.Seed, Op: op, Target: r.t.Name(), Detail: fmt.Sprintf(format, args...), History: append([]Op(nil), r.history...)}
}

// data returns the bytes operation n writes: a function of the seed and n
// only, so that a report can tell which write left the bytes it found.
func (r *runner) data(n int, length int) []byte {
	if cap(r.buf) < length {
		r.buf = make([]byte, length)
	}
	b := r.buf[:length]
	fill(b, r.cfg.Seed, n)
	return b
}

func fill(b []byte, seed uint64, n int) {
	g := rand.NewPCG(seed^0xda7a, uint64(n))
	for i := 0; i < len(b); i += 8 {
		v := g.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

// next draws operation n. It looks only at the reference, so the sequence
// is the same on every target.
func (r *runner) next(n int) Op {
	op := Op{N: n, File: r.rng.IntN(len(r.files))}
	size := int64(len(r.model[op.File]))
	_, canMmap := r.files[op.File].(Mmapper)
	canMmap = canMmap && !r.cfg.NoMmap
	_, canCopy := r.files[op.File].(CopyRanger)
	canCopy = canCopy && !r.cfg.NoCopyRange && len(r.files) > 1
	_, canDirect := r.files[op.File].(DirectReader)
	canDirect = canDirect && !r.cfg.NoDirect
	_, canAlloc := r.files[op.File].(Allocator)
	canAlloc = canAlloc && !r.cfg.NoAllocate
	for {
		p := r.rng.IntN(100)
		switch {
		case p < 34:
			op.Kind = OpWrite
			op.Off = r.offset(size)
			op.Len = r.length(op.Off)
		case p < 58:
			op.Kind = OpRead
			op.Off = r.offset(size)
			op.Len = r.length(op.Off)
		case p < 64 || p < 68 && !canAlloc:
			// (A target without fallocate draws what it drew before
			// the operation existed: its seeds replay as they did.)
			op.Kind = OpTruncate
			op.Size = r.truncSize(size)
		case p < 68:
			op.Kind = OpAllocate
			op.Alloc = AllocMode(r.rng.IntN(int(numAllocModes)))
			op.Off = r.offset(size)
			op.Len = r.length(op.Off)
		case p < 71:
			op.Kind = OpSync
		case p < 73:
			op.Kind = OpDatasync
		case p < 77:
			op.Kind = OpReopen
		case p < 80:
			op.Kind = OpStat
		case p < 85:
			if !canMmap || size == 0 {
				continue
			}
			op.Kind = OpMmapWrite
			op.Off, op.Len = r.inside(size)
		case p < 89:
			if !canMmap || size == 0 {
				continue
			}
			op.Kind = OpMmapRead
			op.Off, op.Len = r.inside(size)
		case p < 95:
			if !canCopy {
				continue
			}
			op.Src = (op.File + 1 + r.rng.IntN(len(r.files)-1)) % len(r.files)
			ssize := int64(len(r.model[op.Src]))
			if ssize == 0 {
				continue
			}
			op.Kind = OpCopyRange
			op.SrcOff, op.Len = r.inside(ssize)
			op.Off = r.offset(size)
			op.Len = int(min(int64(op.Len), r.cfg.MaxSize-op.Off))
			if op.Len <= 0 {
				continue
			}
		default:
			if !canDirect {
				continue
			}
			op.Kind = OpDirectRead
			op.Off = r.offset(size) &^ 4095
			op.Len = max(4096, r.length(op.Off)&^4095)
		}
		return op
	}
}

// offset draws a write or read offset: anywhere in the file, near a
// boundary, at or just past the end, or far past it (a hole).
func (r *runner) offset(size int64) int64 {
	var off int64
	switch p := r.rng.IntN(10); {
	case p < 4:
		off = r.rng.Int64N(size + 1)
	case p < 7:
		b := r.cfg.Boundaries[r.rng.IntN(len(r.cfg.Boundaries))]
		k := r.rng.Int64N(max(1, (size+b)/b) + 1)
		off = k*b + r.rng.Int64N(33) - 16
	case p < 9:
		off = size + r.rng.Int64N(33) - 8
	default:
		off = size + r.rng.Int64N(r.cfg.MaxSize/4+1)
	}
	return min(max(off, 0), r.cfg.MaxSize-1)
}

// length draws a length from 1 to MaxIO, spread evenly over the orders of
// magnitude, and sometimes a multiple of a boundary plus or minus a little.
func (r *runner) length(off int64) int {
	var n int
	if r.rng.IntN(4) == 0 {
		b := r.cfg.Boundaries[r.rng.IntN(len(r.cfg.Boundaries))]
		n = int(b*(1+r.rng.Int64N(4))) + r.rng.IntN(5) - 2
	} else {
		n = int(math.Exp(r.rng.Float64() * math.Log(float64(r.cfg.MaxIO))))
	}
	n = min(max(n, 1), r.cfg.MaxIO)
	return int(min(int64(n), r.cfg.MaxSize-off))
}

// inside draws a range inside a file of the given size (> 0).
func (r *runner) inside(size int64) (int64, int) {
	off := r.rng.Int64N(size)
	if r.rng.IntN(3) == 0 {
		b := r.cfg.Boundaries[r.rng.IntN(len(r.cfg.Boundaries))]
		off = min(size-1, max(0, (off/b)*b+r.rng.Int64N(9)-4))
	}
	n := r.length(off)
	return off, int(min(int64(n), size-off))
}

func (r *runner) truncSize(size int64) int64 {
	var s int64
	switch p := r.rng.IntN(10); {
	case p < 5: // down
		s = r.rng.Int64N(size + 1)
	case p < 7: // near a boundary
		b := r.cfg.Boundaries[r.rng.IntN(len(r.cfg.Boundaries))]
		s = (r.rng.Int64N(size+1)/b)*b + r.rng.Int64N(5) - 2
	case p < 8:
		s = 0
	default: // up
		s = size + r.rng.Int64N(2<<20)
	}
	return min(max(s, 0), r.cfg.MaxSize)
}

func (r *runner) do(op Op) error {
	f := r.files[op.File]
	m := &r.model[op.File]
	switch op.Kind {
	case OpWrite, OpMmapWrite:
		data := r.data(op.N, op.Len)
		var err error
		if op.Kind == OpWrite {
			var n int
			n, err = f.WriteAt(data, op.Off)
			if err == nil && n != len(data) {
				err = fmt.Errorf("short write: %d of %d bytes", n, len(data))
			}
		} else {
			err = f.(Mmapper).MmapWrite(data, op.Off)
		}
		if err != nil {
			return r.fail(op, "%v", err)
		}
		writeModel(m, op.Off, data)
		r.stats.BytesWritten += int64(len(data))
	case OpRead, OpMmapRead, OpDirectRead:
		return r.read(op, f, *m)
	case OpTruncate:
		if err := f.Truncate(op.Size); err != nil {
			return r.fail(op, "%v", err)
		}
		truncModel(m, op.Size)
	case OpSync:
		if err := f.Sync(); err != nil {
			return r.fail(op, "%v", err)
		}
	case OpDatasync:
		if err := f.Datasync(); err != nil {
			return r.fail(op, "%v", err)
		}
	case OpReopen:
		err := f.Close()
		r.files[op.File] = nil
		if err != nil {
			return r.fail(op, "close: %v", err)
		}
		nf, err := r.t.Open(r.name(op.File))
		if err != nil {
			return r.fail(op, "open: %v", err)
		}
		r.files[op.File] = nf
	case OpStat:
		size, err := f.Size()
		if err != nil {
			return r.fail(op, "%v", err)
		}
		if size != int64(len(*m)) {
			return r.fail(op, "size %d, want %d", size, len(*m))
		}
		if sk, ok := f.(Seeker); ok {
			if err := r.walkHoles(op, sk, *m); err != nil {
				return err
			}
		}
		if l, ok := r.t.(Lister); ok {
			sizes, err := l.List()
			if err != nil {
				return r.fail(op, "list: %v", err)
			}
			for i := range r.files {
				if got, want := sizes[r.name(i)], int64(len(r.model[i])); got != want {
					return r.fail(op, "f%d listed with size %d, want %d", i, got, want)
				}
			}
		}
	case OpCopyRange:
		src := r.files[op.Src]
		done := 0
		for done < op.Len {
			n, err := f.(CopyRanger).CopyRange(src, op.SrcOff+int64(done), op.Off+int64(done), op.Len-done)
			if err != nil {
				return r.fail(op, "after %d bytes: %v", done, err)
			}
			if n == 0 {
				return r.fail(op, "copied %d of %d bytes, then 0", done, op.Len)
			}
			done += n
		}
		data := append([]byte(nil), r.model[op.Src][op.SrcOff:op.SrcOff+int64(op.Len)]...)
		writeModel(m, op.Off, data)
		r.stats.BytesWritten += int64(op.Len)
	case OpAllocate:
		if err := f.(Allocator).Allocate(op.Alloc, op.Off, int64(op.Len)); err != nil {
			return r.fail(op, "%v", err)
		}
		allocModel(m, op.Alloc, op.Off, int64(op.Len))
	case OpVerify:
		return r.verify(op)
	}
	return nil
}

// maxSeekWalk bounds the seeks of one walk over a file's data and holes.
const maxSeekWalk = 64

// walkHoles walks the file's data and holes from its start with
// SEEK_DATA and SEEK_HOLE and checks each answer against the model: data
// may be reported over zeros, never a hole over a nonzero byte.
func (r *runner) walkHoles(op Op, sk Seeker, model []byte) error {
	size := int64(len(model))
	zeros := func(from, to int64) int64 { // the first nonzero byte in [from, to), or -1
		if k := bytes.IndexFunc(model[from:to], func(c rune) bool { return c != 0 }); k >= 0 {
			return from + int64(k)
		}
		return -1
	}
	at := int64(0)
	for range maxSeekWalk {
		d, err := sk.SeekData(at)
		r.stats.Seeks++
		if errors.Is(err, io.EOF) {
			if k := zeros(min(at, size), size); k >= 0 {
				return r.fail(op, "SEEK_DATA from %d: none, yet byte %d is %#x", at, k, model[k])
			}
			break
		}
		if err != nil {
			return r.fail(op, "SEEK_DATA from %d: %v", at, err)
		}
		if d < at || d >= size {
			return r.fail(op, "SEEK_DATA from %d: %d, outside [%d, %d)", at, d, at, size)
		}
		if k := zeros(at, d); k >= 0 {
			return r.fail(op, "SEEK_DATA from %d: %d, yet byte %d is %#x", at, d, k, model[k])
		}
		h, err := sk.SeekHole(d)
		r.stats.Seeks++
		if err != nil {
			return r.fail(op, "SEEK_HOLE from %d: %v", d, err)
		}
		if h <= d || h > size {
			return r.fail(op, "SEEK_HOLE from %d (data): %d, outside (%d, %d]", d, h, d, size)
		}
		if h < size && model[h] != 0 {
			return r.fail(op, "SEEK_HOLE from %d: %d, yet byte %d is %#x", d, h, h, model[h])
		}
		if h == size {
			break
		}
		r.stats.Holes++
		at = h
	}
	if _, err := sk.SeekHole(size); !errors.Is(err, io.EOF) {
		return r.fail(op, "SEEK_HOLE at the end (%d): %v, want ENXIO", size, err)
	}
	r.stats.Seeks++
	return nil
}

// allocModel applies fallocate mode to the n bytes at off of the model.
func allocModel(m *[]byte, mode AllocMode, off, n int64) {
	size := int64(len(*m))
	switch mode {
	case AllocPunch, AllocZero, AllocZeroKeep:
		if off < size {
			clear((*m)[off:min(size, off+n)])
		}
	}
	switch mode {
	case AllocExtend, AllocZero:
		if off+n > size {
			truncModel(m, off+n)
		}
	}
}

func writeModel(m *[]byte, off int64, data []byte) {
	if end := off + int64(len(data)); end > int64(len(*m)) {
		truncModel(m, end)
	}
	copy((*m)[off:], data)
}

func truncModel(m *[]byte, size int64) {
	if size <= int64(len(*m)) {
		*m = (*m)[:size]
		return
	}
	if size <= int64(cap(*m)) {
		old := len(*m)
		*m = (*m)[:size]
		clear((*m)[old:])
		return
	}
	nm := make([]byte, size, max(size, int64(cap(*m))*5/4))
	copy(nm, *m)
	*m = nm
}

func (r *runner) read(op Op, f File, model []byte) error {
	got := make([]byte, op.Len)
	var n int
	var err error
	switch op.Kind {
	case OpRead:
		n, err = readFull(f, got, op.Off)
	case OpMmapRead:
		err = f.(Mmapper).MmapRead(got, op.Off)
		n = len(got)
	case OpDirectRead:
		n, err = f.(DirectReader).DirectRead(got, op.Off)
	}
	if err != nil {
		return r.fail(op, "%v", err)
	}
	want := []byte{}
	if op.Off < int64(len(model)) {
		want = model[op.Off:min(int64(len(model)), op.Off+int64(op.Len))]
	}
	r.stats.BytesRead += int64(n)
	return r.compare(op, got[:n], want)
}

// readFull reads until p is full or the end of the file.
func readFull(f File, p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		n, err := f.ReadAt(p[done:], off+int64(done))
		done += n
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return done, nil
		}
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// verify reads a whole file and compares it and its size.
func (r *runner) verify(op Op) error {
	f := r.files[op.File]
	model := r.model[op.File]
	size, err := f.Size()
	if err != nil {
		return r.fail(op, "stat: %v", err)
	}
	if size != int64(len(model)) {
		return r.fail(op, "size %d, want %d", size, len(model))
	}
	got := make([]byte, len(model)+1)
	n, err := readFull(f, got, 0)
	if err != nil {
		return r.fail(op, "read: %v", err)
	}
	r.stats.BytesRead += int64(n)
	return r.compare(op, got[:n], model)
}

// compare checks got against want; off is where got starts in the file.
func (r *runner) compare(op Op, got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	off := op.Off
	if op.Kind == OpVerify {
		off = 0
	}
	i := 0
	for i < min(len(got), len(want)) && got[i] == want[i] {
		i++
	}
	if i == min(len(got), len(want)) {
		return r.fail(op, "read %d bytes, want %d (the bytes read are right)", len(got), len(want))
	}
	j := i
	for j < min(len(got), len(want)) && got[j] != want[j] {
		j++
	}
	return r.fail(op, "%d bytes wrong from file offset %d (got %x..., want %x...)%s; read %d bytes, want %d",
		j-i, off+int64(i), got[i:min(j, i+8)], want[i:min(j, i+8)], r.origin(op.File, off+int64(i), got[i:j]), len(got), len(want))
}

// origin says which remembered write (or zeros) the wrong bytes at off
// came from, if any.
func (r *runner) origin(file int, off int64, wrong []byte) string {
	if len(wrong) > 64 {
		wrong = wrong[:64]
	}
	if bytes.Count(wrong, []byte{0}) == len(wrong) {
		return " (they are zeros)"
	}
	for k := len(r.history) - 1; k >= 0; k-- {
		o := r.history[k]
		if (o.Kind != OpWrite && o.Kind != OpMmapWrite) || o.File != file || off < o.Off || off+int64(len(wrong)) > o.Off+int64(o.Len) {
			continue
		}
		d := make([]byte, o.Len)
		fill(d, r.cfg.Seed, o.N)
		if bytes.Equal(d[off-o.Off:off-o.Off+int64(len(wrong))], wrong) {
			return fmt.Sprintf(" (they are what operation %v wrote)", o)
		}
	}
	return ""
}
