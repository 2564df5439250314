package target

import (
	"context"
	"testing"

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
