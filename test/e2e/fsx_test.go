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
var fsxLayouts = []client.Layout{{StripeCount: 1}, {StripeCount: 4, StripeSize: 64 << 10}, {}, pflLayout}

// pflLayout is a progressive layout (ADR 0021) whose component boundaries
// fall inside the exerciser's files (up to 16 MiB): 1 MiB on one target,
// then 4 MiB on 3 in 64 KiB stripes, then the rest on 2 in 256 KiB ones.
var pflLayout = client.Layout{Components: []client.LayoutComponent{
	{End: 1 << 20, StripeSize: 64 << 10, StripeCount: 1},
	{End: 5 << 20, StripeSize: 64 << 10, StripeCount: 3},
	{StripeSize: 256 << 10, StripeCount: 2},
}}

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
