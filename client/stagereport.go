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

// Sub returns s minus o, field by field.
func (s StageCounts) Sub(o StageCounts) StageCounts {
	return StageCounts{
		Hits: s.Hits - o.Hits, Misses: s.Misses - o.Misses,
		BytesAhead: s.BytesAhead - o.BytesAhead, BytesOnDemand: s.BytesOnDemand - o.BytesOnDemand,
		Restored: s.Restored - o.Restored, RestoredBytes: s.RestoredBytes - o.RestoredBytes,
		Failed: s.Failed - o.Failed,
	}
}

// StageReport adds add, a stager's counts since its last successful
// report, to job's staging metrics on the metadata service
// (sluice_stage_*{job}). stager names the run; depth is its depth now
// (0 when it has none); done says the run has ended. Counts must not be
// negative.
func (c *Client) StageReport(ctx context.Context, job, stager string, add StageCounts, depth int, done bool) error {
	req := &wire.StageReportReq{Job: job, Stager: stager, Depth: uint32(max(depth, 0)), Done: done, Add: wire.StageCounts{
		Hits: uint64(add.Hits), Misses: uint64(add.Misses), BytesAhead: uint64(add.BytesAhead), BytesOnDemand: uint64(add.BytesOnDemand),
		Restored: uint64(add.Restored), RestoredBytes: uint64(add.RestoredBytes), Failed: uint64(add.Failed),
	}}
	if err := c.metaCall(ctx, wire.OpStageReport, req, &wire.Empty{}); err != nil {
		return fmt.Errorf("stage report of job %q: %w", job, err)
	}
	return nil
}
