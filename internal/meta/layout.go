package meta

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

type targetInfo = placement.TargetInfo

// listTargets returns what placement needs to know of the targets, sorted
// by ID. Free is Capacity-Used (see Targets.List).
func (s *Service) listTargets(ctx context.Context) ([]targetInfo, error) {
	ts, err := s.targets.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list storage targets: %w", err)
	}
	out := make([]targetInfo, len(ts))
	for i, t := range ts {
		out[i] = targetInfo{ID: t.ID, Healthy: t.Healthy, Free: t.Capacity - t.Used}
	}
	slices.SortFunc(out, func(a, b targetInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// fileLayout picks a new regular file's layout: req if its StripeSize is
// set, else the directory default dir, else Options.DefaultLayout. A stripe
// count of 0 means min(DefaultStripeCount, number of targets). Targets named
// in req are used as given (they must exist); otherwise placement.Choose
// picks them, seeded by the inode number.
func (s *Service) fileLayout(req, dir placement.Layout, targets []targetInfo, ino uint64) (placement.Layout, error) {
	l := req
	if l.StripeSize == 0 {
		l = placement.Layout{StripeSize: dir.StripeSize, StripeCount: dir.StripeCount}
		if l.StripeSize == 0 {
			l = s.defLay
		}
	}
	if len(l.Targets) > 0 {
		if l.StripeCount == 0 && len(l.Targets) <= placement.MaxStripeCount {
			l.StripeCount = uint16(len(l.Targets))
		}
		if err := l.Validate(); err != nil {
			return placement.Layout{}, err
		}
		for _, id := range l.Targets {
			if _, ok := slices.BinarySearchFunc(targets, id, func(t targetInfo, id placement.TargetID) int { return cmp.Compare(t.ID, id) }); !ok {
				return placement.Layout{}, errs.New(errs.Invalid, "layout names target %d, which does not exist", id)
			}
		}
		l.Targets = slices.Clone(l.Targets)
		return l, nil
	}
	if len(targets) == 0 {
		return placement.Layout{}, errs.New(errs.NoSpace, "no storage targets are registered")
	}
	if l.StripeCount == 0 {
		l.StripeCount = uint16(min(DefaultStripeCount, len(targets)))
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
	l.Targets = ids
	return l, nil
}

// GetLayout returns a regular file's layout, or a directory's default
// layout (Options.DefaultLayout if it sets none; no targets).
func (s *Service) GetLayout(ctx context.Context, ino uint64) (placement.Layout, error) {
	var l placement.Layout
	err := s.db.View(ctx, func(tx kv.Txn) error {
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		switch {
		case n.isReg():
			l = n.Layout
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
		return placement.Layout{}, inoErr("getlayout", ino, err)
	}
	return l, nil
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
	targets, err := s.listTargets(ctx)
	if err != nil {
		return err
	}
	now := s.nowNs()
	return s.update(ctx, func(tx kv.Txn) error {
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		switch {
		case n.isDir():
			if len(l.Targets) != 0 {
				return errs.New(errs.Invalid, "a directory's default layout cannot name targets")
			}
			if l.StripeSize != 0 || l.StripeCount != 0 {
				if l.StripeSize == 0 {
					l.StripeSize = s.defLay.StripeSize
				}
				if err := l.Validate(); err != nil {
					return err
				}
				if int(l.StripeCount) > len(targets) {
					return errs.New(errs.Invalid, "layout asks for %d targets but only %d exist", l.StripeCount, len(targets))
				}
			}
			n.Layout = placement.Layout{StripeSize: l.StripeSize, StripeCount: l.StripeCount}
		case n.isReg():
			if n.Size != 0 {
				return errs.New(errs.Busy, "file has data (size %d); its layout cannot change", n.Size)
			}
			if l.StripeSize == 0 {
				return errs.New(errs.Invalid, "a file's layout needs a stripe size")
			}
			if n.Layout, err = s.fileLayout(l, placement.Layout{}, targets, ino); err != nil {
				return err
			}
		default:
			return errs.New(errs.Invalid, "a file of type %#o has no layout", n.Mode&modeType)
		}
		if err := setCtime(tx, ino, n, now); err != nil {
			return err
		}
		tx.Set(inodeKey(ino), n.encode())
		return nil
	})
}

// CommitWrite records that a regular file's data up to end is durable on
// the targets: size becomes max(size, end), mtime and ctime become mtime
// (the server's clock if 0).
func (s *Service) CommitWrite(ctx context.Context, ino, end uint64, mtime int64) (wire.Attr, error) {
	if mtime == 0 {
		mtime = s.nowNs()
	}
	var a wire.Attr
	err := s.update(ctx, func(tx kv.Txn) error {
		n, err := getInode(tx, ino)
		if err != nil {
			return err
		}
		switch {
		case n.isDir():
			return errs.New(errs.IsDir, "cannot write to a directory")
		case !n.isReg():
			return errs.New(errs.Invalid, "cannot write to a file of type %#o", n.Mode&modeType)
		}
		n.Size = max(n.Size, end)
		n.Mtime, n.Ctime = mtime, mtime
		tx.Set(inodeKey(ino), n.encode())
		a, err = attrOf(tx, ino, n)
		return err
	})
	if err != nil {
		return wire.Attr{}, inoErr("commitwrite", ino, err)
	}
	return a, nil
}

// Cluster describes the file system: FSID, root inode and targets.
func (s *Service) Cluster(ctx context.Context) (wire.ClusterInfo, error) {
	ts, err := s.targets.List(ctx)
	if err != nil {
		return wire.ClusterInfo{}, fmt.Errorf("meta: cluster: list storage targets: %w", err)
	}
	slices.SortFunc(ts, func(a, b wire.TargetAddr) int { return cmp.Compare(a.ID, b.ID) })
	return wire.ClusterInfo{FSID: s.fsid, RootIno: RootIno, Targets: ts}, nil
}

// Statfs sums the targets' capacity and usage and reports the approximate
// number of inodes (a counter, not a scan).
func (s *Service) Statfs(ctx context.Context) (wire.StatfsResp, error) {
	ts, err := s.targets.List(ctx)
	if err != nil {
		return wire.StatfsResp{}, fmt.Errorf("meta: statfs: list storage targets: %w", err)
	}
	var r wire.StatfsResp
	for _, t := range ts {
		r.Capacity += t.Capacity
		r.Used += t.Used
		r.Free += max(t.Capacity-t.Used, 0)
	}
	r.Targets = uint32(len(ts))
	r.Inodes = uint64(max(s.inodes.Load()+s.inodeDelta.Load(), 0))
	return r, nil
}
