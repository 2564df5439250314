package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-fs/sluice/internal/meta"
)

// CutTotaler is the metadata service (meta.Service), which orders
// truncates against other clients' writes by cut generations (ADR 0031).
type CutTotaler interface{ CutTotals() meta.CutTotals }

var (
	descCutsBegun     = prometheus.NewDesc("sluice_cuts_total", "Truncates that cut a file's chunks under a cut of the file (OpCutBegin).", nil, nil)
	descCutsRefused   = prometheus.NewDesc("sluice_cut_refused_commits_total", "Size commits refused because a cut began after their data was written: the writer writes the data again.", nil, nil)
	descCutsTakeovers = prometheus.NewDesc("sluice_cut_takeovers_total", "Cuts held past their time (their truncate stopped), taken over.", nil, nil)
)

// AddCuts exports the metadata service's cut counts as sluice_cut*.
func (m *Metrics) AddCuts(c CutTotaler) { m.reg.MustRegister(cutCollector{c}) }

type cutCollector struct{ c CutTotaler }

func (cc cutCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCutsBegun, descCutsRefused, descCutsTakeovers} {
		ch <- d
	}
}

func (cc cutCollector) Collect(ch chan<- prometheus.Metric) {
	t := cc.c.CutTotals()
	for _, v := range []struct {
		d *prometheus.Desc
		n uint64
	}{{descCutsBegun, t.Begun}, {descCutsRefused, t.Refused}, {descCutsTakeovers, t.Takeovers}} {
		ch <- prometheus.MustNewConstMetric(v.d, prometheus.CounterValue, float64(v.n))
	}
}
