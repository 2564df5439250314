package dashboard

import (
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
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

// TestTakeAbsorb: the snapshot carries a mount's staging counts, and none
// while the mount has no staging area.
func TestTakeAbsorb(t *testing.T) {
	mx := metrics.New()
	var st client.StagingStats
	ok := false
	mx.AddAbsorb(func() (client.StagingStats, bool) { return st, ok })
	s, err := Take(mx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Absorb != nil {
		t.Errorf("staging counts without a staging area: %+v", s.Absorb)
	}
	st = client.StagingStats{Held: 1, PeakHeld: 2, Limit: 3, StagedBytes: 4, DrainedBytes: 5, PendingSegments: 6,
		Throttled: 7, ThrottledTime: 8 * time.Second, Waiting: 9, LastErrors: 10, InMemory: true}
	ok = true
	if s, err = Take(mx); err != nil {
		t.Fatal(err)
	}
	want := Absorb{Held: 1, Peak: 2, Limit: 3, Staged: 4, Drained: 5, Pending: 6, Throttled: 7, ThrottledSeconds: 8, Waiting: 9, RenameErrors: 10, InMemory: true}
	if s.Absorb == nil || *s.Absorb != want {
		t.Errorf("snapshot staging %+v, want %+v", s.Absorb, want)
	}
}
