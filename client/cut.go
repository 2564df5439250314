package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pause"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Cut generations (wire/cut.go) order a truncate that cuts a file's
// chunks against the writes other clients make to the file. A truncate
// holds a cut (OpCutBegin) while it cuts the chunks and sets the size; a
// flush commits its size only under the generation the File knew before
// the flush's data went to the targets. A refused commit means a cut ran
// since, maybe over the data: the flush waits for the cut to end and
// writes its data again (File.writeCommitted). Without this, a write
// whose data landed before the cut and whose commit came after the size
// change left the file at the write's end with zeros where its bytes
// were: an acknowledged write lost.

// errCutRefused: a flush's commit was refused because a cut began after
// its data was written; the flush writes the data again.
var errCutRefused = errors.New("client: a truncate cut the file since the data was written")

// cutKnown returns the newest cut generation of the file the File, or
// another File of its Client, knows.
func (f *File) cutKnown() uint64 {
	f.commit.mu.Lock()
	defer f.commit.mu.Unlock()
	f.commit.cut = max(f.commit.cut, f.c.cuts.get(f.ino))
	return f.commit.cut
}

// learnCut records cut generation gen, learnt from the metadata service.
func (f *File) learnCut(gen uint64) {
	f.commit.mu.Lock()
	f.learnCutLocked(gen)
	f.commit.mu.Unlock()
}

func (f *File) learnCutLocked(gen uint64) {
	f.commit.cut = max(f.commit.cut, gen)
	f.c.cuts.learn(f.ino, gen)
}

// cutGens is the newest cut generation a Client learnt of each file it
// wrote since another client cut it: a File opened later starts from it
// instead of having its first commit refused. A file missing from it
// (never cut, or forgotten) is generation 0.
type cutGens struct {
	mu sync.Mutex
	m  map[uint64]uint64
}

// maxCutGens bounds cutGens: past it the map starts again (a forgotten
// generation costs a refused commit and a write of the data again).
const maxCutGens = 1 << 16

func (g *cutGens) get(ino uint64) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[ino]
}

func (g *cutGens) learn(ino, gen uint64) {
	if gen == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil || len(g.m) >= maxCutGens {
		g.m = make(map[uint64]uint64)
	}
	g.m[ino] = max(g.m[ino], gen)
}

// cutPoll bounds the pause between two polls of a cut that holds a
// flush's commit off, or another truncate's cut that holds one off.
const cutPoll = 50 * time.Millisecond

// awaitCut waits until no cut of the file runs (the service takes over
// one held past wire.CutHold) and learns its generation.
func (f *File) awaitCut(ctx context.Context) error {
	wait := time.Millisecond
	for {
		var r wire.CutResp
		if err := f.c.metaCall(ctx, wire.OpCutGen, &wire.InoReq{Ino: f.ino}, &r); err != nil {
			return err
		}
		f.learnCut(r.Cut)
		if r.Cut&1 == 0 {
			return nil
		}
		if err := pause.For(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, cutPoll)
	}
}

// beginCut begins a cut of the file's chunks (OpCutBegin), waiting while
// another truncate's cut runs, and returns its generation and the file's
// attributes. errs.NotSupported from a service that knows no cut
// generations.
func (f *File) beginCut(ctx context.Context) (wire.CutResp, error) {
	wait := time.Millisecond
	for {
		var r wire.CutResp
		err := f.c.metaCall(ctx, wire.OpCutBegin, &wire.InoReq{Ino: f.ino}, &r)
		if errs.CodeOf(err) != errs.Busy {
			if err == nil {
				f.learnCut(r.Cut)
			}
			return r, err
		}
		if err := pause.For(ctx, wait); err != nil {
			return r, err
		}
		wait = min(2*wait, cutPoll)
	}
}

// endCut ends cut gen without a size change (OpCutEnd) and learns the
// generation after it: a truncate that failed, or that cut again after
// its size change. The error is the caller's to judge: errs.Busy if the
// cut was taken over meanwhile.
func (f *File) endCut(ctx context.Context, gen uint64) error {
	var r wire.CutResp
	err := f.c.metaCall(ctx, wire.OpCutEnd, &wire.CutEndReq{Ino: f.ino, Cut: gen}, &r)
	if err == nil {
		f.learnCut(r.Cut)
	}
	return err
}
