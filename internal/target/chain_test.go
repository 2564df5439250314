package target

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// fakeMeta serves a chain table held by the test and records SyncDone.
type fakeMeta struct {
	mu   sync.Mutex
	info wire.ClusterInfo
	done []wire.SyncDoneReq
}

func (m *fakeMeta) Cluster(context.Context) (*wire.ClusterInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	info := m.info
	info.Chains = slices.Clone(info.Chains)
	return &info, nil
}

func (m *fakeMeta) SyncDone(_ context.Context, req *wire.SyncDoneReq) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done = append(m.done, *req)
	return nil
}

// publish installs chain c in the table and pushes the table to every
// service, as heartbeats would.
func (m *fakeMeta) publish(c placement.Chain, envs []*env) {
	m.mu.Lock()
	m.info.ChainsVersion++
	m.info.Chains = []placement.Chain{c.Clone()}
	m.mu.Unlock()
	info, _ := m.Cluster(context.Background())
	for _, e := range envs {
		e.svc.SetCluster(info)
	}
}

// startChain runs n targets (IDs 1..n), each with its own service, and a
// chain over all of them in that order, published to every service; it
// returns a connection to each.
func startChain(t *testing.T, n int) ([]*env, *fakeMeta, placement.Chain, []*wire.Conn) {
	t.Helper()
	m := &fakeMeta{}
	c := placement.Chain{ID: placement.FirstReplicatedChain, Version: 1}
	var envs []*env
	for i := range n {
		id := placement.TargetID(i + 1)
		e := startEnv(t, id)
		envs = append(envs, e)
		m.info.Targets = append(m.info.Targets, wire.TargetAddr{ID: id, Addr: e.addr, Healthy: true})
		c.Replicas = append(c.Replicas, placement.Replica{Target: id, State: placement.Serving})
	}
	for _, e := range envs {
		e.svc.SetMeta(m, 0)
	}
	m.publish(c, envs)
	conns := make([]*wire.Conn, n)
	for i, e := range envs {
		cn, err := wire.Dial(context.Background(), e.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cn.Close() })
		conns[i] = cn
	}
	return envs, m, c, conns
}

