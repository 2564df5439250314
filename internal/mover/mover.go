package mover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pause"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Options configure a Mover.
type Options struct {
	Root     string // the tree passes walk (default "/")
	Limits   Limits // caps of one pass
	Parallel int    // archives and releases at once (default 4)
	DryRun   bool   // plan and report, move nothing
	Logger   *slog.Logger
	Now      func() time.Time
	// OnMove, if not nil, is called after each archive or release with
	// its error (nil: done), from several goroutines at once.
	OnMove func(a Action, err error)
}

// Report is what one pass found and did.
type Report struct {
	Dirs    int // walked
	Planned []Action
	Counts
}

// Totals are a Mover's counters since it was made (for metrics).
type Totals struct {
	Passes, Archived, ArchivedBytes, Released, ReleasedBytes, Failed int64
	LastFiles                                                        int64
	LastPass                                                         time.Duration
}

// Mover runs passes: walk the tree, read the policies and the files' HSM
// states, Plan, then archive and release through the client library.
type Mover struct {
	c *client.Client
	o Options

	mu   sync.Mutex
	skip map[uint64]bool // files whose release is not supported (inline bytes)

	passes, archived, archivedBytes, released, releasedBytes, failed, lastFiles, lastPass atomic.Int64
}

// New returns a Mover working through c.
func New(c *client.Client, o Options) *Mover {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Mover{c: c, o: o, skip: map[uint64]bool{}}
}

// Totals returns the counters.
func (m *Mover) Totals() Totals {
	return Totals{
		Passes: m.passes.Load(), Archived: m.archived.Load(), ArchivedBytes: m.archivedBytes.Load(),
		Released: m.released.Load(), ReleasedBytes: m.releasedBytes.Load(), Failed: m.failed.Load(),
		LastFiles: m.lastFiles.Load(), LastPass: time.Duration(m.lastPass.Load()),
	}
}

