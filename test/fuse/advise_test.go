package fuse

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/advise"
	"github.com/sluice-fs/sluice/internal/cli"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/profile"
)

// TestAdviseWritebackCache: `sluice advise calibrate --mount` measures
// sequential writes through two mounts of its own (with and without the
// kernel's write-back cache), keeps a --base model's cells, and leaves no
// mount and no file behind; a workload recorded through a mount that
// writes in 4 KiB requests is then advised the write-back cache, and the
// same workload through a mount with the cache on (whose writes reach the
// mount merged) is told no change; `advise --check` replays the first
// through two mounts of its own, without and with the cache, and leaves
// no mount behind. The advice runs on a model with fixed mount cells, so
// that it does not depend on the speeds measured here.
func TestAdviseWritebackCache(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "")
	ctx := context.Background()
	setup := s.client()
	sluice := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), "SLUICE_SERVER="+s.addr)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	readModel := func(path string) advise.Model {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m advise.Model
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	// The calibration through mounts, on top of the built-in model.
	dir := t.TempDir()
	base := readModel("../../internal/advise/model.json")
	sluice("advise", "calibrate", "--mount", "--base", "../../internal/advise/model.json", "--out", dir+"/cal.json", "--size", "1MiB", "--runs", "2", "-q")
	cal := readModel(dir + "/cal.json")
	if len(cal.Cells) != len(base.Cells) || cal.Noise != base.Noise {
		t.Errorf("the base model's %d cells (noise %v) came out as %d (noise %v)", len(base.Cells), base.Noise, len(cal.Cells), cal.Noise)
	}
	wbc := 0
	for _, c := range cal.MountCells {
		if c.Op != "write" || c.Pattern != "seq" || c.MBps <= 0 {
			t.Errorf("mount cell %+v", c)
		}
		if c.WritebackCache {
			wbc++
		}
	}
	if len(cal.MountCells) != 16 || wbc != 8 || !strings.Contains(cal.MountCommand, "--mount") {
		t.Errorf("%d mount cells, %d of them with the write-back cache, made by %q; want 16, 8 and the command", len(cal.MountCells), wbc, cal.MountCommand)
	}
	if _, err := setup.Stat(ctx, "/.sluice-calibrate/mount"); err == nil {
		t.Error("the calibration's files were left behind")
	}
	if left := calibrateMounts(t); len(left) > 0 {
		t.Errorf("the calibration left mounts behind: %v", left)
	}

	// The advice, on fixed mount cells: 3x at 4 KiB, nothing from 64 KiB.
	fixed := cal
	fixed.MountNoise = 0.1
	fixed.MountCells = nil
	for _, c := range []struct {
		req      int64
		off, wbc float64
	}{{4 << 10, 150, 450}, {64 << 10, 430, 450}, {1 << 20, 640, 620}} {
		fixed.MountCells = append(fixed.MountCells,
			advise.Cell{Op: "write", Pattern: "seq", ReqSize: c.req, Streams: 1, MBps: c.off},
			advise.Cell{Op: "write", Pattern: "seq", ReqSize: c.req, Streams: 1, WritebackCache: true, MBps: c.wbc})
	}
	b, err := json.Marshal(&fixed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/fixed.json", b, 0o644); err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 4096)
	for i := range block {
		block[i] = byte(i)
	}
	advice := func(name string, check bool, mountArgs ...string) (advise.Workload, advise.Advice, *cli.CheckResult) {
		t.Helper()
		if err := setup.Mkdir(ctx, "/"+name, 0o755); err != nil {
			t.Fatal(err)
		}
		m := startMount(t, s.addr, append([]string{"--qos-job", name}, mountArgs...)...)
		if err := setup.ProfileStart(ctx, name, name, "/"+name, time.Hour, 0); err != nil {
			t.Fatal(err)
		}
		proctest.WaitProfileClients(t, setup, name, 1)
		for _, f := range []string{"a", "b", "c", "d"} {
			fd, err := os.Create(m.path(name, f))
			if err != nil {
				t.Fatal(err)
			}
			w := bufio.NewWriterSize(fd, len(block)) // 4 KiB write(2)s
			for range 256 {
				if _, err := w.Write(block); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := fd.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := setup.ProfileStop(ctx, name); err != nil {
			t.Fatal(err)
		}
		m.stop() // the mount's client ships what is left as it closes
		args := []string{"advise", name, "--model", dir + "/fixed.json", "--json"}
		if check {
			args = append(args, "--check")
		}
		var res cli.AdviseResult
		if err := json.Unmarshal([]byte(sluice(args...)), &res); err != nil {
			t.Fatal(err)
		}
		for _, a := range res.Advice {
			if a.Setting == "writeback-cache" {
				return res.Workload, a, res.Check
			}
		}
		t.Fatalf("%s: no writeback-cache advice in %+v", name, res.Advice)
		return advise.Workload{}, advise.Advice{}, nil
	}
	w, a, chk := advice("plain", true)
	if w.Via != "mount" || w.Op != "write" || w.ReqSize != 4096 {
		t.Errorf("the plain mount's workload: %+v; want 4 KiB writes through a mount", w)
	}
	if a.To != advise.WritebackCacheAdvice || a.Predicted != 3 {
		t.Errorf("4 KiB writes through a plain mount: advice %q predicted %v (%s); want %q at 3", a.To, a.Predicted, a.Reason, advise.WritebackCacheAdvice)
	}
	// --check replays the recording through two mounts of its own, the
	// second with the cache (the speeds are not asserted: they are
	// measurements).
	switch {
	case chk == nil:
		t.Error("advise --check: no check")
	case !chk.From.Mount || chk.From.WritebackCache || !chk.To.Mount || !chk.To.WritebackCache:
		t.Errorf("advise --check replayed %s against %s; want a plain mount against one with the write-back cache", chk.From, chk.To)
	case chk.FromMBps <= 0 || chk.ToMBps <= 0 || chk.Bytes != 4<<20 || chk.Predicted != 3:
		t.Errorf("advise --check: %+v; want both replays moving the recording's 4 MiB, predicted 3x", chk)
	}
	if chk != nil {
		t.Logf("advise --check: %s %.0f MB/s, %s %.0f MB/s: measured %.2fx, predicted %.2fx", chk.From, chk.FromMBps, chk.To, chk.ToMBps, chk.Measured, chk.Predicted)
	}
	if left := calibrateMounts(t); len(left) > 0 {
		t.Errorf("advise --check left mounts behind: %v", left)
	}
	w, a, _ = advice("cached", false, "--writeback-cache")
	if w.ReqSize <= 64<<10 || a.Change() {
		t.Errorf("through a mount with the write-back cache: writes of %d bytes reached it, advice %q (%s); want merged writes and no change", w.ReqSize, a.To, a.Reason)
	}
}

// calibrateMounts lists the mounts that `sluice advise calibrate --mount`
// and `sluice advise --check` make (their mountpoints) still mounted.
func calibrateMounts(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.Contains(f[4], "sluice-advise-mount-") {
			left = append(left, f[4])
		}
	}
	return left
}

// TestServeWritebackCache: `sluice serve --mount --writeback-cache` (what
// the writeback-cache advice names for the server's own mount) gives its
// mount the kernel's write-back cache: a file written in 4 KiB write(2)s
// reaches the mount's client in larger, merged writes, as the profile
// records them, where a plain `serve --mount` receives them one by one.
func TestServeWritebackCache(t *testing.T) {
	requireFUSE(t)
	block := make([]byte, 4096)
	for _, c := range []struct {
		args   []string
		merged bool
	}{{nil, false}, {[]string{"--writeback-cache"}, true}} {
		_, mp, _, addr := startServeMount(t, append([]string{"--qos-job", "sw"}, c.args...)...)
		setup := proctest.Client(t, addr)
		ctx := context.Background()
		if err := setup.ProfileStart(ctx, "sw", "sw", "", time.Hour, 0); err != nil {
			t.Fatal(err)
		}
		proctest.WaitProfileClients(t, setup, "sw", 1)
		f, err := os.Create(mp + "/f")
		if err != nil {
			t.Fatal(err)
		}
		for range 256 {
			if _, err := f.Write(block); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := setup.ProfileStop(ctx, "sw"); err != nil {
			t.Fatal(err)
		}
		// The mount's client ships its last records at its next poll of
		// the recording (about a second).
		var rep profile.Report
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if rep = profileReport(t, addr, "sw"); rep.Write.Bytes >= 1<<20 || time.Now().After(deadline) {
				break
			}
		}
		if rep.Write.Bytes != 1<<20 || (rep.Write.SizeP50 > 4096) != c.merged {
			t.Errorf("serve --mount %v: %d bytes written in writes of %d (median) reached the mount; want 1 MiB, merged: %v", c.args, rep.Write.Bytes, rep.Write.SizeP50, c.merged)
		}
	}
}
