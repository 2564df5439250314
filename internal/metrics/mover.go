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

// MoverRecorder returns the record of the last tier mover pass over the
// whole tree, by any node (mover.StatusXattr of "/"), and false if none.
type MoverRecorder func() (mover.PassRecord, bool)

var (
	descMoverRecordAt       = prometheus.NewDesc("sluice_mover_root_pass_end_timestamp_seconds", "When the last tier mover pass over / ended, by whichever node ran it (from the metadata: every metadata service sharing it exports the same).", []string{"host"}, nil)
	descMoverRecordFiles    = prometheus.NewDesc("sluice_mover_root_pass_files", "Files under tier policies the last pass over / found.", []string{"host"}, nil)
	descMoverRecordMoved    = prometheus.NewDesc("sluice_mover_root_pass_moved_files", "Files the last pass over / archived or released, by action.", []string{"host", "action"}, nil)
	descMoverRecordBytes    = prometheus.NewDesc("sluice_mover_root_pass_moved_bytes", "Bytes of the files the last pass over / archived or released, by action.", []string{"host", "action"}, nil)
	descMoverRecordFailed   = prometheus.NewDesc("sluice_mover_root_pass_failures", "Archives and releases of the last pass over / that failed.", []string{"host"}, nil)
	descMoverRecordDuration = prometheus.NewDesc("sluice_mover_root_pass_seconds", "How long the last pass over / took.", []string{"host"}, nil)
)

// AddMoverRecord exports the last pass over / of any tier mover (sluice
// mover on any node, or a serve --mover-every) as sluice_mover_root_pass_*,
// read from the metadata at each scrape.
func (m *Metrics) AddMoverRecord(r MoverRecorder) { m.reg.MustRegister(moverRecordCollector{r}) }

type moverRecordCollector struct{ r MoverRecorder }

func (mc moverRecordCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMoverRecordAt, descMoverRecordFiles, descMoverRecordMoved, descMoverRecordBytes, descMoverRecordFailed, descMoverRecordDuration} {
		ch <- d
	}
}

func (mc moverRecordCollector) Collect(ch chan<- prometheus.Metric) {
	r, ok := mc.r()
	if !ok {
		return
	}
	g := prometheus.GaugeValue
	ch <- prometheus.MustNewConstMetric(descMoverRecordAt, g, float64(r.At.UnixNano())/1e9, r.Host)
	ch <- prometheus.MustNewConstMetric(descMoverRecordFiles, g, float64(r.Files), r.Host)
	ch <- prometheus.MustNewConstMetric(descMoverRecordMoved, g, float64(r.Archived), r.Host, "archive")
	ch <- prometheus.MustNewConstMetric(descMoverRecordMoved, g, float64(r.Released), r.Host, "release")
	ch <- prometheus.MustNewConstMetric(descMoverRecordBytes, g, float64(r.ArchivedBytes), r.Host, "archive")
	ch <- prometheus.MustNewConstMetric(descMoverRecordBytes, g, float64(r.ReleasedBytes), r.Host, "release")
	ch <- prometheus.MustNewConstMetric(descMoverRecordFailed, g, float64(r.Failed), r.Host)
	ch <- prometheus.MustNewConstMetric(descMoverRecordDuration, g, r.Took.Seconds(), r.Host)
}
