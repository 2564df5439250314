package meta

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestStageReport: reports add to their job's sums; a stager runs until it
// says it is done or stops reporting for 30 s; the depth is the running
// stagers' largest; jobs past the cap are summed under StageOtherJob.
func TestStageReport(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := New(context.Background(), Options{DB: openTestDB(t), Targets: newFakeTargets(2), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	report := func(job, stager string, c wire.StageCounts, depth uint32, done bool) {
		t.Helper()
		if err := s.StageReport(ctx, &wire.StageReportReq{Job: job, Stager: stager, Add: c, Depth: depth, Done: done}); err != nil {
			t.Fatal(err)
		}
	}
	stats := func() map[string]StageStats {
		m := map[string]StageStats{}
		for _, st := range s.StageStats() {
			m[st.Job] = st
		}
		return m
	}
	report("train", "a", wire.StageCounts{Hits: 2, Misses: 1, BytesAhead: 200, BytesOnDemand: 100, Restored: 3, RestoredBytes: 300}, 8, false)
	report("train", "b", wire.StageCounts{Hits: 1, Restored: 1, RestoredBytes: 10, Failed: 1}, 32, false)
	report("train", "a", wire.StageCounts{Misses: 2, BytesOnDemand: 50}, 16, false)
	report("eval", "c", wire.StageCounts{Restored: 5, RestoredBytes: 5}, 0, false)
	got := stats()
	want := wire.StageCounts{Hits: 3, Misses: 3, BytesAhead: 200, BytesOnDemand: 150, Restored: 4, RestoredBytes: 310, Failed: 1}
	if tr := got["train"]; tr.Counts != want || tr.Running != 2 || tr.Depth != 32 {
		t.Fatalf("train: %+v, want %+v, 2 running, depth 32", tr, want)
	}
	if ev := got["eval"]; ev.Counts.Restored != 5 || ev.Running != 1 {
		t.Fatalf("eval: %+v", ev)
	}

	report("train", "b", wire.StageCounts{}, 32, true) // b ends
	if tr := stats()["train"]; tr.Running != 1 || tr.Depth != 16 || tr.Counts != want {
		t.Fatalf("after b ended: %+v", tr)
	}
	now = now.Add(31 * time.Second) // a stops reporting
	if tr := stats()["train"]; tr.Running != 0 || tr.Depth != 0 || tr.Counts != want {
		t.Fatalf("after a went quiet: %+v", tr)
	}

	for i := range maxStageJobs {
		report(fmt.Sprintf("j%d", i), "s", wire.StageCounts{Restored: 1}, 0, true)
	}
	if got := stats(); len(got) != maxStageJobs+1 || got[StageOtherJob].Counts.Restored != 2 {
		t.Fatalf("%d jobs, %s: %+v; want %d jobs, 2 restores under %s", len(got), StageOtherJob, got[StageOtherJob], maxStageJobs+1, StageOtherJob)
	}
	err = s.StageReport(ctx, &wire.StageReportReq{Job: strings.Repeat("x", MaxNameLen+1)})
	if errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("a long job name: %v", err)
	}
}