// Run runs a pass every interval until ctx ends, logging what each did.
func (m *Mover) Run(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		r, err := m.Pass(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			m.o.Logger.Warn("tier mover: pass failed", "err", err)
		case len(r.Planned) > 0:
			m.o.Logger.Info("tier mover: pass", "files", r.Files, "archived", r.Archived, "released", r.Released, "failed", r.Failed, "took", r.Took)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass walks the tree once and carries out what Plan decides.
func (m *Mover) Pass(ctx context.Context) (Report, error) {
	start := time.Now()
	var r Report
	ci, err := m.c.Cluster(ctx)
	if err != nil {
		return r, err
	}
	fills := Fills{}
	for _, t := range ci.Targets {
		fills[t.ID] = Fill{Capacity: t.Capacity, Used: t.Used}
	}
	chains := map[placement.ChainID][]placement.TargetID{}
	for _, ch := range ci.Chains {
		for _, rep := range ch.Replicas {
			chains[placement.ChainID(ch.ID)] = append(chains[placement.ChainID(ch.ID)], placement.TargetID(rep.Target))
		}
	}
	planner := NewPlanner(fills, m.o.Now(), m.o.Limits)
	if err := m.gather(ctx, &r, func(id placement.ChainID) []placement.TargetID { return chains[id] }, planner.Add); err != nil {
		return r, err
	}
	r.Planned = planner.Finish()
	if m.o.DryRun {
		r.Took = time.Since(start)
		return r, ctx.Err()
	}
	m.apply(ctx, &r)
	r.Took = time.Since(start)
	m.passes.Add(1)
	m.lastFiles.Store(int64(r.Files))
	m.lastPass.Store(int64(r.Took))
	host, _ := os.Hostname()
	rec := PassRecord{At: m.o.Now(), Host: host, Counts: r.Counts}
	if err := m.c.SetXattr(ctx, m.o.Root, StatusXattr, rec.Encode()); err != nil && ctx.Err() == nil {
		m.o.Logger.Warn("tier mover: recording the pass", "err", err)
	}
	return r, ctx.Err()
}

// gather walks the tree, carrying each directory's effective policy down,
// and gives add each regular file under a policy with its HSM state and
// the bytes its chunks hold on each target (replicas: a replicated
// chain's targets). It asks for the states of gatherBatch files at once
// and holds no more of the tree than that batch and the directories'
// policies.
func (m *Mover) gather(ctx context.Context, r *Report, replicas func(placement.ChainID) []placement.TargetID, add func(File)) error {
	root := path.Clean("/" + m.o.Root)
	eff := map[string]Policy{}
	// The root's inherited policy: the nearest ancestor's.
	var inherited Policy
	for _, d := range ancestors(root) {
		if p, ok, err := m.policyOf(ctx, d); err != nil {
			return err
		} else if ok {
			inherited = p
		}
	}
	pinMax := m.c.InlineMax()
	type candidate struct {
		path   string
		attr   *client.Attr
		policy Policy
	}
	var cands []candidate
	flush := func() error {
		if len(cands) == 0 {
			return nil
		}
		// The files' HSM states, many per request.
		inos := make([]uint64, len(cands))
		for i, cd := range cands {
			inos[i] = cd.attr.Ino
		}
		states, err := m.c.HsmStatesIno(ctx, inos)
		if err != nil {
			return err
		}
		for i, cd := range cands {
			a, state := cd.attr, states[i]
			if state == "" {
				continue // removed since the walk listed it
			}
			used := a.Mtime
			if a.Atime.After(used) {
				used = a.Atime
			}
			m.mu.Lock()
			pinned := m.skip[a.Ino] || a.Size <= pinMax
			m.mu.Unlock()
			r.Files++
			var on map[uint32]int64
			if state == "archived" && cd.policy.High > 0 {
				l, err := placementLayout(a.Layout)
				if err != nil {
					return fmt.Errorf("tier mover: %s: %w", cd.path, err)
				}
				on = TargetBytes(l, a.Size, replicas)
			}
			add(File{Path: cd.path, Ino: a.Ino, Size: a.Size, Mtime: a.Mtime, Used: used, State: state, Pinned: pinned, Policy: cd.policy, On: on})
		}
		cands = cands[:0]
		return nil
	}
	err := m.c.Walk(ctx, root, func(p string, fi *client.FileInfo, err error) error {
		if err != nil {
			if errs.CodeOf(err) == errs.NotFound {
				return nil // removed while walking
			}
			return err
		}
		parent := inherited
		if p != root {
			parent = eff[path.Dir(p)]
		}
		if fi.IsDir() {
			r.Dirs++
			pol := parent
			own, ok, err := m.policyOfIno(ctx, p, fi.Attr().Ino)
			if err != nil {
				return err
			}
			if ok {
				pol = own
			}
			eff[p] = pol
			return nil
		}
		if fi.Mode().IsRegular() && !parent.IsZero() {
			cands = append(cands, candidate{p, fi.Attr(), parent})
			if len(cands) >= gatherBatch {
				return flush()
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// gatherBatch is how many files gather asks the HSM states of at once
// (wire.MaxInos).
const gatherBatch = wire.MaxInos

// placementLayout converts a file's layout as the client library gives it.
func placementLayout(l client.Layout) (placement.Layout, error) {
	comps, err := client.PlacementComps(l.Components)
	if err != nil {
		return placement.Layout{}, err
	}
	out := placement.Layout{StripeSize: uint32(l.StripeSize), StripeCount: uint16(l.StripeCount), Replicas: uint8(l.Replicas), Data: l.Data, Comps: comps}
	for _, ch := range l.Chains {
		out.Chains = append(out.Chains, placement.ChainID(ch))
	}
	return out, nil
}

// policyOf reads directory d's own policy. A policy that does not parse
// is reported and ignored (the inherited one applies).
func (m *Mover) policyOf(ctx context.Context, d string) (Policy, bool, error) {
	return m.policyOfIno(ctx, d, 0)
}

// policyOfIno is policyOf of directory d, inode ino if known (not 0).
func (m *Mover) policyOfIno(ctx context.Context, d string, ino uint64) (Policy, bool, error) {
	var b []byte
	var err error
	if ino != 0 {
		b, err = m.c.GetXattrIno(ctx, ino, PolicyXattr)
	} else {
		b, err = m.c.GetXattr(ctx, d, PolicyXattr)
	}
	switch {
	case errs.CodeOf(err) == errs.NoData || errs.CodeOf(err) == errs.NotFound:
		return Policy{}, false, nil
	case err != nil:
		return Policy{}, false, err
	}
	p, err := ParsePolicy(b)
	if err != nil {
		m.o.Logger.Warn("tier mover: ignoring a bad policy", "dir", d, "err", err)
		return Policy{}, false, nil
	}
	return p, true, nil
}

// ancestors returns the directories above p, outermost first ("/" first).
func ancestors(p string) []string {
	var out []string
	for d := p; d != "/"; {
		d = path.Dir(d)
		out = append([]string{d}, out...)
	}
	return out
}

// apply carries out r.Planned.
func (m *Mover) apply(ctx context.Context, r *Report) {
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(m.o.Parallel)
	start := time.Now()
	// Each move starts no earlier than its kind's cap allows for the
	// moves of that kind started before it.
	archives := Pacer{Start: start, Rate: float64(m.o.Limits.ArchiveRate)}
	releases := Pacer{Start: start, Rate: m.o.Limits.ReleaseRate}
	for _, a := range r.Planned {
		pace, n := &archives, float64(a.File.Size)
		if a.Kind == Release {
			pace, n = &releases, 1
		}
		if d := time.Until(pace.Due()); d > 0 {
			_ = pause.For(ctx, d) // ctx's end shows below
		}
		pace.Add(n)
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			var err error
			switch a.Kind {
			case Archive:
				_, err = m.c.HsmArchive(ctx, a.File.Path, a.File.Policy.Backend)
			case Release:
				_, err = m.c.HsmRelease(ctx, a.File.Path)
				if errs.CodeOf(err) == errs.NotSupported {
					m.mu.Lock()
					m.skip[a.File.Ino] = true
					m.mu.Unlock()
				}
			}
			if m.o.OnMove != nil {
				m.o.OnMove(a, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.Failed++
				m.failed.Add(1)
				if !errors.Is(err, context.Canceled) {
					m.o.Logger.Warn(fmt.Sprintf("tier mover: %s failed", a.Kind), "path", a.File.Path, "err", err)
				}
				return nil
			}
			switch a.Kind {
			case Archive:
				r.Archived++
				r.ArchivedBytes += a.File.Size
				m.archived.Add(1)
				m.archivedBytes.Add(a.File.Size)
			case Release:
				r.Released++
				r.ReleasedBytes += a.File.Size
				m.released.Add(1)
				m.releasedBytes.Add(a.File.Size)
			}
			return nil
		})
	}
	g.Wait()
}
