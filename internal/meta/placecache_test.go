package meta

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// versionedTargets is fakeTargets with a state version (as
// cluster.Manager has) and a count of List calls.
type versionedTargets struct {
	*fakeTargets
	ver   atomic.Uint64
	lists atomic.Int64
}

func (v *versionedTargets) StateVersion() uint64 { return v.ver.Load() }

func (v *versionedTargets) List(ctx context.Context) ([]wire.TargetAddr, error) {
	v.lists.Add(1)
	return v.fakeTargets.List(ctx)
}

// TestPlaceViewCache checks that creates reuse the placement view while
// the targets' state version is unchanged, and that a change of version,
// or the view's age, makes the next create see the new state.
func TestPlaceViewCache(t *testing.T) {
	ctx := context.Background()
	vt := &versionedTargets{fakeTargets: newFakeTargets(4)}
	s := newTestService(t, openTestDB(t), vt)
	d := mustMkdir(t, s, RootIno, "d")
	if err := s.SetLayout(ctx, d.Ino, placement.Layout{StripeSize: placement.DefaultStripeSize, StripeCount: 1}); err != nil {
		t.Fatal(err)
	}
	chainsOf := func(name string) []placement.ChainID {
		t.Helper()
		a := mustCreate(t, s, d.Ino, name)
		l, err := s.GetLayout(ctx, a.Ino)
		if err != nil {
			t.Fatal(err)
		}
		return l.Chains
	}

	chainsOf("warm")
	before := vt.lists.Load()
	for i := range 20 {
		chainsOf("a" + string(rune('a'+i)))
	}
	if n := vt.lists.Load() - before; n != 0 {
		t.Fatalf("20 creates with an unchanged state listed the targets %d times, want 0", n)
	}

	// Only target 13 stays healthy; once the version says so, every new
	// file goes there.
	vt.mu.Lock()
	for i := range vt.targets {
		vt.targets[i].Healthy = vt.targets[i].ID == 13
	}
	vt.mu.Unlock()
	vt.ver.Add(1)
	for i := range 8 {
		if c := chainsOf("b" + string(rune('a'+i))); !slices.Equal(c, []placement.ChainID{13}) {
			t.Fatalf("file created after the state changed is on chains %v, want [13]", c)
		}
	}
	if n := vt.lists.Load() - before; n != 1 {
		t.Fatalf("creates after one change of version listed the targets %d times, want 1", n)
	}

	// Without a new version, the view expires after placeViewTTL.
	vt.mu.Lock()
	for i := range vt.targets {
		vt.targets[i].Healthy = vt.targets[i].ID == 12
	}
	vt.mu.Unlock()
	time.Sleep(placeViewTTL + 20*time.Millisecond)
	if c := chainsOf("c"); !slices.Equal(c, []placement.ChainID{12}) {
		t.Fatalf("file created after the view expired is on chains %v, want [12]", c)
	}
}
