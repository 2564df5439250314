package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestFenceChunks sends fences and a remove to a target's head through the
// Manager: the requests arrive as sent, and a chain-changed answer is
// retried.
func TestFenceChunks(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var fences []wire.ChunkFenceReq
	var removes []wire.ChunkRemoveReq
	refuse := 1 // chain-changed answers still to give
	srv := &wire.Server{Logger: slog.New(slog.DiscardHandler)}
	srv.Handle(wire.OpChunkFence, func(_ context.Context, r *wire.Request) (wire.Response, error) {
		var m wire.ChunkFenceReq
		if err := wire.Unmarshal(r.Body, &m); err != nil {
			return wire.Response{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		if refuse > 0 {
			refuse--
			return wire.Response{}, errs.New(errs.ChainChanged, "test: chain changed")
		}
		fences = append(fences, m)
		return wire.Response{}, nil
	})
	srv.Handle(wire.OpChunkRemove, func(_ context.Context, r *wire.Request) (wire.Response, error) {
		var m wire.ChunkRemoveReq
		if err := wire.Unmarshal(r.Body, &m); err != nil {
			return wire.Response{}, err
		}
		mu.Lock()
		removes = append(removes, m)
		mu.Unlock()
		return wire.Response{}, nil
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		if err := <-served; !errors.Is(err, wire.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})

	db := kv.NewMemory()
	defer db.Close()
	r, err := New(ctx, Options{DB: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.RegisterTarget(ctx, 3, l.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if err := r.FenceChunks(ctx, 3, 42, []uint32{0, 5}, wire.FenceFreeze); err != nil {
		t.Fatal(err)
	}
	if err := r.FenceChunks(ctx, 3, 42, []uint32{5}, wire.FenceThaw); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveChunks(ctx, 3, 42, []uint32{0}); err != nil {
		t.Fatal(err)
	}
	if err := r.FenceChunks(ctx, 9, 42, nil, wire.FenceFreeze); errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("fence on an unknown chain: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []wire.ChunkFenceReq{
		{ChunkSetReq: wire.ChunkSetReq{Target: 3, ChainRef: wire.ChainRef{Chain: 3}, Ino: 42, Slots: []uint32{0, 5}}, Mode: wire.FenceFreeze},
		{ChunkSetReq: wire.ChunkSetReq{Target: 3, ChainRef: wire.ChainRef{Chain: 3}, Ino: 42, Slots: []uint32{5}}, Mode: wire.FenceThaw},
	}
	if !slices.EqualFunc(fences, want, func(a, b wire.ChunkFenceReq) bool {
		return a.Target == b.Target && a.ChainRef == b.ChainRef && a.Ino == b.Ino && a.Mode == b.Mode && slices.Equal(a.Slots, b.Slots)
	}) {
		t.Fatalf("fences received %+v, want %+v", fences, want)
	}
	if len(removes) != 1 || removes[0].Target != 3 || removes[0].Ino != 42 || !slices.Equal(removes[0].Slots, []uint32{0}) {
		t.Fatalf("removes received %+v", removes)
	}
}
