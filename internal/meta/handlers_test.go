package meta

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/cluster"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// serve runs srv on a loopback port until the test ends.
func serve(t *testing.T, srv *wire.Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, wire.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}

// fakeTargetServer answers OpTargetStat and records OpChunkRemove.
type fakeTargetServer struct {
	mu      sync.Mutex
	removed []wire.ChunkRemoveReq
}

func (f *fakeTargetServer) register(srv *wire.Server) {
	srv.Handle(wire.OpTargetStat, func(ctx context.Context, r *wire.Request) (wire.Response, error) {
		var req wire.TargetReq
		if err := wire.Unmarshal(r.Body, &req); err != nil {
			return wire.Response{}, err
		}
		return wire.Response{Msg: &wire.TargetStat{Target: req.Target, Capacity: 1000 << 20, Used: 1, Free: 600 << 20}}, nil
	})
	srv.Handle(wire.OpChunkRemove, func(ctx context.Context, r *wire.Request) (wire.Response, error) {
		var req wire.ChunkRemoveReq
		if err := wire.Unmarshal(r.Body, &req); err != nil {
			return wire.Response{}, err
		}
		f.mu.Lock()
		f.removed = append(f.removed, req)
		f.mu.Unlock()
		return wire.Response{Msg: &wire.Empty{}}, nil
	})
}

// rawBody is a request body of arbitrary bytes.
type rawBody []byte

func (b rawBody) Encode(e *wire.Encoder) { e.B = append(e.B, b...) }
func (b rawBody) Decode(*wire.Decoder)   {}

