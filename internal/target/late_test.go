package target

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/tcpproxy"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestLateTruncateRefused: a chunk truncate that reaches a replica after
// its sender's deadline, held on the network, is not applied, whether it
// came from the client to the head or from the head to the next replica
// along the chain; the replica counts it. One on time is applied on both.
// A late write and a late freeze are refused as well.
func TestLateTruncateRefused(t *testing.T) {
	checkGoroutines(t)
	envs, m, c, conns := startChain(t, 2)
	ref := func(to int, ino uint64) wire.ChunkRef {
		return wire.ChunkRef{Target: placement.TargetID(to + 1), ChainRef: wire.ChainRef{Chain: c.ID, ChainVer: c.Version}, Ino: ino}
	}
	ctx := context.Background()
	content := bytes.Repeat([]byte("0123456789abcdef"), 100000/16)
	lengths := func(ino uint64) [2]int {
		var n [2]int
		for i := range envs {
			buf := make([]byte, len(content))
			got, err := conns[i].Call(ctx, wire.OpChunkRead, &wire.ChunkReadReq{ChunkRef: ref(i, ino), Len: uint32(len(buf))}, nil, &wire.ChunkReadResp{}, buf)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf[:got], content[:got]) {
				t.Fatalf("replica %d of chunk %d holds other bytes", i+1, ino)
			}
			n[i] = got
		}
		return n
	}
	late := func(i int) uint64 {
		s, _ := envs[i].svc.Stats(placement.TargetID(i + 1))
		return s.LateOps
	}
	// awaitLate waits for replica i to have refused want late requests.
	awaitLate := func(i int, want uint64) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); late(i) < want; {
			if time.Now().After(end) {
				t.Fatalf("replica %d refused %d late requests; want %d", i+1, late(i), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	write := func(ino uint64) {
		t.Helper()
		if _, err := conns[0].Call(ctx, wire.OpChunkWrite, &wire.ChunkWriteReq{ChunkRef: ref(0, ino), Off: 0}, [][]byte{content}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	write(1)

	// Client to head, held 600 ms, deadline 200 ms.
	toHead := tcpproxy.Start(t, envs[0].addr)
	cp, err := wire.Dial(ctx, toHead.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	toHead.SetDelay(600 * time.Millisecond)
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := cp.Call(tctx, wire.OpChunkTruncate, &wire.ChunkTruncateReq{ChunkRef: ref(0, 1), Size: 1000}, nil, nil, nil); err == nil {
		t.Fatal("a truncate held for 600 ms was answered within 200 ms")
	}
	cancel()
	awaitLate(0, 1)
	if n := lengths(1); n != [2]int{len(content), len(content)} {
		t.Fatalf("after a late truncate the replicas hold %v bytes; want all %d", n, len(content))
	}

	// Head to tail, held 600 ms: the head cuts its copy in time, and its
	// forward carries what is left of the deadline.
	toTail := tcpproxy.Start(t, envs[1].addr)
	m.mu.Lock()
	m.info.Targets[1].Addr = toTail.Addr
	m.mu.Unlock()
	m.publish(c, envs)
	write(2) // the head's connection to the tail, through the proxy, now open
	write(3)
	toTail.SetDelay(600 * time.Millisecond)
	tctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := conns[0].Call(tctx, wire.OpChunkTruncate, &wire.ChunkTruncateReq{ChunkRef: ref(0, 2), Size: 1000}, nil, nil, nil); err == nil {
		t.Fatal("a truncate whose forward was held for 600 ms was answered within 300 ms")
	}
	cancel()
	awaitLate(1, 1)
	if n := lengths(2); n != [2]int{1000, len(content)} {
		t.Fatalf("after a late forward the replicas hold %v bytes; want the head cut (1000) and the tail not (%d)", n, len(content))
	}

	// On time, through both proxies: applied on both.
	toHead.SetDelay(0)
	toTail.SetDelay(0)
	tctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cp.Call(tctx, wire.OpChunkTruncate, &wire.ChunkTruncateReq{ChunkRef: ref(0, 3), Size: 1000}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if n := lengths(3); n != [2]int{1000, 1000} {
		t.Fatalf("after a truncate on time the replicas hold %v bytes; want 1000", n)
	}
	if late(0) != 1 || late(1) != 1 {
		t.Fatalf("late requests refused: %d and %d; want 1 each", late(0), late(1))
	}

	// A write held 600 ms with a deadline of 200 ms (its bound travels
	// with its data's CRC32C, as over TCP always).
	write(4)
	toHead.SetDelay(600 * time.Millisecond)
	over := bytes.Repeat([]byte{'Z'}, 1000)
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	w := &wire.ChunkWriteReq{ChunkRef: ref(0, 4), Off: 0, DataCRC: checksum.DataCRC(over), HasDataCRC: true}
	if _, err := cp.Call(wctx, wire.OpChunkWrite, w, [][]byte{over}, nil, nil); err == nil {
		t.Fatal("a write held for 600 ms was answered within 200 ms")
	}
	cancel()
	awaitLate(0, 2)
	if n := lengths(4); n != [2]int{len(content), len(content)} {
		t.Fatalf("after a late write the replicas hold %v bytes of the old content; want all %d", n, len(content))
	}

	// A freeze held 600 ms with a deadline of 200 ms: the chunk stays
	// writable (a late thaw would as well leave a chunk writable that a
	// later freeze froze).
	fctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	fz := &wire.ChunkFenceReq{ChunkSetReq: wire.ChunkSetReq{Target: 1, ChainRef: wire.ChainRef{Chain: c.ID, ChainVer: c.Version}, Ino: 4, Slots: []uint32{0}}, Mode: wire.FenceFreeze}
	if _, err := cp.Call(fctx, wire.OpChunkFence, fz, nil, nil, nil); err == nil {
		t.Fatal("a freeze held for 600 ms was answered within 200 ms")
	}
	cancel()
	awaitLate(0, 3)
	write(4) // not frozen: no errs.Moved
}
