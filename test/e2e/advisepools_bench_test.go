package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/internal/cli"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// BenchmarkAdvisePools shows pool advice on two pools of different media,
// measured: a sluice serve whose targets 1-2 are on the disk (pool
// "disk") and 3-4 on a tmpfs each (pool "mem", where a sync costs
// nothing), calibrated per pool (`advise calibrate --pool disk --pool
// mem`), a job that writes 4 files of 32 MiB in 1 MiB requests (a
// checkpoint's pattern) in a directory of pool disk, recorded; then the
// advice with that model and its --check replay, which measures the
// current and the advised configuration on copies:
//
//	go test -run '^$' -bench AdvisePools -benchtime 1x ./test/e2e
//
// It needs root (tmpfs mounts).
func BenchmarkAdvisePools(b *testing.B) {
	ctx := context.Background()
	dir := tmpfsTargets(b, "2g")
	s := startServer(b, dir)
	setup := s.client()
	twoPools(b, s, "disk", "mem")
	model := filepath.Join(b.TempDir(), "model.json")
	s.mustCLI("advise", "calibrate", "--out", model, "--size", "16MiB", "--cell-time", "200ms", "-q", "--pool", "disk", "--pool", "mem")
	s.mustCLI("mkdir", "/ckpt")
	s.mustCLI("layout", "set", "/ckpt", "--stripe-count", "2", "--pool", "disk")
	s.mustCLI("profile", "record", "--job", "ck", "--name", "ck1", "--dir", "/ckpt", "--duration", "1h", "--detach")
	c := jobClient(b, s.addr, "ck")
	waitClients(b, setup, "ck1", 1)
	data := randBytes(7, 1<<20)
	var g errgroup.Group
	for i := range 4 {
		g.Go(func() error {
			f, err := c.Create(ctx, fmt.Sprintf("/ckpt/shard%d", i))
			if err != nil {
				return err
			}
			for range 32 {
				if _, err := f.Write(data); err != nil {
					return err
				}
			}
			return f.Close()
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	s.mustCLI("profile", "stop", "ck1")
	c.Close()
	for range b.N {
		var res cli.AdviseResult
		if err := json.Unmarshal([]byte(s.mustCLI("advise", "ck1", "--model", model, "--check", "--check-bytes", "128MiB", "--json")), &res); err != nil {
			b.Fatal(err)
		}
		a := res.Advice[0]
		b.Logf("layout advice: %s -> %q (%s)", a.From, a.To, a.Reason)
		if chk := res.Check; chk != nil {
			b.Logf("check: %s %.0f MB/s, %s %.0f MB/s: measured %.2fx, predicted %.2fx", chk.From, chk.FromMBps, chk.To, chk.ToMBps, chk.Measured, chk.Predicted)
			b.ReportMetric(chk.Measured, "measured-gain")
			b.ReportMetric(chk.Predicted, "predicted-gain")
		}
	}
}

// tmpfsTargets returns a data dir for a `sluice serve` of 4 targets whose
// targets 3 and 4 are each on a tmpfs of the given size (1 and 2 on the
// disk), mounted until the test ends.
func tmpfsTargets(tb testing.TB, size string) string {
	tb.Helper()
	dir := tb.TempDir()
	for id := 1; id <= 4; id++ {
		d := filepath.Join(dir, "targets", strconv.Itoa(id))
		if id <= 2 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		proctest.MountTmpfs(tb, d, size)
	}
	return dir
}
