package e2e

import (
	"context"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/fsx/fsxtest"
)

// fsxLayouts are the layouts the exerciser runs on: one target, four
// targets with the smallest stripes (every write crosses chunks), and the
// default.
var fsxLayouts = []client.Layout{{StripeCount: 1}, {StripeCount: 4, StripeSize: 64 << 10}, {}}

// TestFsxClient runs the data-integrity exerciser through the client
// library on a real server, on fixed seeds and a fresh one (logged).
// SLUICE_FSX_SEED, SLUICE_FSX_OPS and SLUICE_FSX_LONG=1 replay a seed or
// run longer (see package fsx).
func TestFsxClient(t *testing.T) {
	s := startServer(t, "")
	c := s.client()
	fsxtest.Run(t, c, fsxLayouts, 1500, []uint64{1, 12}, func(dir string) fsx.Target {
		return &fsx.Client{C: c, Dir: dir, Ctx: context.Background()}
	})
}
