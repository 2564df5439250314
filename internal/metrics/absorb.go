package metrics

import (
	"bytes"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/sluice-fs/sluice/client"
)

// A client's staging area for the absorb policy (docs/checkpoint.md): what
// a mount has staged, drained and holds, and how often its writers waited
// for room, as sluice_absorb_*.
var (
	descAbsorbStaged          = prometheus.NewDesc("sluice_absorb_staged_bytes_total", "Bytes acknowledged from the staging area (sealed segments: a file's sync or close, or an early seal under the staging limit).", nil, nil)
	descAbsorbSegments        = prometheus.NewDesc("sluice_absorb_staged_segments_total", "Segments sealed in the staging area.", nil, nil)
	descAbsorbDrained         = prometheus.NewDesc("sluice_absorb_drained_bytes_total", "Staged bytes drained to the targets.", nil, nil)
	descAbsorbDrainedSegments = prometheus.NewDesc("sluice_absorb_drained_segments_total", "Staged segments drained to the targets.", nil, nil)
	descAbsorbPending         = prometheus.NewDesc("sluice_absorb_pending_segments", "Sealed segments not drained yet.", nil, nil)
	descAbsorbHeld            = prometheus.NewDesc("sluice_absorb_held_bytes", "Bytes in the staging area not drained yet (open segments included).", nil, nil)
	descAbsorbPeak            = prometheus.NewDesc("sluice_absorb_held_peak_bytes", "The most bytes held at once since the client started.", nil, nil)
	descAbsorbLimit           = prometheus.NewDesc("sluice_absorb_limit_bytes", "The staging limit: the most bytes held before writers wait for drains (--staging-max; 0: none).", nil, nil)
	descAbsorbThrottled       = prometheus.NewDesc("sluice_absorb_throttled_writes_total", "Writes that waited for drains to make room under the staging limit.", nil, nil)
	descAbsorbThrottledTime   = prometheus.NewDesc("sluice_absorb_throttled_seconds_total", "Time those writes waited, in all.", nil, nil)
	descAbsorbWaiting         = prometheus.NewDesc("sluice_absorb_waiting_writes", "Writes waiting for room now.", nil, nil)
	descAbsorbDrainErrors     = prometheus.NewDesc("sluice_absorb_drain_errors_total", "Drain attempts that failed and were retried.", nil, nil)
	descAbsorbRenames         = prometheus.NewDesc("sluice_absorb_renames_queued_total", "Renames ordered after the drain of the files they depend on.", nil, nil)
	descAbsorbRenamed         = prometheus.NewDesc("sluice_absorb_renamed_total", "Of those, carried out.", nil, nil)
	descAbsorbRenameErrors    = prometheus.NewDesc("sluice_absorb_rename_errors_total", "Queued renames that failed when carried out.", nil, nil)
	descAbsorbAdopted         = prometheus.NewDesc("sluice_absorb_adopted_total", "Segments and renames replayed from the staging areas of dead clients.", nil, nil)
	descAbsorbRecycled        = prometheus.NewDesc("sluice_absorb_recycled_segments_total", "Segments written into the data file of a drained one (or of the reserve).", nil, nil)
	descAbsorbInMemory        = prometheus.NewDesc("sluice_absorb_in_memory", "1 if the staging directory is on a memory file system (a machine restart loses what has not drained).", nil, nil)
)

// AddAbsorb exports the staging area of the client that src returns
// (ok false: none, or not started yet: nothing is exported).
func (m *Metrics) AddAbsorb(src func() (client.StagingStats, bool)) {
	m.reg.MustRegister(absorbCollector{src})
}

type absorbCollector struct {
	src func() (client.StagingStats, bool)
}

func (ac absorbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAbsorbStaged, descAbsorbSegments, descAbsorbDrained, descAbsorbDrainedSegments,
		descAbsorbPending, descAbsorbHeld, descAbsorbPeak, descAbsorbLimit, descAbsorbThrottled, descAbsorbThrottledTime,
		descAbsorbWaiting, descAbsorbDrainErrors, descAbsorbRenames, descAbsorbRenamed, descAbsorbRenameErrors,
		descAbsorbAdopted, descAbsorbRecycled, descAbsorbInMemory} {
		ch <- d
	}
}

func (ac absorbCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok := ac.src()
	if !ok {
		return
	}
	inMemory := 0.0
	if st.InMemory {
		inMemory = 1
	}
	for _, v := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		n float64
	}{
		{descAbsorbStaged, prometheus.CounterValue, float64(st.StagedBytes)},
		{descAbsorbSegments, prometheus.CounterValue, float64(st.Segments)},
		{descAbsorbDrained, prometheus.CounterValue, float64(st.DrainedBytes)},
		{descAbsorbDrainedSegments, prometheus.CounterValue, float64(st.Drained)},
		{descAbsorbPending, prometheus.GaugeValue, float64(st.PendingSegments)},
		{descAbsorbHeld, prometheus.GaugeValue, float64(st.Held)},
		{descAbsorbPeak, prometheus.GaugeValue, float64(st.PeakHeld)},
		{descAbsorbLimit, prometheus.GaugeValue, float64(st.Limit)},
		{descAbsorbThrottled, prometheus.CounterValue, float64(st.Throttled)},
		{descAbsorbThrottledTime, prometheus.CounterValue, st.ThrottledTime.Seconds()},
		{descAbsorbWaiting, prometheus.GaugeValue, float64(st.Waiting)},
		{descAbsorbDrainErrors, prometheus.CounterValue, float64(st.DrainErrors)},
		{descAbsorbRenames, prometheus.CounterValue, float64(st.RenamesQueued)},
		{descAbsorbRenamed, prometheus.CounterValue, float64(st.Renamed)},
		{descAbsorbRenameErrors, prometheus.CounterValue, float64(st.LastErrors)},
		{descAbsorbAdopted, prometheus.CounterValue, float64(st.Adopted)},
		{descAbsorbRecycled, prometheus.CounterValue, float64(st.Recycled)},
		{descAbsorbInMemory, prometheus.GaugeValue, inMemory},
	} {
		ch <- prometheus.MustNewConstMetric(v.d, v.t, v.n)
	}
}

// AbsorbText returns the staging area that src returns as Prometheus text
// (the sluice_absorb_* metrics of AddAbsorb; nothing when there is none),
// for a process that serves its own /metrics: the Python client's.
func AbsorbText(src func() (client.StagingStats, bool)) ([]byte, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(absorbCollector{src})
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}
