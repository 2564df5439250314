package dashboard

import (
	"testing"

	"github.com/sluice-fs/sluice/internal/meta"
	"github.com/sluice-fs/sluice/internal/metrics"
)

type fakeRestores meta.RestoreTotals

func (f fakeRestores) RestoreTotals() meta.RestoreTotals { return meta.RestoreTotals(f) }

// TestTakeRestores: the snapshot carries the metadata service's restore
// counts, each from its own metric, and none when nothing is exported.
func TestTakeRestores(t *testing.T) {
	s, err := Take(metrics.New())
	if err != nil {
		t.Fatal(err)
	}
	if s.Restores != nil {
		t.Errorf("restores without a metadata service: %+v", s.Restores)
	}
	mx := metrics.New()
	mx.AddRestores(fakeRestores{Leases: 1, Takeovers: 2, Restored: 3, RestoredBytes: 4, CutToZero: 5})
	if s, err = Take(mx); err != nil {
		t.Fatal(err)
	}
	want := Restores{Leases: 1, Takeovers: 2, Restored: 3, RestoredBytes: 4, CutToZero: 5}
	if s.Restores == nil || *s.Restores != want {
		t.Errorf("snapshot restores %+v, want %+v", s.Restores, want)
	}
}
