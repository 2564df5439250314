package meta

import (
	"context"
	"fmt"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Register installs a handler for every metadata op (wire ops 1-41, 43-44, 47, 49-55) on srv.
// Each decodes its request body (a malformed one fails with errs.Protocol),
// calls the Service method and replies with its result.
func (s *Service) Register(srv *wire.Server) {
	handle(srv, wire.OpWatch, func(ctx context.Context, m *wire.WatchReq) (wire.Message, error) {
		return s.Watch(ctx, originOf(ctx), m), nil
	})
	handle(srv, wire.OpCluster, func(ctx context.Context, _ *wire.Empty) (wire.Message, error) {
		r, err := s.Cluster(ctx)
		return &r, err
	})
	handle(srv, wire.OpStatfs, func(ctx context.Context, _ *wire.Empty) (wire.Message, error) {
		r, err := s.Statfs(ctx)
		return &r, err
	})
	handle(srv, wire.OpResolve, func(ctx context.Context, m *wire.ResolveReq) (wire.Message, error) {
		r, err := s.Resolve(ctx, m.Path, m.Follow)
		return &r, err
	})
	handle(srv, wire.OpLookup, func(ctx context.Context, m *wire.NameReq) (wire.Message, error) {
		r, err := s.Lookup(ctx, m.Parent, m.Name)
		return &r, err
	})
	handle(srv, wire.OpGetAttr, func(ctx context.Context, m *wire.InoReq) (wire.Message, error) {
		r, err := s.GetAttr(ctx, m.Ino)
		return &r, err
	})
	handle(srv, wire.OpSetAttr, func(ctx context.Context, m *wire.SetAttrReq) (wire.Message, error) {
		r, err := s.SetAttr(WithCred(ctx, m.Cred), m)
		return &r, err
	})
	handle(srv, wire.OpCreate, func(ctx context.Context, m *wire.CreateReq) (wire.Message, error) {
		r, err := s.CreateEntry(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpMkdir, func(ctx context.Context, m *wire.CreateReq) (wire.Message, error) {
		r, err := s.MkdirEntry(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpSymlink, func(ctx context.Context, m *wire.SymlinkReq) (wire.Message, error) {
		r, err := s.Symlink(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpReadlink, func(ctx context.Context, m *wire.InoReq) (wire.Message, error) {
		t, err := s.Readlink(ctx, m.Ino)
		return &wire.StringResp{S: t}, err
	})
	handle(srv, wire.OpUnlink, func(ctx context.Context, m *wire.NameReq) (wire.Message, error) {
		dir, err := s.UnlinkEntry(WithCred(ctx, m.Cred), m.Parent, m.Name)
		return dirsResp(dir), err
	})
	handle(srv, wire.OpRmdir, func(ctx context.Context, m *wire.NameReq) (wire.Message, error) {
		dir, err := s.RmdirEntry(WithCred(ctx, m.Cred), m.Parent, m.Name)
		return dirsResp(dir), err
	})
	handle(srv, wire.OpAbsorbGet, func(ctx context.Context, m *wire.InoReq) (wire.Message, error) {
		r, err := s.GetAbsorb(ctx, m.Ino)
		return &r, err
	})
	handle(srv, wire.OpAbsorbSet, func(ctx context.Context, m *wire.AbsorbSetReq) (wire.Message, error) {
		return &wire.Empty{}, s.SetAbsorb(ctx, m.Ino, m.Mode)
	})
	handle(srv, wire.OpStagedAdd, func(ctx context.Context, m *wire.StagedReq) (wire.Message, error) {
		return &wire.Empty{}, s.StagedAdd(ctx, m.Ino, m.Owner)
	})
	handle(srv, wire.OpStagedDone, func(ctx context.Context, m *wire.StagedReq) (wire.Message, error) {
		return &wire.Empty{}, s.StagedDone(ctx, m.Ino, m.Owner)
	})
	handle(srv, wire.OpStagedList, func(ctx context.Context, _ *wire.Empty) (wire.Message, error) {
		r, err := s.StagedList(ctx)
		return &r, err
	})
	handle(srv, wire.OpRename, func(ctx context.Context, m *wire.RenameReq) (wire.Message, error) {
		return &wire.Empty{}, s.Rename(WithCred(ctx, m.Cred), m)
	})
	handle(srv, wire.OpLink, func(ctx context.Context, m *wire.LinkReq) (wire.Message, error) {
		r, err := s.Link(ctx, m.Ino, m.NewParent, m.NewName)
		return &r, err
	})
	handle(srv, wire.OpReadDir, func(ctx context.Context, m *wire.ReadDirReq) (wire.Message, error) {
		r, err := s.ReadDir(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpGetXattr, func(ctx context.Context, m *wire.XattrReq) (wire.Message, error) {
		v, err := s.GetXattr(ctx, m.Ino, m.Name)
		return &wire.BytesResp{B: v}, err
	})
	handle(srv, wire.OpSetXattr, func(ctx context.Context, m *wire.XattrReq) (wire.Message, error) {
		return &wire.Empty{}, s.SetXattr(ctx, m)
	})
	handle(srv, wire.OpListXattr, func(ctx context.Context, m *wire.InoReq) (wire.Message, error) {
		names, err := s.ListXattr(ctx, m.Ino)
		return &wire.NamesResp{Names: names}, err
	})
	handle(srv, wire.OpRemoveXattr, func(ctx context.Context, m *wire.XattrReq) (wire.Message, error) {
		return &wire.Empty{}, s.RemoveXattr(ctx, m.Ino, m.Name)
	})
	handle(srv, wire.OpGetLayout, func(ctx context.Context, m *wire.InoReq) (wire.Message, error) {
		l, released, err := s.layoutOf(ctx, m.Ino)
		if err != nil {
			return nil, err
		}
		pool, err := s.DirPool(ctx, m.Ino)
		return &wire.LayoutMsg{Layout: l, Pool: pool, Released: released}, err
	})
	handle(srv, wire.OpSetPool, func(ctx context.Context, m *wire.SetPoolReq) (wire.Message, error) {
		return &wire.Empty{}, s.SetPool(ctx, m.Ino, m.Pool)
	})
	handle(srv, wire.OpPoolList, func(ctx context.Context, _ *wire.Empty) (wire.Message, error) {
		ps, err := s.Pools(ctx)
		return &wire.PoolListResp{Pools: ps}, err
	})
	handle(srv, wire.OpPoolChange, func(ctx context.Context, m *wire.PoolChangeReq) (wire.Message, error) {
		return &wire.Empty{}, s.ChangePool(ctx, m)
	})
	handle(srv, wire.OpSetLayout, func(ctx context.Context, m *wire.SetLayoutReq) (wire.Message, error) {
		return &wire.Empty{}, s.SetLayout(WithCred(ctx, m.Cred), m.Ino, m.Layout)
	})
	handle(srv, wire.OpTargetDrain, func(ctx context.Context, m *wire.TargetDrainReq) (wire.Message, error) {
		dm, ok := s.targets.(DrainManager)
		if !ok {
			return &wire.Empty{}, errs.New(errs.NotSupported, "meta: this metadata service cannot drain targets")
		}
		return &wire.Empty{}, dm.SetDraining(ctx, m.Target, m.On)
	})
	handle(srv, wire.OpTargetRemove, func(ctx context.Context, m *wire.TargetReq) (wire.Message, error) {
		dm, ok := s.targets.(DrainManager)
		if !ok {
			return &wire.Empty{}, errs.New(errs.NotSupported, "meta: this metadata service cannot remove targets")
		}
		return &wire.Empty{}, dm.RemoveTarget(ctx, m.Target)
	})
	handle(srv, wire.OpMigrate, func(ctx context.Context, m *wire.MigrateReq) (wire.Message, error) {
		r, err := s.Migrate(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpCommitWrite, func(ctx context.Context, m *wire.CommitWriteReq) (wire.Message, error) {
		r, err := s.CommitCut(ctx, m)
		return commitReply(m, &r), err
	})
	handle(srv, wire.OpCutBegin, func(ctx context.Context, m *wire.InoReq) (wire.Message, error) {
		r, err := s.CutBegin(ctx, m.Ino)
		return &r, err
	})
	handle(srv, wire.OpCutGen, func(ctx context.Context, m *wire.InoReq) (wire.Message, error) {
		r, err := s.CutGen(ctx, m.Ino)
		return &r, err
	})
	handle(srv, wire.OpCutEnd, func(ctx context.Context, m *wire.CutEndReq) (wire.Message, error) {
		r, err := s.CutEnd(ctx, m.Ino, m.Cut)
		return &r, err
	})
	handle(srv, wire.OpWriteInline, func(ctx context.Context, m *wire.WriteInlineReq) (wire.Message, error) {
		r, err := s.WriteInline(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpWriteInlineAttr, func(ctx context.Context, m *wire.WriteInlineAttrReq) (wire.Message, error) {
		r, err := s.WriteInlineAttr(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpCommitWriteAttr, func(ctx context.Context, m *wire.CommitWriteAttrReq) (wire.Message, error) {
		r, err := s.CommitWriteAttrCut(ctx, m)
		return commitReply(&m.Commit, &r), err
	})
	handle(srv, wire.OpPutFile, func(ctx context.Context, m *wire.PutFileReq) (wire.Message, error) {
		r, err := s.PutFile(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpReadInline, func(ctx context.Context, m *wire.ReadInlineReq) (wire.Message, error) {
		r, err := s.ReadInline(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpResolveRead, func(ctx context.Context, m *wire.ResolveReq) (wire.Message, error) {
		r, err := s.ResolveRead(ctx, m.Path, m.Follow, m.Xattr)
		return &r, err
	})
	handle(srv, wire.OpOpenIno, func(ctx context.Context, m *wire.InoReq) (wire.Message, error) {
		r, err := s.OpenIno(ctx, m.Ino)
		return &r, err
	})
	handle(srv, wire.OpSetChunks, func(ctx context.Context, m *wire.InoReq) (wire.Message, error) {
		r, err := s.SetChunks(ctx, m.Ino)
		return &r, err
	})
	handle(srv, wire.OpAuditList, func(ctx context.Context, m *wire.AuditListReq) (wire.Message, error) {
		r, err := s.AuditList(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpAuditVerify, func(ctx context.Context, _ *wire.Empty) (wire.Message, error) {
		r, err := s.AuditVerify(ctx)
		return &r, err
	})
	handle(srv, wire.OpMetaSync, func(ctx context.Context, _ *wire.Empty) (wire.Message, error) {
		return &wire.Empty{}, s.Sync(ctx)
	})
	s.registerTier(srv)
	s.registerQos(srv)
	s.registerProfile(srv)
	s.registerStage(srv)
	cm, _ := s.targets.(ClusterManager)
	fixed := errs.New(errs.NotSupported, "meta: this server's target set is fixed")
	handle(srv, wire.OpRegister, func(ctx context.Context, m *wire.RegisterReq) (wire.Message, error) {
		if cm == nil {
			return nil, fixed
		}
		r, err := cm.Register(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpHeartbeat, func(ctx context.Context, m *wire.HeartbeatReq) (wire.Message, error) {
		if cm == nil {
			return nil, fixed
		}
		r, err := cm.Heartbeat(ctx, m)
		if err != nil {
			return nil, err
		}
		// The QoS settings ride on every reply: the targets apply them
		// within a heartbeat of a change, with no version to track.
		q, err := s.QosFor(ctx, m.Node)
		r.Qos = &q
		return &r, err
	})
	handle(srv, wire.OpSyncDone, func(ctx context.Context, m *wire.SyncDoneReq) (wire.Message, error) {
		if cm == nil {
			return nil, fixed
		}
		return &wire.Empty{}, cm.SyncDone(ctx, m)
	})
	s.gateHandlers(srv)
}

// handle installs a handler that decodes a *Req body and calls fn.
func handle[Req any, P interface {
	*Req
	wire.Message
}](srv *wire.Server, op wire.Op, fn func(context.Context, P) (wire.Message, error)) {
	srv.Handle(op, func(ctx context.Context, r *wire.Request) (wire.Response, error) {
		m := P(new(Req))
		if err := wire.Unmarshal(r.Body, m); err != nil {
			return wire.Response{}, fmt.Errorf("meta: op %d: %w", op, errs.New(errs.Protocol, "malformed request body: %v", err))
		}
		resp, err := fn(withOrigin(ctx, r.Conn), m)
		if err != nil {
			return wire.Response{}, err
		}
		return wire.Response{Msg: resp}, nil
	})
}

// dirsResp answers an entry change with the directory it left.
func dirsResp(dir *wire.Attr) *wire.DirsResp {
	if dir == nil {
		return &wire.DirsResp{}
	}
	return &wire.DirsResp{Dirs: []wire.Attr{*dir}}
}

// commitReply is the answer to size commit m: the whole CommitResp r when
// m carried a cut condition, else (an older client's) its attributes only.
func commitReply(m *wire.CommitWriteReq, r *wire.CommitResp) wire.Message {
	if m.CutIf {
		return r
	}
	return &r.Attr
}
