package target

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestQosUseSample: a job's demand is its served bytes per second since
// the last sample plus its bytes waiting; the first sample knows no rate;
// unnamed jobs and the overflow bucket are not reported.
func TestQosUseSample(t *testing.T) {
	var u qosUse
	t0 := time.Unix(100, 0)
	first := u.sample([]qos.JobStats{{Job: "a", ServedBytes: 1000, QueuedBytes: 50}, {Job: "b", ServedBytes: 10}, {Job: "", ServedBytes: 5, QueuedBytes: 5}}, t0)
	if want := []wire.QosUse{{Job: "a", Demand: 50}}; !reflect.DeepEqual(first, want) {
		t.Errorf("first sample %+v, want %+v", first, want)
	}
	second := u.sample([]qos.JobStats{
		{Job: "a", ServedBytes: 3000, QueuedBytes: 0},  // 2000 in 2 s
		{Job: "b", ServedBytes: 10, QueuedBytes: 0},    // idle
		{Job: "c", ServedBytes: 400, QueuedBytes: 100}, // new: 400 in 2 s
		{Job: qos.OtherJob, ServedBytes: 1 << 30},      // never
	}, t0.Add(2*time.Second))
	if want := []wire.QosUse{{Job: "a", Demand: 1000}, {Job: "c", Demand: 300}}; !reflect.DeepEqual(second, want) {
		t.Errorf("second sample %+v, want %+v", second, want)
	}
}
