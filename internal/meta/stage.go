package meta

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Staging metrics (docs/tier.md, `sluice stage`): stagers are client
// processes; each reports its counts since its last report (OpStageReport)
// to the metadata service it talks to, which sums them per job, in memory
// only (like any Prometheus counter, they restart from zero with the
// process), and exports them (internal/metrics, sluice_stage_*).

const (
	// maxStageJobs bounds the jobs kept; reports of further jobs are
	// summed under the job StageOtherJob.
	maxStageJobs = 256
	// StageOtherJob is the job label of the jobs past maxStageJobs.
	StageOtherJob = "_other"
	// stageStale is how long a stager that stopped reporting without
	// saying it ended still counts as running.
	stageStale = 30 * time.Second
	// maxStagersPerJob bounds the running stagers remembered per job.
	maxStagersPerJob = 64
)

// StageStats are a job's staging sums on this metadata service.
type StageStats struct {
	Job     string
	Counts  wire.StageCounts
	Running int // stagers that reported in the last 30 s and have not ended
	Depth   int // the largest depth of the running stagers
}

// stageTable holds the sums; the zero value is ready.
type stageTable struct {
	mu   sync.Mutex
	jobs map[string]*stageJob // guarded by mu
}

type stageJob struct {
	counts  wire.StageCounts
	stagers map[string]stagerSeen // running stagers by name
}

type stagerSeen struct {
	at    time.Time
	depth int
}

// StageReport adds a stager's report to its job's sums.
func (s *Service) StageReport(_ context.Context, req *wire.StageReportReq) error {
	if len(req.Job) > MaxNameLen || len(req.Stager) > MaxNameLen {
		return errs.New(errs.Invalid, "meta: stage report: job or stager name longer than %d bytes", MaxNameLen)
	}
	now := s.now()
	t := &s.stages
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.jobs == nil {
		t.jobs = map[string]*stageJob{}
	}
	job := req.Job
	j := t.jobs[job]
	if j == nil && len(t.jobs) >= maxStageJobs {
		job = StageOtherJob
		j = t.jobs[job]
	}
	if j == nil {
		j = &stageJob{stagers: map[string]stagerSeen{}}
		t.jobs[job] = j
	}
	j.counts.Add(req.Add)
	for name, st := range j.stagers {
		if now.Sub(st.at) > stageStale {
			delete(j.stagers, name)
		}
	}
	if _, known := j.stagers[req.Stager]; req.Done {
		delete(j.stagers, req.Stager)
	} else if known || len(j.stagers) < maxStagersPerJob {
		j.stagers[req.Stager] = stagerSeen{at: now, depth: int(req.Depth)}
	}
	return nil
}

// StageStats returns the staging sums of every job that reported, by job.
func (s *Service) StageStats() []StageStats {
	now := s.now()
	t := &s.stages
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]StageStats, 0, len(t.jobs))
	for job, j := range t.jobs {
		st := StageStats{Job: job, Counts: j.counts}
		for _, sg := range j.stagers {
			if now.Sub(sg.at) <= stageStale {
				st.Running++
				st.Depth = max(st.Depth, sg.depth)
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Job < out[b].Job })
	return out
}

func (s *Service) registerStage(srv *wire.Server) {
	handle(srv, wire.OpStageReport, func(ctx context.Context, m *wire.StageReportReq) (wire.Message, error) {
		return &wire.Empty{}, s.StageReport(ctx, m)
	})
}
