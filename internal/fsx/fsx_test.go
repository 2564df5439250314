package fsx

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// The exerciser against a local directory finds nothing wrong, with every
// optional operation in use.
func TestLocalDirPasses(t *testing.T) {
	plan, err := PlanFromEnv(4000, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range plan.Seeds {
		st, err := Run(context.Background(), Dir(t.TempDir()), Config{Seed: seed, Ops: plan.Ops, MaxSize: 4 << 20, MaxIO: 1 << 20})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		t.Logf("seed %d: %v", seed, st)
		for _, k := range []Kind{OpWrite, OpRead, OpTruncate, OpMmapWrite, OpMmapRead, OpCopyRange, OpDirectRead, OpReopen, OpSync} {
			if st.ByKind[k] == 0 {
				t.Errorf("seed %d: no %v operation ran", seed, k)
			}
		}
	}
}

// The same seed draws the same operations, whatever the target.
func TestReplayIsExact(t *testing.T) {
	var a, b bytes.Buffer
	if _, err := Run(context.Background(), Dir(t.TempDir()), Config{Seed: 42, Ops: 500, MaxSize: 1 << 20, Log: &a}); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Dir(t.TempDir()), Config{Seed: 42, Ops: 500, MaxSize: 1 << 20, Log: &b}); err != nil {
		t.Fatal(err)
	}
	if a.Len() == 0 || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("two runs of seed 42 differ (or logged nothing: %d bytes)", a.Len())
	}
}

// staleTarget is a broken file system: a truncate that shrinks a file
// keeps the bytes past the cut, which come back when the file grows.
type staleTarget struct {
	Dir
	sizes map[string]*int64 // the sizes the application sees, by name
}

func (s staleTarget) Open(name string) (File, error) {
	f, err := s.Dir.Open(name)
	if err != nil {
		return nil, err
	}
	if s.sizes[name] == nil {
		s.sizes[name] = new(int64)
	}
	return &staleFile{File: f, size: s.sizes[name]}, nil
}

type staleFile struct {
	File
	size *int64
}

func (s *staleFile) Truncate(size int64) error {
	phys, err := s.File.Size()
	if err != nil {
		return err
	}
	if size > phys {
		if err := s.File.Truncate(size); err != nil {
			return err
		}
	}
	*s.size = size
	return nil
}

func (s *staleFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := s.File.WriteAt(p, off)
	*s.size = max(*s.size, off+int64(n))
	return n, err
}

func (s *staleFile) Size() (int64, error) { return *s.size, nil }

func (s *staleFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= *s.size {
		return 0, nil
	}
	return s.File.ReadAt(p[:min(int64(len(p)), *s.size-off)], off)
}

// droppingTarget loses every 97th write without an error.
type droppingTarget struct {
	Dir
	writes *int
}

func (d droppingTarget) Open(name string) (File, error) {
	f, err := d.Dir.Open(name)
	if err != nil {
		return nil, err
	}
	return &droppingFile{File: f, writes: d.writes}, nil
}

type droppingFile struct {
	File
	writes *int
}

func (d *droppingFile) WriteAt(p []byte, off int64) (int, error) {
	*d.writes++
	if *d.writes%97 == 0 {
		if fi, _ := d.File.Size(); fi < off+int64(len(p)) {
			d.File.Truncate(off + int64(len(p))) // the size is right, the data is not
		}
		return len(p), nil
	}
	return d.File.WriteAt(p, off)
}

// The exerciser catches the bug class of issue 12 and lost writes, and
// its report names the seed, the operation and how to replay it; a replay
// with that many operations fails on the same operation.
func TestCatchesBrokenTargets(t *testing.T) {
	for name, target := range map[string]Target{
		"stale truncate": staleTarget{Dir(t.TempDir()), map[string]*int64{}},
		"lost write":     droppingTarget{Dir(t.TempDir()), new(int)},
	} {
		cfg := Config{Seed: 7, Ops: 20000, MaxSize: 1 << 20, MaxIO: 256 << 10, NoMmap: true, NoCopyRange: true, NoDirect: true}
		_, err := Run(context.Background(), target, cfg)
		var f *Failure
		if !errors.As(err, &f) {
			t.Fatalf("%s: Run = %v, want a Failure", name, err)
		}
		msg := f.Error()
		t.Logf("%s: %s", name, strings.SplitN(msg, "\n", 2)[0])
		if f.Seed != 7 || !strings.Contains(msg, "seed 7") || !strings.Contains(msg, "replay") || len(f.History) == 0 {
			t.Errorf("%s: report lacks seed, replay or history:\n%s", name, msg)
		}
		if name == "stale truncate" && !strings.Contains(f.Detail, "wrote") {
			t.Errorf("stale truncate: the report does not name the write the stale bytes came from: %s", f.Detail)
		}
		switch name {
		case "stale truncate":
			target = staleTarget{Dir(t.TempDir()), map[string]*int64{}}
		case "lost write":
			target = droppingTarget{Dir(t.TempDir()), new(int)}
		}
		cfg.Ops = f.Op.N + 1
		_, err = Run(context.Background(), target, cfg)
		var g *Failure
		if !errors.As(err, &g) || g.Op.N != f.Op.N {
			t.Errorf("%s: replay with %d ops: %v, want the failure at operation %d again", name, cfg.Ops, err, f.Op.N)
		}
	}
}

// noDataDir is a local directory whose files answer SEEK_DATA "none
// left" (ENXIO) always: a hole reported over data.
type noDataDir struct{ Dir }

type noDataFile struct{ *osFile }

func (d noDataDir) Open(name string) (File, error) {
	f, err := d.Dir.Open(name)
	if err != nil {
		return nil, err
	}
	return noDataFile{f.(*osFile)}, nil
}

func (noDataFile) SeekData(int64) (int64, error) { return 0, io.EOF }

// The walk over a file's data and holes runs on a local directory and
// finds a file system that reports a hole where data is.
func TestSeekWalk(t *testing.T) {
	st, err := Run(context.Background(), Dir(t.TempDir()), Config{Seed: 7, Ops: 2000, MaxSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if st.Seeks == 0 {
		t.Fatal("no seek was asked")
	}
	_, err = Run(context.Background(), noDataDir{Dir(t.TempDir())}, Config{Seed: 7, Ops: 2000, MaxSize: 1 << 20, NoCopyRange: true})
	var fail *Failure
	if !errors.As(err, &fail) || !strings.Contains(fail.Detail, "SEEK_DATA") {
		t.Fatalf("a file system that hides data from SEEK_DATA passed: %v", err)
	}
}
