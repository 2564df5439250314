package meta

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// stageFixture is a metadata service on db whose clock the test moves.
type stageFixture struct {
	t   *testing.T
	s   *Service
	now *time.Time
}

func newStageFixture(t *testing.T, db kv.DB, now *time.Time) *stageFixture {
	t.Helper()
	s, err := New(context.Background(), Options{DB: db, Targets: newFakeTargets(2), Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return &stageFixture{t: t, s: s, now: now}
}

// report sends a run's totals (what clients of this version send).
func (f *stageFixture) report(job, stager string, c wire.StageCounts, depth uint32, done bool) {
	f.t.Helper()
	if err := f.s.StageReport(context.Background(), &wire.StageReportReq{Job: job, Stager: stager, Add: c, Depth: depth, Done: done, Totals: true}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *stageFixture) stats() map[string]StageStats {
	f.t.Helper()
	out, err := f.s.stageStats(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	m := map[string]StageStats{}
	for _, st := range out {
		m[st.Job] = st
	}
	return m
}

// records counts the staging records of job in the KV.
func (f *stageFixture) records(job string) int {
	f.t.Helper()
	n := 0
	pfx := stageJobPrefix(job)
	err := f.s.db.View(context.Background(), func(tx kv.Txn) error {
		n = 0
		return tx.Scan(pfx, kv.PrefixEnd(pfx), 0, func(_, _ []byte) bool { n++; return true })
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// TestStageReport: runs report their totals; a job's sums are its runs'
// latest totals; a run counts as running until it says it is done or
// stops reporting for 30 s; the depth is the running runs' largest; jobs
// past the cap are summed under StageOtherJob.
func TestStageReport(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newStageFixture(t, openTestDB(t), &now)
	defer f.s.Close()
	f.report("train", "a", wire.StageCounts{Hits: 2, Misses: 1, BytesAhead: 200, BytesOnDemand: 100, Restored: 3, RestoredBytes: 300}, 8, false)
	f.report("train", "b", wire.StageCounts{Hits: 1, Restored: 1, RestoredBytes: 10, Failed: 1}, 32, false)
	f.report("train", "a", wire.StageCounts{Hits: 2, Misses: 3, BytesAhead: 200, BytesOnDemand: 150, Restored: 3, RestoredBytes: 300}, 16, false)
	f.report("eval", "c", wire.StageCounts{Restored: 5, RestoredBytes: 5}, 0, false)
	got := f.stats()
	want := wire.StageCounts{Hits: 3, Misses: 3, BytesAhead: 200, BytesOnDemand: 150, Restored: 4, RestoredBytes: 310, Failed: 1}
	if tr := got["train"]; tr.Counts != want || tr.Running != 2 || tr.Depth != 32 {
		t.Fatalf("train: %+v, want %+v, 2 running, depth 32", tr, want)
	}
	if ev := got["eval"]; ev.Counts.Restored != 5 || ev.Running != 1 {
		t.Fatalf("eval: %+v", ev)
	}

	f.report("train", "b", wire.StageCounts{Hits: 1, Restored: 1, RestoredBytes: 10, Failed: 1}, 32, true) // b ends
	if tr := f.stats()["train"]; tr.Running != 1 || tr.Depth != 16 || tr.Counts != want {
		t.Fatalf("after b ended: %+v", tr)
	}
	now = now.Add(31 * time.Second) // a stops reporting
	if tr := f.stats()["train"]; tr.Running != 0 || tr.Depth != 0 || tr.Counts != want {
		t.Fatalf("after a went quiet: %+v", tr)
	}

	for i := range maxStageJobs {
		f.report(fmt.Sprintf("j%d", i), "s", wire.StageCounts{Restored: 1}, 0, true)
	}
	if got := f.stats(); len(got) != maxStageJobs+1 || got[StageOtherJob].Counts.Restored != 2 {
		t.Fatalf("%d jobs, %s: %+v; want %d jobs, 2 restores under %s", len(got), StageOtherJob, got[StageOtherJob], maxStageJobs+1, StageOtherJob)
	}
	for _, req := range []*wire.StageReportReq{
		{Job: strings.Repeat("x", MaxNameLen+1)},
		{Job: "a\x00b"},
	} {
		if err := f.s.StageReport(context.Background(), req); errs.CodeOf(err) != errs.Invalid {
			t.Fatalf("job %.20q: %v, want invalid", req.Job, err)
		}
	}
}

// TestStageReportIdempotent: a report repeated (its answer lost) or
// arriving after a later one changes nothing; a delta from an older
// client (no Totals) still adds.
func TestStageReportIdempotent(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newStageFixture(t, openTestDB(t), &now)
	defer f.s.Close()
	first := wire.StageCounts{Hits: 5, Restored: 7, RestoredBytes: 700}
	second := wire.StageCounts{Hits: 9, Misses: 1, Restored: 10, RestoredBytes: 1000}
	f.report("train", "a", first, 4, false)
	f.report("train", "a", second, 8, false)
	f.report("train", "a", second, 8, false) // repeated after a lost answer
	f.report("train", "a", first, 4, false)  // an old report, late
	if got := f.stats()["train"].Counts; got != second {
		t.Fatalf("after repeats: %+v, want %+v", got, second)
	}
	delta := wire.StageCounts{Restored: 1, RestoredBytes: 100}
	for range 2 {
		if err := f.s.StageReport(context.Background(), &wire.StageReportReq{Job: "train", Stager: "old", Add: delta}); err != nil {
			t.Fatal(err)
		}
	}
	want := second
	want.Restored += 2
	want.RestoredBytes += 200
	if got := f.stats()["train"].Counts; got != want {
		t.Fatalf("after two deltas: %+v, want %+v", got, want)
	}
}

// TestStageReportPersists: the sums survive a restart of the service, and
// runs that ended or went quiet are folded into their job's base (fewer
// records, same sums), also beyond maxStagersPerJob runs.
func TestStageReportPersists(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	db := openTestDB(t)
	f := newStageFixture(t, db, &now)
	f.report("train", "a", wire.StageCounts{Hits: 3, Restored: 4}, 8, true)
	f.report("train", "b", wire.StageCounts{Misses: 2, Restored: 1}, 16, false)
	want := wire.StageCounts{Hits: 3, Misses: 2, Restored: 5}
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	f = newStageFixture(t, db, &now)
	defer f.s.Close()
	if tr := f.stats()["train"]; tr.Counts != want || tr.Running != 1 || tr.Depth != 16 {
		t.Fatalf("after a restart: %+v, want %+v, b running at depth 16", tr, want)
	}
	if n := f.records("train"); n != 3 {
		t.Fatalf("%d records, want the base and 2 runs", n)
	}

	now = now.Add(stageFold + time.Second) // a ended, b went quiet
	f.report("train", "c", wire.StageCounts{Restored: 1}, 0, false)
	want.Restored++
	if tr := f.stats()["train"]; tr.Counts != want || tr.Running != 1 {
		t.Fatalf("after folding: %+v, want %+v, c running", tr, want)
	}
	if n := f.records("train"); n != 2 {
		t.Fatalf("%d records after folding, want the base and c", n)
	}

	for i := range 2 * maxStagersPerJob {
		now = now.Add(time.Millisecond)
		f.report("train", fmt.Sprintf("r%d", i), wire.StageCounts{Failed: 1}, 0, false)
	}
	want.Failed = 2 * maxStagersPerJob
	if tr := f.stats()["train"]; tr.Counts != want {
		t.Fatalf("after %d runs: %+v, want %+v", 2*maxStagersPerJob, tr.Counts, want)
	}
	if n := f.records("train"); n > maxStagersPerJob+1 {
		t.Fatalf("%d records, want at most %d runs and the base", n, maxStagersPerJob)
	}
}
