package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-fs/sluice/internal/meta"
)

// StageStatser is the metadata service (meta.Service), which sums what
// stagers report (docs/tier.md, sluice stage).
type StageStatser interface{ StageStats() []meta.StageStats }

var (
	descStageHits     = prometheus.NewDesc("sluice_stage_hits_total", "Readers' first reads of a file that a stager had restored before the read started, by job.", []string{"job"}, nil)
	descStageMisses   = prometheus.NewDesc("sluice_stage_misses_total", "Readers' first reads of a file that a stager had not restored yet, by job.", []string{"job"}, nil)
	descStageAhead    = prometheus.NewDesc("sluice_stage_ahead_bytes_total", "Bytes of the files that were hits (restored ahead of their first read), by job.", []string{"job"}, nil)
	descStageOnDemand = prometheus.NewDesc("sluice_stage_on_demand_bytes_total", "Bytes of the files that were misses (a reader came first; restored on demand), by job.", []string{"job"}, nil)
	descStageFiles    = prometheus.NewDesc("sluice_stage_restored_files_total", "Files the stagers restored, by job.", []string{"job"}, nil)
	descStageBytes    = prometheus.NewDesc("sluice_stage_restored_bytes_total", "Bytes of the files the stagers restored, by job.", []string{"job"}, nil)
	descStageFailed   = prometheus.NewDesc("sluice_stage_failures_total", "Restores of the stagers that failed, by job.", []string{"job"}, nil)
	descStageRunning  = prometheus.NewDesc("sluice_stage_running", "Stagers that reported in the last 30 s and have not ended, by job (from the metadata KV: every metadata service sharing it exports the same).", []string{"job"}, nil)
	descStageDepth    = prometheus.NewDesc("sluice_stage_depth", "The largest depth (files kept restored ahead of the readers) of the running stagers of a job.", []string{"job"}, nil)
)

// AddStage exports the staging counts that stagers reported to the
// metadata service as sluice_stage_*, labelled by job.
func (m *Metrics) AddStage(s StageStatser) { m.reg.MustRegister(stageCollector{s}) }

type stageCollector struct{ s StageStatser }

func (sc stageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStageHits, descStageMisses, descStageAhead, descStageOnDemand, descStageFiles, descStageBytes, descStageFailed, descStageRunning, descStageDepth} {
		ch <- d
	}
}

func (sc stageCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range sc.s.StageStats() {
		c := st.Counts
		for _, v := range []struct {
			d *prometheus.Desc
			n uint64
		}{
			{descStageHits, c.Hits}, {descStageMisses, c.Misses}, {descStageAhead, c.BytesAhead}, {descStageOnDemand, c.BytesOnDemand},
			{descStageFiles, c.Restored}, {descStageBytes, c.RestoredBytes}, {descStageFailed, c.Failed},
		} {
			ch <- prometheus.MustNewConstMetric(v.d, prometheus.CounterValue, float64(v.n), st.Job)
		}
		ch <- prometheus.MustNewConstMetric(descStageRunning, prometheus.GaugeValue, float64(st.Running), st.Job)
		ch <- prometheus.MustNewConstMetric(descStageDepth, prometheus.GaugeValue, float64(st.Depth), st.Job)
	}
}
