package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// stageReporter sends a stager's counts to the metadata service, which
// exports them as sluice_stage_*{job} (docs/tier.md): at most once per
// every, and once more at the end, each time the counts since the last
// report the service acknowledged (a report that fails is sent again with
// the next). It is used from one goroutine. Staging never fails for want
// of metrics: the first failed report is printed, and staging goes on.
type stageReporter struct {
	c      *client.Client
	stderr interface{ Write([]byte) (int, error) }
	job    string
	name   string
	every  time.Duration
	sent   client.StageCounts
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

// report sends cur, the run's totals so far, less what was sent, if every
// has passed since the last report or done is set.
func (r *stageReporter) report(ctx context.Context, cur client.StageCounts, depth int, done bool) {
	if !done && time.Since(r.last) < r.every {
		return
	}
	r.last = time.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := r.c.StageReport(ctx, r.job, r.name, cur.Sub(r.sent), depth, done); err != nil {
		if !r.warned {
			fmt.Fprintf(r.stderr, "sluice: stage: staging metrics not reported (staging goes on): %v\n", err)
			r.warned = true
		}
		return
	}
	r.sent = cur
}
