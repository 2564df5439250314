package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-fs/sluice/internal/relayout"
)

// RebalanceTotaler is the rebalancer (relayout.Rebalancer).
type RebalanceTotaler interface{ Totals() relayout.Totals }

var (
	descRebalancePasses = prometheus.NewDesc("sluice_rebalance_passes_total", "Passes the rebalancer of this process made.", nil, nil)
	descRebalanceFiles  = prometheus.NewDesc("sluice_rebalance_moved_files_total", "Files the rebalancer migrated to other targets.", nil, nil)
	descRebalanceBytes  = prometheus.NewDesc("sluice_rebalance_moved_bytes_total", "Chunk bytes the rebalancer moved.", nil, nil)
	descRebalanceFailed = prometheus.NewDesc("sluice_rebalance_failures_total", "Migrations of the rebalancer that failed.", nil, nil)
	descRebalanceSpread = prometheus.NewDesc("sluice_rebalance_last_spread_ratio", "Largest minus smallest fill of the targets that take data, at the start of the last pass.", nil, nil)
	descRebalanceTook   = prometheus.NewDesc("sluice_rebalance_last_pass_seconds", "How long the last pass of the rebalancer took.", nil, nil)
)

// AddRebalancer exports the rebalancer's counters as sluice_rebalance_*.
func (m *Metrics) AddRebalancer(r RebalanceTotaler) { m.reg.MustRegister(rebalanceCollector{r}) }

type rebalanceCollector struct{ r RebalanceTotaler }

func (rc rebalanceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRebalancePasses, descRebalanceFiles, descRebalanceBytes, descRebalanceFailed, descRebalanceSpread, descRebalanceTook} {
		ch <- d
	}
}

func (rc rebalanceCollector) Collect(ch chan<- prometheus.Metric) {
	t := rc.r.Totals()
	ch <- prometheus.MustNewConstMetric(descRebalancePasses, prometheus.CounterValue, float64(t.Passes))
	ch <- prometheus.MustNewConstMetric(descRebalanceFiles, prometheus.CounterValue, float64(t.Files))
	ch <- prometheus.MustNewConstMetric(descRebalanceBytes, prometheus.CounterValue, float64(t.Bytes))
	ch <- prometheus.MustNewConstMetric(descRebalanceFailed, prometheus.CounterValue, float64(t.Failed))
	ch <- prometheus.MustNewConstMetric(descRebalanceSpread, prometheus.GaugeValue, t.LastSpread)
	ch <- prometheus.MustNewConstMetric(descRebalanceTook, prometheus.GaugeValue, t.LastPass.Seconds())
}