// TestWire runs the service behind a real wire.Server with cluster.Manager
// talking to a fake target over loopback. It is not parallel so that it can
// check for leaked goroutines.
func TestWire(t *testing.T) {
	ctx := context.Background()
	before := runtime.NumGoroutine()
	func() {
		db := kv.NewMemory()
		defer db.Close()

		// A storage target.
		var ts fakeTargetServer
		tsrv := &wire.Server{}
		ts.register(tsrv)
		taddr := serve(t, tsrv)

		rt, err := cluster.New(ctx, cluster.Options{DB: db, Refresh: 20 * time.Millisecond, HeartbeatTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		rtDone := make(chan error, 1)
		go func() { rtDone <- rt.Run(ctx) }()
		s := newTestService(t, db, rt)
		msrv := &wire.Server{}
		s.Register(msrv)
		c, err := wire.Dial(ctx, serve(t, msrv))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		call := func(op wire.Op, req, resp wire.Message) error {
			_, err := c.Call(ctx, op, req, nil, resp, nil)
			return err
		}

		// No targets yet: files cannot be placed.
		err = call(wire.OpCreate, &wire.CreateReq{Parent: RootIno, Name: "f", Mode: 0o644}, &wire.Attr{})
		wantCode(t, "create without targets", err, errs.NoSpace)

		var reg wire.RegisterResp
		if err := call(wire.OpRegister, &wire.RegisterReq{Node: "n1", Addr: taddr, Want: 1}, &reg); err != nil || len(reg.IDs) != 1 {
			t.Fatalf("register: %+v, %v", reg, err)
		}
		tid := reg.IDs[0]
		// A second node cannot claim the target.
		err = call(wire.OpRegister, &wire.RegisterReq{Node: "n2", Addr: taddr, Have: reg.IDs}, &reg)
		wantCode(t, "register another node's target", err, errs.Invalid)
		hb := &wire.HeartbeatReq{Node: "n1", Addr: taddr, Incarnation: 1, Targets: []wire.TargetStat{{Target: tid, Capacity: 1000 << 20, Used: 1, Free: 600 << 20}}}
		if err := call(wire.OpHeartbeat, hb, &wire.HeartbeatResp{}); err != nil {
			t.Fatal(err)
		}
		var ci wire.ClusterInfo
		if err := call(wire.OpCluster, &wire.Empty{}, &ci); err != nil {
			t.Fatal(err)
		}
		if ci.FSID != s.FSID() || ci.RootIno != RootIno || len(ci.Targets) != 1 ||
			ci.Targets[0].ID != tid || ci.Targets[0].Node != "n1" || ci.Targets[0].Addr != taddr || !ci.Targets[0].Healthy || ci.Targets[0].Capacity != 1000<<20 {
			t.Fatalf("cluster info %+v", ci)
		}
		var st wire.StatfsResp
		if err := call(wire.OpStatfs, &wire.Empty{}, &st); err != nil {
			t.Fatal(err)
		}
		if st.Capacity != 1000<<20 || st.Free != 600<<20 || st.Used != 400<<20 || st.Targets != 1 || st.Inodes != 1 {
			t.Fatalf("statfs %+v", st)
		}

		var f wire.Attr
		if err := call(wire.OpCreate, &wire.CreateReq{Parent: RootIno, Name: "f", Mode: 0o644, Exclusive: true}, &f); err != nil {
			t.Fatal(err)
		}
		if f.Layout.StripeCount != 1 || f.Layout.Chains[0] != placement.ChainID(tid) {
			t.Fatalf("layout %v", f.Layout)
		}
		var got wire.Attr
		if err := call(wire.OpLookup, &wire.NameReq{Parent: RootIno, Name: "f"}, &got); err != nil || got.Ino != f.Ino {
			t.Fatalf("lookup: %+v, %v", got, err)
		}
		err = call(wire.OpLookup, &wire.NameReq{Parent: RootIno, Name: "nope"}, &got)
		wantCode(t, "lookup missing over the wire", err, errs.NotFound)

		// A malformed body fails with Protocol, and the connection lives on.
		err = call(wire.OpLookup, rawBody{1, 2, 3}, &got)
		wantCode(t, "malformed body", err, errs.Protocol)
		err = call(wire.OpRename, rawBody{}, &wire.Empty{})
		wantCode(t, "empty body", err, errs.Protocol)
		if err := call(wire.OpGetAttr, &wire.InoReq{Ino: f.Ino}, &got); err != nil || got.Ino != f.Ino {
			t.Fatalf("getattr after a malformed request: %+v, %v", got, err)
		}

		var d wire.Attr
		if err := call(wire.OpMkdir, &wire.CreateReq{Parent: RootIno, Name: "d", Mode: 0o755}, &d); err != nil {
			t.Fatal(err)
		}
		if err := call(wire.OpRename, &wire.RenameReq{OldParent: RootIno, OldName: "f", NewParent: d.Ino, NewName: "g"}, &wire.Empty{}); err != nil {
			t.Fatal(err)
		}
		if err := call(wire.OpResolve, &wire.ResolveReq{Path: "/d/g"}, &got); err != nil || got.Ino != f.Ino {
			t.Fatalf("resolve: %+v, %v", got, err)
		}
		if err := call(wire.OpSetXattr, &wire.XattrReq{Ino: f.Ino, Name: "user.k", Value: []byte("v")}, &wire.Empty{}); err != nil {
			t.Fatal(err)
		}
		var val wire.BytesResp
		if err := call(wire.OpGetXattr, &wire.XattrReq{Ino: f.Ino, Name: "user.k"}, &val); err != nil || string(val.B) != "v" {
			t.Fatalf("getxattr: %q, %v", val.B, err)
		}
		var names wire.NamesResp
		if err := call(wire.OpListXattr, &wire.InoReq{Ino: f.Ino}, &names); err != nil || len(names.Names) != 1 {
			t.Fatalf("listxattr: %q, %v", names.Names, err)
		}
		var rd wire.ReadDirResp
		if err := call(wire.OpReadDir, &wire.ReadDirReq{Ino: d.Ino, Plus: true}, &rd); err != nil ||
			len(rd.Entries) != 1 || rd.Entries[0].Name != "g" || rd.Entries[0].Attr == nil || rd.Entries[0].Attr.Ino != f.Ino || !rd.EOF {
			t.Fatalf("readdir: %+v, %v", rd, err)
		}
		if err := call(wire.OpCommitWrite, &wire.CommitWriteReq{Ino: f.Ino, End: 4096, Mtime: 1}, &got); err != nil || got.Size != 4096 {
			t.Fatalf("commitwrite: %+v, %v", got, err)
		}
		err = call(wire.OpSetLayout, &wire.SetLayoutReq{Ino: f.Ino, Layout: placement.Layout{StripeSize: 1 << 20, StripeCount: 1}}, &wire.Empty{})
		wantCode(t, "setlayout of written file", err, errs.Busy)
		var lm wire.LayoutMsg
		if err := call(wire.OpGetLayout, &wire.InoReq{Ino: f.Ino}, &lm); err != nil || lm.Chains[0] != placement.ChainID(tid) {
			t.Fatalf("getlayout: %v, %v", lm.Layout, err)
		}
		var sl wire.Attr
		if err := call(wire.OpSymlink, &wire.SymlinkReq{Parent: RootIno, Name: "sl", Target: "d/g"}, &sl); err != nil {
			t.Fatal(err)
		}
		var target wire.StringResp
		if err := call(wire.OpReadlink, &wire.InoReq{Ino: sl.Ino}, &target); err != nil || target.S != "d/g" {
			t.Fatalf("readlink: %q, %v", target.S, err)
		}
		if err := call(wire.OpLink, &wire.LinkReq{Ino: f.Ino, NewParent: RootIno, NewName: "h"}, &got); err != nil || got.Nlink != 2 {
			t.Fatalf("link: %+v, %v", got, err)
		}
		if err := call(wire.OpSetAttr, &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetMode, Mode: 0o600}, &got); err != nil || got.Mode != modeReg|0o600 {
			t.Fatalf("setattr: %+v, %v", got, err)
		}
		for _, op := range []struct {
			op  wire.Op
			req wire.Message
		}{
			{wire.OpRemoveXattr, &wire.XattrReq{Ino: f.Ino, Name: "user.k"}},
			{wire.OpUnlink, &wire.NameReq{Parent: RootIno, Name: "h"}},
			{wire.OpUnlink, &wire.NameReq{Parent: d.Ino, Name: "g"}},
			{wire.OpUnlink, &wire.NameReq{Parent: RootIno, Name: "sl"}},
			{wire.OpRmdir, &wire.NameReq{Parent: RootIno, Name: "d"}},
		} {
			if err := call(op.op, op.req, &wire.Empty{}); err != nil {
				t.Fatalf("op %d: %v", op.op, err)
			}
		}
		// The freed file's chunk goes through OpChunkRemove.
		if err := s.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		ts.mu.Lock()
		removed := ts.removed
		ts.mu.Unlock()
		if len(removed) != 1 || removed[0].Target != tid || removed[0].Ino != f.Ino || len(removed[0].Slots) != 1 || removed[0].Slots[0] != 0 {
			t.Fatalf("chunk removals %+v", removed)
		}

		// The registry survives a restart.
		rt2, err := cluster.New(ctx, cluster.Options{DB: db})
		if err != nil {
			t.Fatal(err)
		}
		if l, _ := rt2.List(ctx); len(l) != 1 || l[0].ID != tid || l[0].Addr != taddr || l[0].Node != "n1" {
			t.Fatalf("reloaded registry %+v", l)
		}
		rt2.Close()

		// A target whose node stops heart-beating turns unhealthy.
		tsrv.Close()
		deadline := time.Now().Add(10 * time.Second)
		for {
			l, _ := rt.List(ctx)
			if !l[0].Healthy {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("target still healthy after its server closed")
			}
			time.Sleep(5 * time.Millisecond)
		}
		c.Close()
		s.Close()
		rt.Close()
		if err := <-rtDone; err != nil {
			t.Fatalf("cluster.Manager.Run: %v", err)
		}
		msrv.Close()
	}()
	// Goroutines of servers and connections wind down.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
