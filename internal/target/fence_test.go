package target

import (
	"bytes"
	"context"
	"testing"

	"github.com/sluice-fs/sluice/internal/chunk"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

func fence(ctx context.Context, c *wire.Conn, m wire.ChunkFenceReq) error {
	_, err := c.Call(ctx, wire.OpChunkFence, &m, nil, &wire.Empty{}, nil)
	return err
}

func wantMoved(t *testing.T, what string, err error) {
	t.Helper()
	if errs.CodeOf(err) != errs.Moved {
		t.Fatalf("%s: %v, want errs.Moved", what, err)
	}
}

// TestFenceOverLoopback freezes a chunk over the wire: the store's
// errs.Moved reaches the client for writes and truncates, and for reads
// once the chunk is removed; thawing lets writes in again.
func TestFenceOverLoopback(t *testing.T) {
	e := start(t, 2)
	c := dial(t, e.addr)
	ctx := context.Background()
	ref := wire.ChunkRef{Target: 2, Ino: 99, Slot: 1}
	set := wire.ChunkSetReq{Target: 2, Ino: 99, Slots: []uint32{1, 1, 4}}
	p := data(3, 100_000)
	if err := write(ctx, c, ref, 0, p, false); err != nil {
		t.Fatal(err)
	}
	if err := fence(ctx, c, wire.ChunkFenceReq{ChunkSetReq: set, Mode: 9}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("fence with an unknown mode: %v", err)
	}
	if err := fence(ctx, c, wire.ChunkFenceReq{ChunkSetReq: set, Mode: wire.FenceFreeze}); err != nil {
		t.Fatal(err)
	}
	wantMoved(t, "write of a frozen chunk", write(ctx, c, ref, 0, []byte("x"), false))
	_, err := c.Call(ctx, wire.OpChunkTruncate, &wire.ChunkTruncateReq{ChunkRef: ref, Size: 10}, nil, nil, nil)
	wantMoved(t, "truncate of a frozen chunk", err)
	if got, clen, err := read(ctx, c, ref, 0, len(p)); err != nil || clen != uint64(len(p)) || !bytes.Equal(got, p) {
		t.Fatalf("read of a frozen chunk: %d bytes, length %d, %v", len(got), clen, err)
	}
	if _, err := c.Call(ctx, wire.OpChunkSync, &wire.ChunkSyncReq{ChunkSetReq: wire.ChunkSetReq{Target: 2, Ino: 99, Slots: []uint32{1, 4}}}, nil, nil, nil); err != nil {
		t.Fatalf("sync of frozen chunks: %v", err)
	}
	if _, err := c.Call(ctx, wire.OpChunkRemove, &wire.ChunkRemoveReq{ChunkSetReq: wire.ChunkSetReq{Target: 2, Ino: 99, Slots: []uint32{1}}}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err = read(ctx, c, ref, 0, 10)
	wantMoved(t, "read of a removed frozen chunk", err)
	if err := fence(ctx, c, wire.ChunkFenceReq{ChunkSetReq: set, Mode: wire.FenceThaw}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := read(ctx, c, ref, 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("read of a thawed missing chunk: %d bytes, %v", len(got), err)
	}
	if err := write(ctx, c, ref, 0, []byte("again"), true); err != nil {
		t.Fatalf("write after thaw: %v", err)
	}
}

// TestFenceAlongChain sends a freeze to a chain's head: every replica is
// frozen when it answers, and a forwarded write is refused on the last one.
func TestFenceAlongChain(t *testing.T) {
	ctx := context.Background()
	checkGoroutines(t)
	envs, _, ch, conns := startChain(t, 3)
	ref := func(to placement.TargetID) wire.ChunkRef {
		return wire.ChunkRef{Target: to, ChainRef: wire.ChainRef{Chain: ch.ID, ChainVer: ch.Version}, Ino: 5, Slot: 2}
	}
	if err := write(ctx, conns[0], ref(1), 0, []byte("before"), false); err != nil {
		t.Fatal(err)
	}
	set := wire.ChunkSetReq{Target: 1, ChainRef: wire.ChainRef{Chain: ch.ID, ChainVer: ch.Version}, Ino: 5, Slots: []uint32{2}}
	if err := fence(ctx, conns[0], wire.ChunkFenceReq{ChunkSetReq: set, Mode: wire.FenceFreeze}); err != nil {
		t.Fatal(err)
	}
	id := chunk.ID{Ino: 5, Slot: 2}
	for i, e := range envs {
		h, _ := e.svc.lookup(placement.TargetID(i + 1))
		st, err := h.chainStore(ch.ID, e.svc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Frozen(id) {
			t.Fatalf("replica %d is not frozen", i+1)
		}
	}
	wantMoved(t, "write to the head", write(ctx, conns[0], ref(1), 0, []byte("x"), false))
	fw := ref(3)
	fw.Flags = wire.FlagForwarded
	wantMoved(t, "forwarded write to the tail", write(ctx, conns[2], fw, 0, []byte("x"), false))
	for i := range envs {
		if got, _, err := read(ctx, conns[i], ref(placement.TargetID(i+1)), 0, 10); err != nil || string(got) != "before" {
			t.Fatalf("read from replica %d: %q, %v", i+1, got, err)
		}
	}
	if err := fence(ctx, conns[0], wire.ChunkFenceReq{ChunkSetReq: set, Mode: wire.FenceThaw}); err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, conns[0], ref(1), 0, []byte("after!"), false); err != nil {
		t.Fatalf("write after thaw: %v", err)
	}
	for i := range envs {
		if got, _, err := read(ctx, conns[i], ref(placement.TargetID(i+1)), 0, 10); err != nil || string(got) != "after!" {
			t.Fatalf("read from replica %d after thaw: %q, %v", i+1, got, err)
		}
	}
}
