package client

import (
	"context"
	"fmt"

	"github.com/sluice-fs/sluice/internal/wire"
)

// StageCounts are a stager's counters (docs/tier.md, `sluice stage`).
// Hits and Misses count the readers' first reads of a file: restored by
// the stager before the read started, or not; BytesAhead and
// BytesOnDemand are those files' sizes. Restored, RestoredBytes and
// Failed count the stager's own restores.
type StageCounts struct {
	Hits, Misses              int64
	BytesAhead, BytesOnDemand int64
	Restored, RestoredBytes   int64
	Failed                    int64
}

// StageReport records total, a stager run's counts so far, in job's
// staging metrics on the metadata service (sluice_stage_*{job}), which
// keeps them in its KV. stager names the run (unique per run); depth is
// its depth now (0 when it has none); done says the run has ended.
// Reports are idempotent: the service keeps the larger of each count and
// what the run reported before, so a report may be repeated (after a lost
// answer) and an old one may arrive late. Counts must not be negative.
func (c *Client) StageReport(ctx context.Context, job, stager string, total StageCounts, depth int, done bool) error {
	req := &wire.StageReportReq{Job: job, Stager: stager, Depth: uint32(max(depth, 0)), Done: done, Totals: true, Add: wire.StageCounts{
		Hits: uint64(total.Hits), Misses: uint64(total.Misses), BytesAhead: uint64(total.BytesAhead), BytesOnDemand: uint64(total.BytesOnDemand),
		Restored: uint64(total.Restored), RestoredBytes: uint64(total.RestoredBytes), Failed: uint64(total.Failed),
	}}
	if err := c.metaCall(ctx, wire.OpStageReport, req, &wire.Empty{}); err != nil {
		return fmt.Errorf("stage report of job %q: %w", job, err)
	}
	return nil
}
