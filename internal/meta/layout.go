package meta

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

type targetInfo = placement.TargetInfo

// placeView is what placement needs to know of the cluster: the targets
// sorted by ID (Free is Capacity-Used, see Targets.List), the
// replicated chains, and the pools' members (nil without a PoolManager).
type placeView struct {
	targets []targetInfo
	chains  []placement.Chain
	pools   map[string][]placement.TargetID
}

func (s *Service) placeView(ctx context.Context) (placeView, error) {
	ts, err := s.targets.List(ctx)
	if err != nil {
		return placeView{}, fmt.Errorf("list storage targets: %w", err)
	}
	pv := placeView{targets: make([]targetInfo, len(ts))}
	var draining map[placement.TargetID]bool
	for i, t := range ts {
		// A draining target takes no new data: to placement it is down.
		pv.targets[i] = targetInfo{ID: t.ID, Healthy: t.Healthy && !t.Draining, Free: t.Capacity - t.Used}
		if t.Draining {
			if draining == nil {
				draining = make(map[placement.TargetID]bool)
			}
			draining[t.ID] = true
		}
	}
	slices.SortFunc(pv.targets, func(a, b targetInfo) int { return cmp.Compare(a.ID, b.ID) })
	if _, pv.chains, err = s.targets.Chains(ctx); err != nil {
		return placeView{}, fmt.Errorf("list chains: %w", err)
	}
	pv.chains = placement.AvoidTargets(pv.chains, draining)
	if pm, ok := s.targets.(PoolManager); ok {
		ps, err := pm.Pools(ctx)
		if err != nil {
			return placeView{}, fmt.Errorf("list pools: %w", err)
		}
		pv.pools = make(map[string][]placement.TargetID, len(ps))
		for _, p := range ps {
			pv.pools[p.Name] = p.Targets
		}
	}
	return pv, nil
}

// placeViewTTL bounds how long creates reuse one placement view while
// the cluster state it came from is unchanged: a target's health is also
// a function of the time since its node's last heartbeat.
const placeViewTTL = 100 * time.Millisecond

// stateVersioner is implemented by Targets that answer List, Chains and
// Pools from a cached state with a version that changes with it
// (cluster.Manager).
type stateVersioner interface{ StateVersion() uint64 }

// placeCache holds the last placement view built for a create. Building
// one (List, Chains, Pools: copies and sorts of the whole cluster state)
// was two fifths of a create's CPU in the metadata service.
type placeCache struct {
	mu  sync.Mutex
	pv  placeView
	ver uint64    // the Targets' StateVersion the view was built from
	at  time.Time // when it was built
	ok  bool
}

// currentPlaceView returns placeView(ctx), reusing the last one while the
// Targets' state version is unchanged and for at most placeViewTTL. The
// view is shared: callers must not modify it (fileLayout does not).
// Without a stateVersioner it builds a new view every time.
func (s *Service) currentPlaceView(ctx context.Context) (placeView, error) {
	sv, ok := s.targets.(stateVersioner)
	if !ok {
		return s.placeView(ctx)
	}
	ver, now := sv.StateVersion(), time.Now()
	c := &s.places
	c.mu.Lock()
	if c.ok && c.ver == ver && now.Sub(c.at) < placeViewTTL {
		pv := c.pv
		c.mu.Unlock()
		return pv, nil
	}
	c.mu.Unlock()
	// The version was read before the view was built: a change while
	// building leaves a newer version that the next call sees differ.
	pv, err := s.placeView(ctx)
	if err != nil {
		return placeView{}, err
	}
	c.mu.Lock()
	if !c.ok || now.After(c.at) {
		c.pv, c.ver, c.at, c.ok = pv, ver, now, true
	}
	c.mu.Unlock()
	return pv, nil
}

