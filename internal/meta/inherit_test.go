package meta

import (
	"context"
	"testing"

	"github.com/sluice-fs/sluice/internal/placement"
)

// TestLayoutInherited: a directory made below one with a default layout
// inherits all of it: stripe size and count, replicas, components.
func TestLayoutInherited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	d := mustMkdir(t, s, RootIno, "d")
	want := placement.Layout{StripeSize: 2 << 20, StripeCount: 3, Replicas: 2}
	if err := s.SetLayout(ctx, d.Ino, want); err != nil {
		t.Fatal(err)
	}
	sub := mustMkdir(t, s, d.Ino, "sub")
	got, err := s.GetLayout(ctx, sub.Ino)
	if err != nil {
		t.Fatal(err)
	}
	if got.StripeSize != want.StripeSize || got.StripeCount != want.StripeCount || got.Replicas != want.Replicas {
		t.Errorf("subdirectory's layout %v, want %v", got, want)
	}
}
