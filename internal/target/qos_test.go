package target

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/chunk"

	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestQosTagsCounted: chunk requests over the wire are counted under the
// class and job they carry; an untagged one (an older client) as training,
// job ""; invalid settings are refused.
func TestQosTagsCounted(t *testing.T) {
	e := start(t, 1)
	c := dial(t, e.addr)
	ctx := context.Background()
	ref := wire.ChunkRef{Target: 1, Ino: 5, Slot: 0}
	if _, err := c.Call(ctx, wire.OpChunkWrite, &wire.ChunkWriteReq{ChunkRef: ref, Qos: TagOf("ckpt", qos.Checkpoint)}, [][]byte{data(1, 3000)}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, c, ref, 3000, data(2, 1000), false); err != nil {
		t.Fatal(err)
	}
	var resp wire.ChunkReadResp
	if _, err := c.Call(ctx, wire.OpChunkRead, &wire.ChunkReadReq{ChunkRef: ref, Len: 4096, Qos: TagOf("infer", qos.Interactive)}, nil, &resp, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	st := e.svc.QosStats()
	for class, want := range map[string]uint64{"checkpoint": 3000, "training": 1000, "interactive": 4096, "background": 0} {
		if got := st.Classes[class].ServedBytes; got != want {
			t.Errorf("class %s served %d bytes, want %d", class, got, want)
		}
	}
	jobs := map[string]uint64{}
	for _, j := range st.Jobs {
		jobs[j.Job] = j.ServedBytes
	}
	if jobs["ckpt"] != 3000 || jobs["infer"] != 4096 || jobs[""] != 1000 {
		t.Errorf("jobs served %v", jobs)
	}
	if err := e.svc.ConfigureQos(qos.Config{Jobs: map[string]qos.Limit{"x": {Rate: 5}}}); err == nil {
		t.Error("a limit with a rate and no burst was accepted")
	}
	if err := e.svc.ConfigureQos(ConfigOf(&wire.QosConfig{Weights: []uint32{1, 1, 1, 1}, Jobs: []wire.QosJob{{Job: "x", Rate: 5, Burst: 5}}})); err != nil {
		t.Error(err)
	}
	if n := e.svc.QosStats().LimitedJobs; n != 1 {
		t.Errorf("%d limited jobs after one limit was applied", n)
	}
}

// TestQosChunkSetOpsScheduled: chunk syncs, truncates and removes pass the
// scheduler in the class and job they carry (charged no bytes), an
// untagged one (an older sender) as training; a limited job whose bucket
// is in debt waits with them until it refills.
func TestQosChunkSetOpsScheduled(t *testing.T) {
	e := start(t, 1)
	c := dial(t, e.addr)
	ctx := context.Background()
	ref := wire.ChunkRef{Target: 1, Ino: 7, Slot: 0}
	ckpt := TagOf("ckpt", qos.Checkpoint)
	if _, err := c.Call(ctx, wire.OpChunkWrite, &wire.ChunkWriteReq{ChunkRef: ref, Qos: ckpt}, [][]byte{data(1, 8192)}, nil, nil); err != nil {
		t.Fatal(err)
	}
	set := wire.ChunkSetReq{Target: 1, Ino: 7, Slots: []uint32{0}}
	before := e.svc.QosStats()
	if _, err := c.Call(ctx, wire.OpChunkSync, &wire.ChunkSyncReq{ChunkSetReq: set, Qos: ckpt}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, wire.OpChunkTruncate, &wire.ChunkTruncateReq{ChunkRef: ref, Size: 4096, Qos: TagOf("gc", qos.Background)}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	// An older sender's sync: the body without the tag.
	if _, err := c.Call(ctx, wire.OpChunkSync, &set, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	after := e.svc.QosStats()
	served := func(st QosStats, class string) uint64 { return st.Classes[class].Served }
	for class, want := range map[string]uint64{"checkpoint": 1, "background": 1, "training": 1, "interactive": 0} {
		if got := served(after, class) - served(before, class); got != want {
			t.Errorf("class %s: %d requests served by the sync, truncate and untagged sync, want %d", class, got, want)
		}
		if got := after.Classes[class].ServedBytes - before.Classes[class].ServedBytes; got != 0 {
			t.Errorf("class %s charged %d bytes for syncs and truncates", class, got)
		}
	}

	// Job "slow" may have 1000 bytes a second: a 4 KiB write puts it
	// 3 KiB in debt, and its remove then waits about 3 s for the bucket.
	if err := e.svc.ConfigureQos(qos.Config{Jobs: map[string]qos.Limit{"slow": {Rate: 1000, Burst: 1000}}}); err != nil {
		t.Fatal(err)
	}
	slow := TagOf("slow", qos.Training)
	if _, err := c.Call(ctx, wire.OpChunkWrite, &wire.ChunkWriteReq{ChunkRef: ref, Qos: slow}, [][]byte{data(2, 4096)}, nil, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, wire.OpChunkRemove, &wire.ChunkRemoveReq{ChunkSetReq: set, Qos: slow}, nil, nil, nil)
		done <- err
	}()
	queued := func() bool {
		for _, j := range e.svc.QosStats().Jobs {
			if j.Job == "slow" && j.Queued == 1 {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); !queued(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the remove of a job in debt did not queue in the scheduler")
		}
	}
	if _, found, err := e.svc.targets[1].store.ChunkInfo(chunk.ID{Ino: 7, Slot: 0}); err != nil || !found {
		t.Fatalf("the chunk went before the job's bucket allowed its removal (found %v, %v)", found, err)
	}
	// Lift the limit: the remove goes.
	if err := e.svc.ConfigureQos(qos.Config{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, found, err := e.svc.targets[1].store.ChunkInfo(chunk.ID{Ino: 7, Slot: 0}); err != nil || found {
		t.Fatalf("the chunk is still there after its removal (found %v, %v)", found, err)
	}
}