// reloadPools makes the cluster manager reload its snapshot and refreshes
// *pv from it.
func (s *Service) reloadPools(ctx context.Context, pv *placeView) error {
	pm, ok := s.targets.(PoolManager)
	if !ok {
		return errs.New(errs.NotSupported, "meta: this server has no pools")
	}
	if err := pm.Reload(ctx); err != nil {
		return err
	}
	var err error
	*pv, err = s.placeView(ctx)
	return err
}

// needChains is the error of a transaction that wants chains of r
// replicas (inside pool, if not "") and found none: the caller forms them
// (outside the transaction) and runs it again.
type needChains struct {
	r    int
	pool string
}

// needPool is the error of a transaction that names a pool the snapshot
// does not know: the caller reloads the pools (another metadata service
// may have made it) and runs it again.
type needPool string

func (n needPool) Error() string { return fmt.Sprintf("pool %q not in the snapshot", string(n)) }

func (n needChains) Error() string {
	if n.pool != "" {
		return fmt.Sprintf("no chains of %d replicas in pool %q yet", n.r, n.pool)
	}
	return fmt.Sprintf("no chains of %d replicas yet", n.r)
}

// updatePlacing runs fn like update; if fn fails with needChains, it forms
// the chains, refreshes *pv and runs fn once more.
func (s *Service) updatePlacing(ctx context.Context, pv *placeView, fn func(tx kv.Txn) error) error {
	err := s.update(ctx, fn)
	var np needPool
	if errors.As(err, &np) {
		if err := s.reloadPools(ctx, pv); err != nil {
			return err
		}
		err = s.update(ctx, fn)
		if errors.As(err, &np) {
			return errs.New(errs.Invalid, "the directory's pool %q does not exist (sluice pool ls; sluice layout set --pool)", string(np))
		}
	}
	var nc needChains
	if !errors.As(err, &nc) {
		return err
	}
	var members []placement.TargetID
	if nc.pool != "" {
		if members = pv.pools[nc.pool]; members == nil {
			members = []placement.TargetID{} // an empty pool forms nothing
		}
	}
	if err := s.targets.FormChains(ctx, nc.r, members); err != nil {
		if nc.pool != "" {
			return fmt.Errorf("pool %q: %w", nc.pool, err)
		}
		return err
	}
	if *pv, err = s.placeView(ctx); err != nil {
		return err
	}
	err = s.update(ctx, fn)
	if errors.As(err, &nc) {
		if nc.pool != "" {
			return errs.New(errs.NoSpace, "no chains of %d replicas could be formed in pool %q", nc.r, nc.pool)
		}
		return errs.New(errs.NoSpace, "no chains of %d replicas could be formed", nc.r)
	}
	return err
}

