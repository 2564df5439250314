package metrics

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/meta"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/target"
	"github.com/sluice-fs/sluice/internal/wire"
)

func TestWrapCountsAndClassifies(t *testing.T) {
	m := New()
	ok := m.Wrap(wire.OpCreate, func(context.Context, *wire.Request) (wire.Response, error) { return wire.Response{}, nil })
	bad := m.Wrap(wire.OpLookup, func(context.Context, *wire.Request) (wire.Response, error) {
		return wire.Response{}, errs.New(errs.NotFound, "meta: no entry")
	})
	for range 3 {
		ok(context.Background(), &wire.Request{})
	}
	bad(context.Background(), &wire.Request{})
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch f.GetName() {
			case "sluice_op_duration_seconds":
				got[key] = fmt.Sprint(mt.GetHistogram().GetSampleCount())
			case "sluice_op_errors_total":
				got[key] = fmt.Sprint(mt.GetCounter().GetValue())
			}
		}
	}
	want := map[string]string{
		"sluice_op_duration_seconds{kind=meta,op=create}":                        "3",
		"sluice_op_duration_seconds{kind=meta,op=lookup}":                        "1",
		"sluice_op_errors_total{class=" + errs.NotFound.String() + ",op=lookup}": "1",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if r := m.RecentErrors(); len(r) != 1 || r[0].Op != "lookup" {
		t.Fatalf("recent errors %+v", r)
	}
}

func TestListenerCountsConnections(t *testing.T) {
	m := New()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ml := m.Listener(l)
	defer ml.Close()
	go func() {
		c, err := net.Dial("tcp", l.Addr().String())
		if err == nil {
			time.Sleep(50 * time.Millisecond)
			c.Close()
		}
	}()
	c, err := ml.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*tcpConn); !ok {
		t.Fatalf("TCP connection wrapped as %T", c)
	}
	if v := gauge(m.conns); v != 1 {
		t.Fatalf("connections %v, want 1", v)
	}
	c.Close()
	c.Close()
	if v := gauge(m.conns); v != 0 {
		t.Fatalf("connections %v after close, want 0", v)
	}
}

func gauge(g prometheus.Gauge) float64 {
	var m dto.Metric
	g.Write(&m)
	return m.GetGauge().GetValue()
}

