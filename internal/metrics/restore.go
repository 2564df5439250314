package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-fs/sluice/internal/meta"
)

// RestoreTotaler is the metadata service (meta.Service), which decides
// the restores of released files.
type RestoreTotaler interface{ RestoreTotals() meta.RestoreTotals }

var (
	descRestoreLeases    = prometheus.NewDesc("sluice_hsm_restore_leases_total", "Restore leases of released files granted by this metadata service (a new holder, not a renewal).", nil, nil)
	descRestoreTakeovers = prometheus.NewDesc("sluice_hsm_restore_takeovers_total", "Of those, leases taken over after their holder's expired.", nil, nil)
	descRestored         = prometheus.NewDesc("sluice_hsm_restores_total", "Restores committed: released files made archived again.", nil, nil)
	descRestoredBytes    = prometheus.NewDesc("sluice_hsm_restored_bytes_total", "Size of the files of the restores committed.", nil, nil)
	descCutToZero        = prometheus.NewDesc("sluice_hsm_released_truncates_total", "Released files cut to size 0 without a restore.", nil, nil)
)

// AddRestores exports the metadata service's restore counts as
// sluice_hsm_*.
func (m *Metrics) AddRestores(r RestoreTotaler) { m.reg.MustRegister(restoreCollector{r}) }

type restoreCollector struct{ r RestoreTotaler }

func (rc restoreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRestoreLeases, descRestoreTakeovers, descRestored, descRestoredBytes, descCutToZero} {
		ch <- d
	}
}

func (rc restoreCollector) Collect(ch chan<- prometheus.Metric) {
	t := rc.r.RestoreTotals()
	for _, v := range []struct {
		d *prometheus.Desc
		n uint64
	}{
		{descRestoreLeases, t.Leases}, {descRestoreTakeovers, t.Takeovers}, {descRestored, t.Restored},
		{descRestoredBytes, t.RestoredBytes}, {descCutToZero, t.CutToZero},
	} {
		ch <- prometheus.MustNewConstMetric(v.d, prometheus.CounterValue, float64(v.n))
	}
}
