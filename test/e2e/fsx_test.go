package e2e

import (
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/fsx/fsxtest"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/tcpproxy"
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

// TestFsxLayoutLease runs the exerciser through a client whose layout
// lease is a millisecond (client.Options.LayoutLease): nearly every chunk
// read, write and truncate asks the metadata service for the layout first
// (ADR 0023, addendum), on stripe counts 1 and 4 and a progressive layout.
func TestFsxLayoutLease(t *testing.T) {
	s := startServer(t, "", "--http", "127.0.0.1:0")
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Server: s.addr, LayoutLease: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	layouts := []client.Layout{fsxLayouts[0], fsxLayouts[1], pflLayout}
	fsxtest.Run(t, c, layouts, 1000, []uint64{5}, func(dir string) fsx.Target {
		return &fsx.Client{C: c, Dir: dir, Ctx: ctx}
	})
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m := proctest.Metrics(t, admin)
	renewals := proctest.MetricSum(m, `sluice_op_duration_seconds_count{kind="meta",op="getlayout"}`)
	reads := proctest.MetricSum(m, `sluice_op_duration_seconds_count{kind="chunk",op="chunk_read"}`)
	t.Logf("%.0f layout requests beside %.0f chunk reads", renewals, reads)
	if renewals < 1000 {
		t.Errorf("only %.0f layout requests: the File did not renew its layout", renewals)
	}
}

// TestFsxJitter runs the exerciser through a client whose every
// connection (to the metadata service and to the targets, four to each)
// goes through a proxy that delays each piece of what it sends by a
// random 0-2 ms: requests on different connections overtake one another
// as on a congested network, so nothing may rely on the order in which
// requests sent one after the other on different connections arrive
// (overlapping flushes, a flush and a truncate, a write and its commit).
// SLUICE_FSX_SEED and SLUICE_FSX_OPS replay a seed; SLUICE_FSX_JITTER
// (a duration) changes the most a piece waits.
func TestFsxJitter(t *testing.T) {
	t.Parallel()
	jitter := 2 * time.Millisecond
	if v := os.Getenv("SLUICE_FSX_JITTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SLUICE_FSX_JITTER=%q: %v", v, err)
		}
		jitter = d
	}
	listen := freePort(t)
	px := tcpproxy.Start(t, listen)
	px.SetJitter(jitter)
	startServer(t, "", "--listen", listen, "--advertise", px.Addr)
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Server: px.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	layouts := []client.Layout{fsxLayouts[0], fsxLayouts[1]}
	fsxtest.Run(t, c, layouts, 800, []uint64{7}, func(dir string) fsx.Target {
		return &fsx.Client{C: c, Dir: dir, Ctx: ctx}
	})
}
