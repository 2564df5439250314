package fuse

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/fsx/fsxtest"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// truncateLoop is issue 12's reproduction, as a user ran it: write A,
// overwrite part with B, optionally fsync, truncate inside the B range,
// re-open and read (also with O_DIRECT after another fsync). It prints the
// number of wrong rounds of each variant.
const truncateLoop = `
import os, sys
d, rounds = sys.argv[1], int(sys.argv[2])
want = b'A' * 20000 + b'B' * 30000
bad = {'nosync': 0, 'fsync': 0, 'direct': 0}
for i in range(rounds):
    for v in bad:
        p = os.path.join(d, 'f-%s-%d' % (v, i % 3))
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        os.pwrite(fd, b'A' * 200000, 0)
        os.pwrite(fd, b'B' * 40000, 20000)
        if v != 'nosync':
            os.fsync(fd)
        os.ftruncate(fd, 50000)
        if v == 'direct':
            os.fsync(fd)
        os.close(fd)
        if v == 'direct':
            fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
            import mmap
            buf = mmap.mmap(-1, 65536)
            n = os.preadv(fd, [buf], 0)
            got = bytes(buf[:n])
        else:
            fd = os.open(p, os.O_RDONLY)
            got = os.pread(fd, 60000, 0)
        os.close(fd)
        if got != want:
            bad[v] += 1
print(' '.join('%s=%d' % kv for kv in sorted(bad.items())))
`

// TestTruncateAfterOverwrite runs the loop with Debian's Python on
// a `sluice serve --mount` and on a separate `sluice mount` process, with
// the default layout and with stripe count 1: no round may read stale
// bytes.
func TestTruncateAfterOverwrite(t *testing.T) {
	requireFUSE(t)
	python := proctest.NeedTool(t, "/usr/bin/python3") // Debian's, which .ci/run installs
	_, serveMP, _, addr := startServeMount(t)
	m := startMount(t, addr)
	c := proctest.Client(t, addr)
	ctx := context.Background()
	for _, dir := range []string{"/default", "/stripe1"} {
		if err := c.Mkdir(ctx, dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetLayout(ctx, "/stripe1", client.Layout{StripeCount: 1}); err != nil {
		t.Fatal(err)
	}
	for _, mp := range []string{serveMP, m.dir} {
		for _, dir := range []string{"default", "stripe1"} {
			out, err := exec.Command(python, "-c", truncateLoop, filepath.Join(mp, dir), "40").CombinedOutput()
			if err != nil {
				t.Fatalf("%s/%s: %v: %s", mp, dir, err, out)
			}
			res := strings.TrimSpace(string(out))
			if res != "direct=0 fsync=0 nosync=0" {
				t.Errorf("%s/%s: wrong rounds of 40: %s", mp, dir, res)
			}
		}
	}
}

// TestFsxMount runs the data-integrity exerciser on a `sluice serve
// --mount` with every operation (mmap with msync, copy_file_range,
// O_DIRECT reads among them), on two layouts, fixed seeds and a fresh one.
// SLUICE_FSX_SEED, SLUICE_FSX_OPS and SLUICE_FSX_LONG=1 replay a seed or
// run longer (see package fsx).
func TestFsxMount(t *testing.T) {
	requireFUSE(t)
	_, mp, _, addr := startServeMount(t)
	c := proctest.Client(t, addr)
	layouts := []client.Layout{{StripeCount: 1}, {StripeCount: 4, StripeSize: 64 << 10},
		// A progressive layout (ADR 0021), its boundaries inside the files.
		{Components: []client.LayoutComponent{{End: 1 << 20, StripeSize: 64 << 10, StripeCount: 1}, {End: 5 << 20, StripeSize: 64 << 10, StripeCount: 3}, {StripeSize: 256 << 10, StripeCount: 2}}}}
	fsxtest.Run(t, c, layouts, 1500, []uint64{3, 14}, func(dir string) fsx.Target {
		return fsx.Dir(filepath.Join(mp, dir))
	})
}

// TestFsxWritebackCache runs the exerciser through a `sluice mount
// --writeback-cache`, where the kernel buffers writes and keeps the file
// size itself: reads, sizes and listings must still be the model's after
// writes, truncates, mmap writes, copies and reopens. Not O_DIRECT reads:
// one of a hole that lies below data the kernel has not sent yet reads
// short (seed 1796267276416388516, layout 1, operation 242: 0 bytes of
// 4096 at 892928), a limitation docs/fuse.md states.
func TestFsxWritebackCache(t *testing.T) {
	requireFUSE(t)
	srv := startServer(t, "", "")
	m := startMount(t, srv.addr, "--writeback-cache")
	layouts := []client.Layout{{StripeCount: 1}, {StripeCount: 4, StripeSize: 64 << 10}}
	fsxtest.Run(t, srv.client(), layouts, 1500, []uint64{7}, func(dir string) fsx.Target {
		return fsx.Dir(m.path(dir))
	})
}

// TestFsxSeparateMount runs the exerciser through a `sluice mount` process
// of its own, whose reads go to the targets over TCP: cached whole blocks
// come back unread with their stored checksums (ADR 0030), so the
// exerciser's reads right after writes, truncates and mmap writes check
// that path byte for byte.
func TestFsxSeparateMount(t *testing.T) {
	requireFUSE(t)
	p, addr := proctest.Start(t, binary, nil, readyLine, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0")
	admin, err := p.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m := startMount(t, addr)
	layouts := []client.Layout{{StripeCount: 1}, {StripeCount: 4, StripeSize: 64 << 10}}
	fsxtest.Run(t, proctest.Client(t, addr), layouts, 1500, []uint64{5}, func(dir string) fsx.Target {
		return fsx.Dir(filepath.Join(m.dir, dir))
	})
	page := proctest.Metrics(t, admin)
	unread, reads := proctest.MetricSum(page, "sluice_target_read_sent_unread_total"), proctest.MetricSum(page, "sluice_target_read_ops_total")
	t.Logf("%v of %v chunk reads sent unread", unread, reads)
	if unread == 0 {
		t.Error("no chunk read was sent unread: the test no longer exercises that path")
	}
}

// TestFsxSeparateMountJitter runs the exerciser through a `sluice mount`
// process whose every connection (to the metadata service and to the
// targets, several to each) goes through a proxy that delays each piece of
// what it sends by a random 0-2 ms, so that the mount's requests on
// different connections overtake one another: its flushes, commits,
// truncates, reads after writes and the change feed's polls.
// SLUICE_FSX_SEED and SLUICE_FSX_OPS replay a seed.
func TestFsxSeparateMountJitter(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	listen := freePort(t)
	// In a process of its own: this one faults on the mount's mmaps
	// (proctest.StartProxy says why that matters).
	px := proctest.StartProxy(t, listen, 2*time.Millisecond)
	proctest.Start(t, binary, nil, readyLine, "serve", "--data-dir", t.TempDir(), "--listen", listen, "--advertise", px, "--http", "")
	m := startMount(t, px)
	layouts := []client.Layout{{StripeCount: 1}, {StripeCount: 4, StripeSize: 64 << 10}}
	fsxtest.Run(t, proctest.Client(t, listen), layouts, 800, []uint64{8}, func(dir string) fsx.Target {
		return fsx.Dir(filepath.Join(m.dir, dir))
	})
}
