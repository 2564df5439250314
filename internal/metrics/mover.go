package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-fs/sluice/internal/mover"
)

// MoverTotaler is the object tier's mover (mover.Mover).
type MoverTotaler interface{ Totals() mover.Totals }

var (
	descMoverPasses   = prometheus.NewDesc("sluice_mover_passes_total", "Passes the tier mover of this process made.", nil, nil)
	descMoverFiles    = prometheus.NewDesc("sluice_mover_moved_files_total", "Files the tier mover archived or released, by action.", []string{"action"}, nil)
	descMoverBytes    = prometheus.NewDesc("sluice_mover_moved_bytes_total", "Bytes of the files the tier mover archived or released, by action.", []string{"action"}, nil)
	descMoverFailed   = prometheus.NewDesc("sluice_mover_failures_total", "Archives and releases of the tier mover that failed.", nil, nil)
	descMoverLastSeen = prometheus.NewDesc("sluice_mover_last_pass_files", "Files under tier policies the last pass found.", nil, nil)
	descMoverLastTook = prometheus.NewDesc("sluice_mover_last_pass_seconds", "How long the last pass of the tier mover took.", nil, nil)
)

// AddMover exports the tier mover's counters as sluice_mover_*.
func (m *Metrics) AddMover(mv MoverTotaler) { m.reg.MustRegister(moverCollector{mv}) }

type moverCollector struct{ mv MoverTotaler }

func (mc moverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMoverPasses, descMoverFiles, descMoverBytes, descMoverFailed, descMoverLastSeen, descMoverLastTook} {
		ch <- d
	}
}

func (mc moverCollector) Collect(ch chan<- prometheus.Metric) {
	t := mc.mv.Totals()
	ch <- prometheus.MustNewConstMetric(descMoverPasses, prometheus.CounterValue, float64(t.Passes))
	ch <- prometheus.MustNewConstMetric(descMoverFiles, prometheus.CounterValue, float64(t.Archived), "archive")
	ch <- prometheus.MustNewConstMetric(descMoverFiles, prometheus.CounterValue, float64(t.Released), "release")
	ch <- prometheus.MustNewConstMetric(descMoverBytes, prometheus.CounterValue, float64(t.ArchivedBytes), "archive")
	ch <- prometheus.MustNewConstMetric(descMoverBytes, prometheus.CounterValue, float64(t.ReleasedBytes), "release")
	ch <- prometheus.MustNewConstMetric(descMoverFailed, prometheus.CounterValue, float64(t.Failed))
	ch <- prometheus.MustNewConstMetric(descMoverLastSeen, prometheus.GaugeValue, float64(t.LastFiles))
	ch <- prometheus.MustNewConstMetric(descMoverLastTook, prometheus.GaugeValue, t.LastPass.Seconds())
}