// TestChainReplication runs three targets with a chain over them: writes go
// to the head and reach every replica; stale versions are refused; a
// replica taken out misses writes, and the tail's resync makes it identical
// again.
func TestChainReplication(t *testing.T) {
	ctx := context.Background()
	checkGoroutines(t)
	envs, m, c, conns := startChain(t, 3)
	ref := func() wire.ChainRef { return wire.ChainRef{Chain: c.ID, ChainVer: c.Version} }
	write := func(to int, ino uint64, off int, data []byte) error {
		req := &wire.ChunkWriteReq{ChunkRef: wire.ChunkRef{Target: placement.TargetID(to + 1), ChainRef: ref(), Ino: ino}, Off: uint64(off)}
		_, err := conns[to].Call(ctx, wire.OpChunkWrite, req, [][]byte{data}, nil, nil)
		return err
	}
	read := func(from int, ino uint64, n int) ([]byte, error) {
		buf := make([]byte, n)
		req := &wire.ChunkReadReq{ChunkRef: wire.ChunkRef{Target: placement.TargetID(from + 1), ChainRef: ref(), Ino: ino}, Len: uint32(n)}
		got, err := conns[from].Call(ctx, wire.OpChunkRead, req, nil, &wire.ChunkReadResp{}, buf)
		return buf[:got], err
	}
	a := bytes.Repeat([]byte("a"), 200<<10)
	if err := write(0, 7, 0, a); err != nil {
		t.Fatal(err)
	}
	for i := range envs {
		if got, err := read(i, 7, len(a)); err != nil || !bytes.Equal(got, a) {
			t.Fatalf("replica %d after a write to the head: %d bytes, %v", i+1, len(got), err)
		}
	}
	// Only the head takes a client's write.
	if err := write(1, 7, 0, a); errs.CodeOf(err) != errs.ChainChanged {
		t.Fatalf("write to a middle replica: %v, want chain changed", err)
	}
	// A stale version is refused.
	c.Version = 0
	if err := write(0, 7, 0, a); errs.CodeOf(err) != errs.ChainChanged {
		t.Fatalf("write with version 0: %v, want chain changed", err)
	}
	c.Version = 1
	fence := func(ino uint64, mode uint8) {
		t.Helper()
		req := &wire.ChunkFenceReq{ChunkSetReq: wire.ChunkSetReq{Target: 1, ChainRef: ref(), Ino: ino, Slots: []uint32{0}}, Mode: mode}
		if _, err := conns[0].Call(ctx, wire.OpChunkFence, req, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	fences := func(i int) []uint64 {
		t.Helper()
		var resp wire.ChunkListResp
		req := &wire.ChunkListReq{Target: placement.TargetID(i + 1), ChainRef: ref(), Limit: 100, Fences: true}
		if _, err := conns[i].Call(ctx, wire.OpChunkList, req, nil, &resp, nil); err != nil || !resp.Fences {
			t.Fatalf("fences of replica %d: %v (listed fences: %v)", i+1, err, resp.Fences)
		}
		var inos []uint64
		for _, ci := range resp.Chunks {
			inos = append(inos, ci.Ino)
		}
		return inos
	}
	fence(11, wire.FenceFreeze) // on every replica; thawed while 3 is away

	// Replica 3 leaves; writes go on with 1 and 2.
	c.TakeOffline(3)
	m.publish(c, envs)
	fence(11, wire.FenceThaw)
	fence(10, wire.FenceFreeze) // 3 misses it
	if got := fences(2); !slices.Equal(got, []uint64{11}) {
		t.Fatalf("fences of replica 3 while away: %v, want [11]", got)
	}
	b := bytes.Repeat([]byte("b"), 100<<10)
	if err := write(0, 7, 50<<10, b); err != nil {
		t.Fatal(err)
	}
	if err := write(0, 8, 0, b); err != nil {
		t.Fatal(err)
	}
	if _, err := read(2, 7, 10); errs.CodeOf(err) != errs.ChainChanged {
		t.Fatalf("read from an offline replica: %v, want chain changed", err)
	}
	// A chunk removed while 3 is away.
	if err := write(0, 9, 0, b); err != nil {
		t.Fatal(err)
	}
	c.StartSync(3) // back, syncing: takes writes, serves no reads
	c.TakeOffline(3)
	m.publish(c, envs)
	rm := &wire.ChunkRemoveReq{ChunkSetReq: wire.ChunkSetReq{Target: 1, ChainRef: ref(), Ino: 9, Slots: []uint32{0}}}
	if _, err := conns[0].Call(ctx, wire.OpChunkRemove, rm, nil, nil, nil); err != nil {
		t.Fatal(err)
	}

	c.StartSync(3)
	m.publish(c, envs)
	deadline := time.Now().Add(10 * time.Second)
	for {
		m.mu.Lock()
		n := len(m.done)
		m.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no resync reported done")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := m.done[0]; d.Chain != c.ID || d.Target != 3 || d.Version != c.Version {
		t.Fatalf("sync done %+v for %v", d, c)
	}
	c.FinishSync(3, c.Version)
	m.publish(c, envs)
	want := append(slices.Clone(a[:50<<10]), b...)
	want = append(want, a[150<<10:]...)
	for i := range envs {
		if got, err := read(i, 7, len(want)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("replica %d after resync: %d bytes, %v", i+1, len(got), err)
		}
		if got, err := read(i, 8, len(b)); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("replica %d: chunk written while it was away: %d bytes, %v", i+1, len(got), err)
		}
		if got, err := read(i, 9, 10); err != nil || len(got) != 0 {
			t.Fatalf("replica %d: chunk removed while it was away reads %d bytes, %v", i+1, len(got), err)
		}
		// The resync gave 3 the fence frozen without it and thawed the
		// one thawed without it.
		if got := fences(i); !slices.Equal(got, []uint64{10}) {
			t.Fatalf("fences of replica %d after resync: %v, want [10]", i+1, got)
		}
	}
}

// TestDiscardStaleChainStore: a target whose replica of a chain was
// replaced by another target's (re-replication, draining) drops its store
// of that chain when the new table arrives; a member keeps its store, and
// a chain the table does not list is left alone.
func TestDiscardStaleChainStore(t *testing.T) {
	ctx := context.Background()
	envs, m, c, conns := startChain(t, 2)
	req := &wire.ChunkWriteReq{ChunkRef: wire.ChunkRef{Target: 1, ChainRef: wire.ChainRef{Chain: c.ID, ChainVer: c.Version}, Ino: 5}}
	if _, err := conns[0].Call(ctx, wire.OpChunkWrite, req, [][]byte{[]byte("data")}, nil, nil); err != nil {
		t.Fatal(err)
	}
	dirOf := func(e *env) string {
		ids := e.svc.Targets()
		st, _ := e.svc.Store(ids[0])
		return filepath.Join(st.Dir(), "chains", strconv.FormatUint(uint64(c.ID), 10))
	}
	for i, e := range envs {
		if _, err := os.Stat(dirOf(e)); err != nil {
			t.Fatalf("target %d has no store of the chain: %v", i+1, err)
		}
	}
	// An unlisted chain's store stays.
	other := filepath.Join(filepath.Dir(dirOf(envs[1])), "99")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	// Target 2's replica moves to a target 3 (not running: only the table).
	moved := c.Clone()
	moved.Replicas[1] = placement.Replica{Target: 3, State: placement.Syncing}
	moved.Version++
	m.publish(moved, envs)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(dirOf(envs[1])); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("target 2 kept its store of a chain it left")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(dirOf(envs[0])); err != nil {
		t.Errorf("target 1, still a member, lost its store: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the store of a chain the table does not list was removed: %v", err)
	}
}