// fileLayout picks a new regular file's layout: req if its StripeSize is
// set, else the directory default dir, else Options.DefaultLayout. A stripe
// count of 0 means min(DefaultStripeCount, number of chains that could
// take it). Chains named in req are used as given (they must exist);
// otherwise they are chosen, seeded by the inode number: for one replica,
// placement.Choose picks targets (chain t is target t); for more,
// placement.ChooseChains picks among the chains of that many replicas.
// A pool (not "": the directory's) limits the choice to its targets, and
// to the chains that lie inside it.
func (s *Service) fileLayout(req, dir placement.Layout, pool string, pv placeView, ino uint64) (placement.Layout, error) {
	if req.StripeSize == 0 && dir.Progressive() {
		return s.progressiveLayout(dir, pool, pv, ino)
	}
	if req.Progressive() {
		// A migration's new layout (ADR 0020) keeps a progressive
		// file's components: its chains given (a plan moved some), or
		// chosen anew per component.
		if len(req.Chains) == 0 {
			return s.progressiveLayout(req, pool, pv, ino)
		}
		if err := req.Validate(); err != nil {
			return placement.Layout{}, err
		}
		for _, id := range req.Chains {
			if err := pv.checkChain(id, req.ReplicaCount()); err != nil {
				return placement.Layout{}, err
			}
		}
		req.Chains, req.Comps = slices.Clone(req.Chains), slices.Clone(req.Comps)
		return req, nil
	}
	if pool != "" {
		members, ok := pv.pools[pool]
		if !ok {
			return placement.Layout{}, needPool(pool)
		}
		pv.targets = placement.PoolTargets(pv.targets, members)
		pv.chains = placement.PoolChains(pv.chains, members)
	}
	l := req
	if l.StripeSize == 0 {
		l = placement.Layout{StripeSize: dir.StripeSize, StripeCount: dir.StripeCount, Replicas: dir.Replicas}
		if l.StripeSize == 0 {
			l.StripeSize, l.StripeCount = s.defLay.StripeSize, s.defLay.StripeCount
			l.Replicas = max(l.Replicas, s.defLay.Replicas)
		}
	}
	r := l.ReplicaCount()
	if len(l.Chains) > 0 {
		if l.StripeCount == 0 && len(l.Chains) <= placement.MaxStripeCount {
			l.StripeCount = uint16(len(l.Chains))
		}
		if err := l.Validate(); err != nil {
			return placement.Layout{}, err
		}
		for _, id := range l.Chains {
			if err := pv.checkChain(id, r); err != nil {
				return placement.Layout{}, err
			}
		}
		l.Chains = slices.Clone(l.Chains)
		return l, nil
	}
	if r == 1 {
		l.Replicas = 0
		out, err := chooseTargets(l, pv.targets, ino)
		if err != nil && pool != "" {
			return out, fmt.Errorf("pool %q: %w", pool, err)
		}
		return out, err
	}
	var cands []placement.Chain
	for _, c := range pv.chains {
		if len(c.Replicas) == r {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return placement.Layout{}, needChains{r, pool}
	}
	if l.StripeCount == 0 {
		l.StripeCount = uint16(min(DefaultStripeCount, len(cands)))
	}
	if err := l.Validate(); err != nil {
		return placement.Layout{}, err
	}
	if int(l.StripeCount) > len(cands) {
		return placement.Layout{}, errs.New(errs.Invalid, "layout asks for %d chains of %d replicas but only %d exist", l.StripeCount, r, len(cands))
	}
	free := make(map[placement.TargetID]bool, len(pv.targets))
	for _, t := range pv.targets {
		free[t.ID] = t.Healthy && t.Free > 0
	}
	ids, err := placement.ChooseChains(cands, free, int(l.StripeCount), ino)
	if err != nil {
		return placement.Layout{}, err
	}
	l.Chains = ids
	return l, nil
}

// progressiveLayout makes a new file's layout from a directory's
// progressive one (ADR 0021): each component's chains are chosen as a
// plain layout's would be, from the component's pool (else the
// directory's), seeded apart so that components spread differently; the
// file's slots are the components' in order.
func (s *Service) progressiveLayout(dir placement.Layout, pool string, pv placeView, ino uint64) (placement.Layout, error) {
	out := placement.Layout{Replicas: dir.Replicas, Comps: slices.Clone(dir.Comps)}
	for i := range out.Comps {
		c := &out.Comps[i]
		p := c.Pool
		if p == "" {
			p = pool
		}
		sub, err := s.fileLayout(placement.Layout{StripeSize: c.StripeSize, StripeCount: c.StripeCount, Replicas: dir.Replicas}, placement.Layout{}, p, pv, ino+uint64(i)*7919)
		if err != nil {
			return placement.Layout{}, fmt.Errorf("component %d: %w", i+1, err)
		}
		c.StripeCount = sub.StripeCount
		out.Chains = append(out.Chains, sub.Chains...)
		out.Replicas = sub.Replicas
	}
	if len(out.Chains) > placement.MaxStripeCount {
		return placement.Layout{}, errs.New(errs.Invalid, "the components have %d stripes, over the limit of %d", len(out.Chains), placement.MaxStripeCount)
	}
	out.StripeSize, out.StripeCount = out.Comps[0].StripeSize, uint16(len(out.Chains))
	if err := out.Validate(); err != nil {
		return placement.Layout{}, err
	}
	return out, nil
}

// checkChain checks that chain id exists with r replicas.
func (pv placeView) checkChain(id placement.ChainID, r int) error {
	if id < placement.FirstReplicatedChain {
		if r != 1 {
			return errs.New(errs.Invalid, "layout names chain %d, which has 1 replica, not %d", id, r)
		}
		if _, ok := slices.BinarySearchFunc(pv.targets, placement.TargetID(id), func(t targetInfo, id placement.TargetID) int { return cmp.Compare(t.ID, id) }); !ok {
			return errs.New(errs.Invalid, "layout names target %d, which does not exist", id)
		}
		return nil
	}
	i := slices.IndexFunc(pv.chains, func(c placement.Chain) bool { return c.ID == id })
	if i < 0 {
		return errs.New(errs.Invalid, "layout names chain %d, which does not exist", id)
	}
	c := pv.chains[i]
	moving := len(c.Replicas) == r+1 && slices.ContainsFunc(c.Replicas, func(x placement.Replica) bool { return x.State == placement.Syncing })
	if n := len(c.Replicas); n != r && !moving { // a draining replica's move adds one for a while
		return errs.New(errs.Invalid, "layout names chain %d, which has %d replicas, not %d", id, n, r)
	}
	return nil
}

// chooseTargets fills a one-replica layout's chains with targets.
func chooseTargets(l placement.Layout, targets []targetInfo, ino uint64) (placement.Layout, error) {
	if len(targets) == 0 {
		return placement.Layout{}, errs.New(errs.NoSpace, "no storage targets are registered")
	}
	if l.StripeCount == 0 {
		// All targets up to the default count, counting only those that
		// can take data (not down, not draining), if any can.
		n := 0
		for _, t := range targets {
			if t.Healthy {
				n++
			}
		}
		if n == 0 {
			n = len(targets)
		}
		l.StripeCount = uint16(min(DefaultStripeCount, n))
	}
	if err := l.Validate(); err != nil {
		return placement.Layout{}, err
	}
	if int(l.StripeCount) > len(targets) {
		return placement.Layout{}, errs.New(errs.Invalid, "layout asks for %d targets but only %d exist", l.StripeCount, len(targets))
	}
	ids, err := placement.Choose(targets, int(l.StripeCount), ino)
	if err != nil {
		return placement.Layout{}, err
	}
	l.Chains = make([]placement.ChainID, len(ids))
	for i, id := range ids {
		l.Chains[i] = placement.ChainID(id)
	}
	return l, nil
}

// GetLayout returns a regular file's layout, or a directory's default
// layout (Options.DefaultLayout if it sets none; no targets).
func (s *Service) GetLayout(ctx context.Context, ino uint64) (placement.Layout, error) {
	l, _, err := s.layoutOf(ctx, ino)
	return l, err
}

// layoutOf is GetLayout, saying also whether a regular file is released
// to the object tier (read in the same transaction: ADR 0023).
func (s *Service) layoutOf(ctx context.Context, ino uint64) (placement.Layout, bool, error) {
	var l placement.Layout
	var released bool
	err := s.db.View(ctx, func(tx kv.Txn) error {
		released = false
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		switch {
		case n.isReg():
			l = n.Layout
			if mayBeTiered(n) {
				h, err := getHsm(tx, ino)
				if err != nil {
					return err
				}
				released = h.State == wire.HsmReleased
			}
		case n.isDir():
			l = n.Layout
			if l.StripeSize == 0 {
				l = s.defLay
			}
		default:
			return errs.New(errs.Invalid, "a file of type %#o has no layout", n.Mode&modeType)
		}
		return nil
	})
	if err != nil {
		return placement.Layout{}, false, inoErr("getlayout", ino, err)
	}
	return l, released, nil
}

// SetLayout sets a directory's default layout (new files and directories
// made in it inherit it; a zero layout means Options.DefaultLayout), or the
// layout of a regular file that has no data yet (size 0; else errs.Busy).
// A stripe count over the number of targets is errs.Invalid.
func (s *Service) SetLayout(ctx context.Context, ino uint64, l placement.Layout) error {
	if err := s.setLayout(ctx, ino, l); err != nil {
		return inoErr("setlayout", ino, err)
	}
	return nil
}

func (s *Service) setLayout(ctx context.Context, ino uint64, l placement.Layout) error {
	pv, err := s.placeView(ctx)
	if err != nil {
		return err
	}
	now := s.nowNs()
	who := whoOf(ctx, nil)
	err = s.updatePlacing(ctx, &pv, func(tx kv.Txn) error {
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		old := n.Layout
		switch {
		case n.isDir():
			if len(l.Chains) != 0 {
				return errs.New(errs.Invalid, "a directory's default layout cannot name chains")
			}
			if l.Progressive() {
				l.StripeSize, l.StripeCount = l.Comps[0].StripeSize, l.Comps[0].StripeCount
				if err := l.Validate(); err != nil {
					return err
				}
				for i, c := range l.Comps {
					targets := len(pv.targets)
					if c.Pool != "" {
						members, ok := pv.pools[c.Pool]
						if !ok {
							return needPool(c.Pool)
						}
						targets = len(placement.PoolTargets(pv.targets, members))
					}
					if l.ReplicaCount() == 1 && int(c.StripeCount) > targets {
						return errs.New(errs.Invalid, "component %d asks for %d targets but only %d exist", i+1, c.StripeCount, targets)
					}
				}
				n.Layout = placement.Layout{StripeSize: l.StripeSize, StripeCount: l.StripeCount, Replicas: l.Replicas, Comps: slices.Clone(l.Comps)}
				if n.Layout.Replicas == 1 {
					n.Layout.Replicas = 0
				}
				break
			}
			if l.StripeSize != 0 || l.StripeCount != 0 || l.Replicas != 0 {
				if l.StripeSize == 0 {
					l.StripeSize = s.defLay.StripeSize
				}
				if err := l.Validate(); err != nil {
					return err
				}
				if l.ReplicaCount() == 1 && int(l.StripeCount) > len(pv.targets) {
					return errs.New(errs.Invalid, "layout asks for %d targets but only %d exist", l.StripeCount, len(pv.targets))
				}
			}
			n.Layout = placement.Layout{StripeSize: l.StripeSize, StripeCount: l.StripeCount, Replicas: l.Replicas}
			if n.Layout.Replicas == 1 {
				n.Layout.Replicas = 0
			}
		case n.isReg():
			if n.Size != 0 {
				return errs.New(errs.Busy, "file has data (size %d); its layout cannot change", n.Size)
			}
			if l.StripeSize == 0 {
				return errs.New(errs.Invalid, "a file's layout needs a stripe size")
			}
			if n.Layout, err = s.fileLayout(l, placement.Layout{}, "", pv, ino); err != nil {
				return err
			}
		default:
			return errs.New(errs.Invalid, "a file of type %#o has no layout", n.Mode&modeType)
		}
		if err := setCtime(tx, ino, n, now); err != nil {
			return err
		}
		tx.Set(inodeKey(ino), n.encode())
		if err := s.appendAudit(tx, &audit.Entry{Time: now, Op: audit.OpSetLayout, Ino: ino, Who: who,
			Changes: []audit.Change{{Field: "layout", Old: layoutText(old), New: layoutText(n.Layout)}}}); err != nil {
			return err
		}
		return nil
	})
	if err == nil {
		s.audited()
	}
	return err
}

// CommitWrite records that a regular file's data up to end is durable on
// the targets: size becomes max(size, end), mtime and ctime become mtime
// (the server's clock if 0).
func (s *Service) CommitWrite(ctx context.Context, ino, end uint64, mtime int64) (wire.Attr, error) {
	return s.CommitWriteIf(ctx, &wire.CommitWriteReq{Ino: ino, End: end, Mtime: mtime})
}

// CommitWriteIf is CommitWrite of req; with req.IfMtime set, the answer
// carries wire.AttrUnchanged if the file's mtime and size before the
// commit were req.IfMtime and req.IfSize. With req.CutIf, the commit
// applies only under cut generation req.Cut (CommitCut).
func (s *Service) CommitWriteIf(ctx context.Context, req *wire.CommitWriteReq) (wire.Attr, error) {
	r, err := s.commitWrite(ctx, req, nil)
	return r.Attr, err
}

// CommitCut is CommitWriteIf with its whole answer: whether a commit with
// a cut condition (req.CutIf) applied, and the file's cut generation.
func (s *Service) CommitCut(ctx context.Context, req *wire.CommitWriteReq) (wire.CommitResp, error) {
	return s.commitWrite(ctx, req, nil)
}

// commitWriteTx applies a size commit to tx: the file's size and times in
// n, which it returns unwritten (the caller writes the inode, once, after
// any other change it makes); unchanged says whether the file was in the
// state the commit's If fields name. A commit whose cut condition fails
// changes nothing but a cut held past its time, which it takes over:
// refused says so, and write whether n must be written all the same.
func commitWriteTx(tx kv.Txn, req *wire.CommitWriteReq, mtime, now, hold int64) (n *inode, unchanged, refused, write bool, err error) {
	if n, err = getInode(tx, req.Ino); err != nil {
		return nil, false, false, false, err
	}
	switch {
	case n.isDir():
		return nil, false, false, false, errs.New(errs.IsDir, "cannot write to a directory")
	case !n.isReg():
		return nil, false, false, false, errs.New(errs.Invalid, "cannot write to a file of type %#o", n.Mode&modeType)
	}
	if req.CutIf {
		if c := cutOf(n); !c.commits(req.Cut) {
			write = c.takeOver(now, hold)
			c.into(n)
			return n, false, true, write, nil
		}
	}
	if err := hsmWrite(tx, req.Ino, n); err != nil {
		return nil, false, false, false, err
	}
	unchanged = unchangedSince(n, req.IfMtime, req.IfSize)
	n.Size = max(n.Size, req.End)
	n.Flags |= inoChunks // SetChunks came first; this is belt and braces
	n.Mtime, n.Ctime = mtime, mtime
	return n, unchanged, false, true, nil
}

// CommitWriteAttr is CommitWriteIf of req.Commit and then, in the same
// transaction, the change req.Attr of the same file's mode, owner, group
// and times, as SetAttr makes it (with its audit entry): the close of a
// file whose data went to the targets and whose times, owner and mode a
// program restored before closing it (tar -x, cp -p). The attributes
// returned are those after both; AttrUnchanged is the commit's. A commit
// refused for its cut condition makes neither change.
func (s *Service) CommitWriteAttr(ctx context.Context, req *wire.CommitWriteAttrReq) (wire.Attr, error) {
	r, err := s.CommitWriteAttrCut(ctx, req)
	return r.Attr, err
}

// CommitWriteAttrCut is CommitWriteAttr with its whole answer (CommitCut).
func (s *Service) CommitWriteAttrCut(ctx context.Context, req *wire.CommitWriteAttrReq) (wire.CommitResp, error) {
	if err := attrWithWrite(req.Commit.Ino, &req.Attr); err != nil {
		return wire.CommitResp{}, inoErr("commitwrite", req.Commit.Ino, err)
	}
	return s.commitWrite(ctx, &req.Commit, &req.Attr)
}

// commitWrite is CommitWriteIf of c, followed in its transaction by the
// change ch when it is not nil (CommitWriteAttr).
func (s *Service) commitWrite(ctx context.Context, c *wire.CommitWriteReq, ch *wire.SetAttrReq) (wire.CommitResp, error) {
	mtime := c.Mtime
	if mtime == 0 {
		mtime = s.nowNs()
	}
	var r wire.CommitResp
	audited, tookOver := false, false
	err := s.update(ctx, func(tx kv.Txn) error {
		audited = false
		n, unchanged, refused, write, err := commitWriteTx(tx, c, mtime, s.nowNs(), s.cutHoldNs())
		if err != nil {
			return err
		}
		tookOver = refused && write
		if ch != nil && !refused {
			if audited, err = s.changeWithWrite(ctx, tx, ch, n); err != nil {
				return err
			}
		}
		if write {
			tx.Set(inodeKey(c.Ino), n.encode())
		}
		r = wire.CommitResp{Known: true, Cut: n.Cut, Refused: refused}
		r.Attr, err = attrOf(tx, c.Ino, n)
		if unchanged {
			r.Attr.Flags |= wire.AttrUnchanged
		}
		return err
	})
	if err != nil {
		return wire.CommitResp{}, inoErr("commitwrite", c.Ino, err)
	}
	if audited {
		s.audited()
	}
	if r.Refused {
		s.cuts.refused.Add(1)
		if tookOver {
			s.cuts.takeovers.Add(1)
		}
	}
	return r, nil
}

// unchangedSince reports whether inode n still has the mtime and size a
// change's If fields name (never when ifMtime is 0: no check asked).
func unchangedSince(n *inode, ifMtime int64, ifSize uint64) bool {
	return ifMtime != 0 && n.Mtime == ifMtime && n.Size == ifSize
}

// Cluster describes the file system: FSID, root inode, targets and the
// chain table.
func (s *Service) Cluster(ctx context.Context) (wire.ClusterInfo, error) {
	ts, err := s.targets.List(ctx)
	if err != nil {
		return wire.ClusterInfo{}, fmt.Errorf("meta: cluster: list storage targets: %w", err)
	}
	slices.SortFunc(ts, func(a, b wire.TargetAddr) int { return cmp.Compare(a.ID, b.ID) })
	ver, chains, err := s.targets.Chains(ctx)
	if err != nil {
		return wire.ClusterInfo{}, fmt.Errorf("meta: cluster: list chains: %w", err)
	}
	info := wire.ClusterInfo{FSID: s.fsid, RootIno: RootIno, Targets: ts, ChainsVersion: ver, Chains: chains, InlineMax: uint32(s.inlMax)}
	if n, ok := s.targets.(interface {
		Nodes(context.Context) []wire.NodeInfo
	}); ok {
		info.Nodes = n.Nodes(ctx)
	}
	return info, nil
}

// Statfs sums the targets' capacity and usage (see sumUsage) and reports
// the approximate number of inodes (a counter, not a scan).
func (s *Service) Statfs(ctx context.Context) (wire.StatfsResp, error) {
	ts, err := s.targets.List(ctx)
	if err != nil {
		return wire.StatfsResp{}, fmt.Errorf("meta: statfs: list storage targets: %w", err)
	}
	var r wire.StatfsResp
	r.Capacity, r.Used, r.Free = sumUsage(ts)
	r.Targets = uint32(len(ts))
	r.Inodes = uint64(max(s.inodes.Load()+s.inodeDelta.Load(), 0))
	return r, nil
}

// sumUsage adds up the capacity, used and free bytes of the file systems
// holding the targets. A target's Capacity and Used are its file system's
// (Targets.List), so targets of one node on one file system (equal FS, as
// the targets of `sluice serve` in one data dir) count once, with the
// figures of the first of them; a target whose FS is unknown (0) counts on
// its own.
func sumUsage(ts []wire.TargetAddr) (capacity, used, free int64) {
	type fsKey struct {
		node string
		fs   uint64
	}
	seen := make(map[fsKey]bool, len(ts))
	for _, t := range ts {
		if t.FS != 0 {
			k := fsKey{t.Node, t.FS}
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		capacity += t.Capacity
		used += t.Used
		free += max(t.Capacity-t.Used, 0)
	}
	return capacity, used, free
}
