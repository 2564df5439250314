package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// stageReporter sends a stager's counts to the metadata service, which
// keeps them and exports them as sluice_stage_*{job} (docs/tier.md): at
// most once per every, and once more at the end, each time the run's
// totals so far (the service keeps the larger of each count and what it
// had, so a report whose answer was lost counts once). It is used from
// one goroutine. Staging never fails for want
// of metrics: the first failed report is printed, and staging goes on.
type stageReporter struct {
	c      *client.Client
	stderr interface{ Write([]byte) (int, error) }
	job    string
	name   string
	every  time.Duration
	last   time.Time
	warned bool
}

func (e *Env) newStageReporter(job, name string, every time.Duration) *stageReporter {
	if every <= 0 {
		every = time.Second
	}
	if name == "" {
		host, _ := os.Hostname()
		name = fmt.Sprintf("stage-%s-%d-%s", host, os.Getpid(), time.Now().UTC().Format("20060102-150405.000"))
	}
	return &stageReporter{c: e.Client, stderr: e.Stderr, job: job, name: name, every: every}
}

// report sends cur, the run's totals so far, if every has passed since
// the last report or done is set.
func (r *stageReporter) report(ctx context.Context, cur client.StageCounts, depth int, done bool) {
	if !done && time.Since(r.last) < r.every {
		return
	}
	r.last = time.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := r.c.StageReport(ctx, r.job, r.name, cur, depth, done); err != nil {
		if !r.warned {
			fmt.Fprintf(r.stderr, "sluice: stage: staging metrics not reported (staging goes on): %v\n", err)
			r.warned = true
		}
	}
}
