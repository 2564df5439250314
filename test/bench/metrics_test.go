package bench_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func scrape(t *testing.T, admin string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sum adds up a family's counter or gauge values.
func sum(fams map[string]*dto.MetricFamily, name string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	v := 0.0
	for _, m := range f.GetMetric() {
		v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return v, true
}

func TestMetricsMove(t *testing.T) {
	s := startServer(t)
	for _, p := range []string{"/healthz", "/debug/pprof/"} {
		resp, err := http.Get("http://" + s.admin + p)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", p, resp, err)
		}
		resp.Body.Close()
	}
	before := scrape(t, s.admin)
	for _, name := range []string{"sluice_target_checksum_failures_total", "sluice_target_capacity_bytes", "sluice_client_connections"} {
		if _, ok := before[name]; !ok {
			t.Errorf("no %s in /metrics", name)
		}
	}
	if n := len(before["sluice_target_write_bytes_total"].GetMetric()); n != 3 {
		t.Fatalf("write bytes for %d targets, want 3", n)
	}
	wb0, _ := sum(before, "sluice_target_write_bytes_total")
	rb0, _ := sum(before, "sluice_target_read_bytes_total")

	c := s.client()
	ctx := context.Background()
	data := bytes.Repeat([]byte("sluice!"), 300000) // 2.1 MB
	f, err := c.Create(ctx, "/m")
	if err != nil {
		t.Fatal(err)
	}
	f.Write(data)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := c.Open(ctx, "/m")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, io.NewSectionReader(r, 0, int64(len(data))))
	r.Close()
	c.Stat(ctx, "/nope") // a NotFound error

	after := scrape(t, s.admin)
	wb1, _ := sum(after, "sluice_target_write_bytes_total")
	rb1, _ := sum(after, "sluice_target_read_bytes_total")
	if wb1-wb0 < float64(len(data)) || rb1-rb0 < float64(len(data)) {
		t.Fatalf("target bytes moved by write %v read %v, want >= %d each", wb1-wb0, rb1-rb0, len(data))
	}
	if conns, _ := sum(after, "sluice_client_connections"); conns < 1 {
		t.Fatalf("connections %v with a client connected", conns)
	}
	if acc, _ := sum(after, "sluice_client_connections_accepted_total"); acc < 1 {
		t.Fatalf("accepted connections %v", acc)
	}
	h, ok := after["sluice_op_duration_seconds"]
	if !ok || len(h.GetMetric()) == 0 {
		t.Fatal("no per-op duration histograms")
	}
	if w, ok := after["sluice_op_queue_wait_seconds"]; !ok || len(w.GetMetric()) == 0 {
		t.Fatal("no per-op queue wait histograms")
	}
	if hits, ok := sum(after, "sluice_cache_hits_total"); !ok || hits < 1 {
		t.Fatalf("metadata read cache hits %v after repeated lookups", hits)
	}
	var creates uint64
	for _, m := range h.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "op" && l.GetValue() == "create" {
				creates += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if creates < 1 {
		t.Fatalf("no create counted")
	}
	// The metadata engine's group commit: every create was a committed
	// transaction, in no more groups than transactions.
	commits, okc := sum(after, "sluice_kv_commits_total")
	groups, okg := sum(after, "sluice_kv_commit_groups_total")
	leads, okl := sum(after, "sluice_kv_commit_leader_groups_total")
	if _, oks := sum(after, "sluice_kv_syncs_total"); !okc || !okg || !okl || !oks || commits < float64(creates) || groups < 1 || groups > commits || leads < 1 {
		t.Fatalf("kv commit counters: %v commits in %v groups (%v led by a caller) after %d creates", commits, groups, leads, creates)
	}
	if e, _ := sum(after, "sluice_op_errors_total"); e < 1 {
		t.Fatalf("the failed stat was not counted as an error")
	}
}