// TestQosMetrics: the targets' QoS counters are exported per class, the
// wait times as a histogram.
func TestQosMetrics(t *testing.T) {
	svc, err := target.OpenDir(t.TempDir(), []placement.TargetID{1}, target.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	m := New()
	m.AddTargets(svc)
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	classes := map[string]bool{}
	for _, f := range fams {
		if f.GetName() != "sluice_qos_wait_seconds" {
			continue
		}
		for _, mt := range f.GetMetric() {
			if mt.GetHistogram() == nil || len(mt.GetHistogram().GetBucket()) != len(qos.WaitBuckets) {
				t.Errorf("wait metric %v is not a histogram of %d buckets", mt, len(qos.WaitBuckets))
			}
			for _, l := range mt.GetLabel() {
				classes[l.GetValue()] = true
			}
		}
	}
	for _, c := range []string{"interactive", "training", "checkpoint", "background"} {
		if !classes[c] {
			t.Errorf("no wait histogram for class %s (have %v)", c, classes)
		}
	}
}

type fakeStages []meta.StageStats

func (f fakeStages) StageStats() []meta.StageStats { return f }

// TestStageCollector: each job's reported sums come out as sluice_stage_*
// labelled by job, each counter from its own field.
func TestStageCollector(t *testing.T) {
	m := New()
	m.AddStage(fakeStages{{Job: "train", Counts: wire.StageCounts{Hits: 1, Misses: 2, BytesAhead: 3, BytesOnDemand: 4, Restored: 5, RestoredBytes: 6, Failed: 7}, Running: 8, Depth: 9}})
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "sluice_stage_") {
			continue
		}
		for _, mt := range f.GetMetric() {
			if l := mt.GetLabel(); len(l) != 1 || l[0].GetName() != "job" || l[0].GetValue() != "train" {
				t.Fatalf("%s: labels %v", f.GetName(), l)
			}
			got[f.GetName()] = mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"sluice_stage_hits_total": 1, "sluice_stage_misses_total": 2, "sluice_stage_ahead_bytes_total": 3,
		"sluice_stage_on_demand_bytes_total": 4, "sluice_stage_restored_files_total": 5, "sluice_stage_restored_bytes_total": 6,
		"sluice_stage_failures_total": 7, "sluice_stage_running": 8, "sluice_stage_depth": 9,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

type fakeRestores meta.RestoreTotals

func (f fakeRestores) RestoreTotals() meta.RestoreTotals { return meta.RestoreTotals(f) }

// TestRestoreCollector: each restore count comes out as its own
// sluice_hsm_* counter.
func TestRestoreCollector(t *testing.T) {
	m := New()
	m.AddRestores(fakeRestores{Leases: 1, Takeovers: 2, Restored: 3, RestoredBytes: 4, CutToZero: 5})
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "sluice_hsm_") {
			got[f.GetName()] = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"sluice_hsm_restore_leases_total": 1, "sluice_hsm_restore_takeovers_total": 2, "sluice_hsm_restores_total": 3,
		"sluice_hsm_restored_bytes_total": 4, "sluice_hsm_released_truncates_total": 5,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

// TestAbsorbCollector: each staging count comes out as its own
// sluice_absorb_* metric, and nothing while the client has no staging
// area.
func TestAbsorbCollector(t *testing.T) {
	m := New()
	var st client.StagingStats
	ok := false
	m.AddAbsorb(func() (client.StagingStats, bool) { return st, ok })
	gather := func() map[string]float64 {
		fams, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range fams {
			if strings.HasPrefix(f.GetName(), "sluice_absorb_") {
				mt := f.GetMetric()[0]
				got[f.GetName()] = mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
			}
		}
		return got
	}
	if got := gather(); len(got) != 0 {
		t.Fatalf("without a staging area: %v", got)
	}
	st = client.StagingStats{Segments: 1, StagedBytes: 2, Drained: 3, DrainedBytes: 4, PendingSegments: 5, RenamesQueued: 6, Renamed: 7,
		DrainErrors: 8, LastErrors: 9, Adopted: 10, InMemory: true, Recycled: 11, Limit: 12, Held: 13, PeakHeld: 14, Throttled: 15,
		Waiting: 16, ThrottledTime: 1500 * time.Millisecond}
	ok = true
	want := map[string]float64{
		"sluice_absorb_staged_segments_total": 1, "sluice_absorb_staged_bytes_total": 2, "sluice_absorb_drained_segments_total": 3,
		"sluice_absorb_drained_bytes_total": 4, "sluice_absorb_pending_segments": 5, "sluice_absorb_renames_queued_total": 6,
		"sluice_absorb_renamed_total": 7, "sluice_absorb_drain_errors_total": 8, "sluice_absorb_rename_errors_total": 9,
		"sluice_absorb_adopted_total": 10, "sluice_absorb_in_memory": 1, "sluice_absorb_recycled_segments_total": 11,
		"sluice_absorb_limit_bytes": 12, "sluice_absorb_held_bytes": 13, "sluice_absorb_held_peak_bytes": 14,
		"sluice_absorb_throttled_writes_total": 15, "sluice_absorb_waiting_writes": 16, "sluice_absorb_throttled_seconds_total": 1.5,
	}
	if got := gather(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	// Names, units and help as Prometheus's linter wants them.
	problems, err := testutil.CollectAndLint(absorbCollector{func() (client.StagingStats, bool) { return st, true }})
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v, %v", problems, err)
	}
}

type fakeCuts meta.CutTotals

func (f fakeCuts) CutTotals() meta.CutTotals { return meta.CutTotals(f) }

// TestCutCollector: each cut count comes out as its own counter.
func TestCutCollector(t *testing.T) {
	m := New()
	m.AddCuts(fakeCuts{Begun: 7, Refused: 3, Takeovers: 1})
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "sluice_cut") {
			got[f.GetName()] = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	want := map[string]float64{"sluice_cuts_total": 7, "sluice_cut_refused_commits_total": 3, "sluice_cut_takeovers_total": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}
