package target

import (
	"bytes"
	"context"
	"testing"

	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestOverwriteThenTruncateOnChain is issue 12's sequence at the target
// layer, through a two-replica chain: write A over [0, 200000), B over
// [20000, 60000), optionally sync, truncate to 50000; both replicas must
// then hold A for [0, 20000) and B for [20000, 50000), and nothing past.
func TestOverwriteThenTruncateOnChain(t *testing.T) {
	ctx := context.Background()
	envs, _, c, conns := startChain(t, 2)
	ref := func(to int, ino uint64) wire.ChunkRef {
		return wire.ChunkRef{Target: placement.TargetID(to + 1), ChainRef: wire.ChainRef{Chain: c.ID, ChainVer: c.Version}, Ino: ino}
	}
	want := append(bytes.Repeat([]byte{'A'}, 20000), bytes.Repeat([]byte{'B'}, 30000)...)
	for ino, withSync := range map[uint64]bool{11: false, 12: true} {
		for _, w := range []struct {
			off  uint64
			data []byte
		}{{0, bytes.Repeat([]byte{'A'}, 200000)}, {20000, bytes.Repeat([]byte{'B'}, 40000)}} {
			if _, err := conns[0].Call(ctx, wire.OpChunkWrite, &wire.ChunkWriteReq{ChunkRef: ref(0, ino), Off: w.off}, [][]byte{w.data}, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if withSync {
			req := &wire.ChunkSyncReq{ChunkSetReq: wire.ChunkSetReq{Target: 1, ChainRef: wire.ChainRef{Chain: c.ID, ChainVer: c.Version}, Ino: ino, Slots: []uint32{0}}}
			if _, err := conns[0].Call(ctx, wire.OpChunkSync, req, nil, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := conns[0].Call(ctx, wire.OpChunkTruncate, &wire.ChunkTruncateReq{ChunkRef: ref(0, ino), Size: 50000}, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		for i := range envs {
			buf := make([]byte, 60000)
			got, err := conns[i].Call(ctx, wire.OpChunkRead, &wire.ChunkReadReq{ChunkRef: ref(i, ino), Len: 60000}, nil, &wire.ChunkReadResp{}, buf)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf[:got], want) {
				t.Fatalf("ino %d (sync %v), replica %d: %d bytes, want %d; first bytes at 20000: %q", ino, withSync, i+1, got, len(want), buf[20000:20004])
			}
		}
	}
}
