package tier

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/dashboard"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestStage: `sluice stage --from-file` restores the released files it
// lists, skips others, and afterwards they read with the backend stopped;
// the metadata service exports what it restored as
// sluice_stage_restored_*{job}.
func TestStage(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	admin := freeAddr(t)
	fs := startFS(t, "--http", admin)
	addBackend(t, fs, be, "")
	c := newClient(t, fs.addr, 0)
	files := map[string][]byte{}
	for i := range 4 {
		p := fmt.Sprintf("/job/f%d", i)
		files[p] = randomData(uint64(200+i), 3<<20+i)
		if err := c.MkdirAll(ctx, "/job", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeSluice(ctx, c, p, files[p]); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeSluice(ctx, c, "/job/resident", []byte("r")); err != nil {
		t.Fatal(err)
	}
	fs.mustCLI("hsm", "archive", "/job/f0", "/job/f1", "/job/f2", "/job/f3")
	fs.mustCLI("hsm", "release", "/job/f0", "/job/f1", "/job/f2", "/job/f3")
	list := t.TempDir() + "/list"
	if err := os.WriteFile(list, []byte("/job/f2\n/job/resident\n# a comment\n/job/f0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := fs.mustCLI("stage", "/job/f1", "--from-file", list, "--rate", "1G", "--job", "prep")
	if !strings.HasPrefix(out, "staged 3 files") || !strings.Contains(out, "1 not released") {
		t.Fatalf("stage: %q", out)
	}
	m := scrapeStage(t, admin, "prep")
	if want := float64(len(files["/job/f0"]) + len(files["/job/f1"]) + len(files["/job/f2"])); m["sluice_stage_restored_files_total"] != 3 ||
		m["sluice_stage_restored_bytes_total"] != want || m["sluice_stage_running"] != 0 {
		t.Errorf("metrics of job prep after the stage: %v; want 3 files, %v bytes, none running", m, want)
	}
	st := fs.mustCLI("hsm", "state", "-r", "/job")
	for _, want := range []string{"archived\t/job/f0", "archived\t/job/f1", "archived\t/job/f2", "released\t/job/f3", "resident\t/job/resident"} {
		if !strings.Contains(st, want) {
			t.Errorf("after stage: no %q in %q", want, st)
		}
	}
	be.proc.Pause(t)
	defer be.proc.Resume()
	for _, p := range []string{"/job/f0", "/job/f1", "/job/f2"} {
		if sum, _, err := readSum(ctx, c, p); err != nil || sum != sha256.Sum256(files[p]) {
			t.Fatalf("staged %s with the backend stopped: %v", p, err)
		}
	}
	// The staging metrics are kept in the metadata KV: a kill -9 of the
	// server and a restart on the same data dir keep them.
	fs.proc.Kill()
	proctest.Start(t, binary, nil, readyLine, "serve", "--data-dir", fs.dataDir, "--listen", "127.0.0.1:0", "--http", admin)
	if m2 := scrapeStage(t, admin, "prep"); m2["sluice_stage_restored_files_total"] != 3 ||
		m2["sluice_stage_restored_bytes_total"] != m["sluice_stage_restored_bytes_total"] || m2["sluice_stage_running"] != 0 {
		t.Errorf("metrics of job prep after a kill -9 and a restart: %v; before: %v", m2, m)
	}
}

// TestStageFromProfile: a recording of one epoch reading released files
// (through the bucket, without restoring them) gives `sluice stage
// --from-profile` the epoch's order, and staging restores exactly the
// files read, which then read with the backend stopped.
func TestStageFromProfile(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := newClient(t, fs.addr, 0)
	files := map[string][]byte{}
	if err := c.MkdirAll(ctx, "/ep", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		p := fmt.Sprintf("/ep/f%d", i)
		files[p] = randomData(uint64(300+i), 1<<20+i)
		if err := writeSluice(ctx, c, p, files[p]); err != nil {
			t.Fatal(err)
		}
	}
	fs.mustCLI("hsm", "archive", "-r", "/ep")
	fs.mustCLI("hsm", "release", "-r", "/ep")

	fs.mustCLI("profile", "record", "--job", "epoch", "--name", "e1", "--dir", "/ep", "--duration", "1h", "--detach")
	reader := newClientOpts(t, client.Options{Server: fs.addr, Job: "epoch", ProfilePoll: 50 * time.Millisecond, TierNoRestoreOnRead: true})
	proctest.WaitProfileClients(t, c, "e1", 1)
	order := []string{"/ep/f3", "/ep/f1", "/ep/f4", "/ep/f0"} // f2 is not read
	for _, p := range order {
		if sum, _, err := readSum(ctx, reader, p); err != nil || sum != sha256.Sum256(files[p]) {
			t.Fatalf("epoch read of %s: %v", p, err)
		}
	}
	fs.mustCLI("profile", "stop", "e1")
	reader.Close()

	if got := strings.Fields(fs.mustCLI("stage", "--from-profile", "e1", "--dry-run")); strings.Join(got, " ") != strings.Join(order, " ") {
		t.Fatalf("stage --dry-run order %v, want %v", got, order)
	}
	if st := fs.mustCLI("hsm", "state", "-r", "/ep"); strings.Count(st, "released") != 5 {
		t.Fatalf("a dry run or the epoch restored something:\n%s", st)
	}
	if out := fs.mustCLI("stage", "--from-profile", "e1"); !strings.HasPrefix(out, "staged 4 files") {
		t.Fatalf("stage --from-profile: %q", out)
	}
	st := fs.mustCLI("hsm", "state", "-r", "/ep")
	for _, want := range []string{"archived\t/ep/f0", "archived\t/ep/f1", "released\t/ep/f2", "archived\t/ep/f3", "archived\t/ep/f4"} {
		if !strings.Contains(st, want) {
			t.Errorf("after stage: no %q in %q", want, st)
		}
	}
	be.proc.Pause(t)
	defer be.proc.Resume()
	for _, p := range order {
		if sum, _, err := readSum(ctx, c, p); err != nil || sum != sha256.Sum256(files[p]) {
			t.Fatalf("staged %s with the backend stopped: %v", p, err)
		}
	}
}

// TestStageFollow: epoch 1 of a job is recorded; in epoch 2, `sluice stage
// --from-profile e1 --follow JOB` keeps files restored ahead of the job's
// reader, which reads the same files in the same order. The stager counts
// each file's first read as a hit (restored before it) or a miss, the
// first file is a hit (the reader starts once it is staged), every file
// ends restored, and every byte read is right.
//
// While it runs, the metadata service's /metrics shows it running and its
// restores; at the end, the same hits, misses and bytes as it printed.
func TestStageFollow(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	admin := freeAddr(t)
	fs := startFS(t, "--http", admin)
	addBackend(t, fs, be, "")
	c := newClient(t, fs.addr, 0)
	if err := c.MkdirAll(ctx, "/ds", 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 12
	files := map[string][]byte{}
	var order []string
	for i := range n {
		p := fmt.Sprintf("/ds/s%02d", (i*5)%n) // not in name order
		files[p] = randomData(uint64(400+i), 512<<10)
		if err := writeSluice(ctx, c, p, files[p]); err != nil {
			t.Fatal(err)
		}
		order = append(order, p)
	}
	fs.mustCLI("hsm", "archive", "-r", "/ds")
	fs.mustCLI("hsm", "release", "-r", "/ds")

	epoch := func(name string) {
		t.Helper()
		r := newClientOpts(t, client.Options{Server: fs.addr, Job: "trainer", ProfilePoll: 50 * time.Millisecond, TierNoRestoreOnRead: true})
		defer r.Close()
		proctest.WaitProfileClients(t, c, name, 1)
		for _, p := range order {
			if sum, _, err := readSum(ctx, r, p); err != nil || sum != sha256.Sum256(files[p]) {
				t.Fatalf("read of %s: %v", p, err)
			}
		}
	}
	fs.mustCLI("profile", "record", "--job", "trainer", "--name", "e1", "--dir", "/ds", "--duration", "1h", "--detach")
	epoch("e1")
	fs.mustCLI("profile", "stop", "e1")

	st, _ := startCLI(t, fs, "following job trainer", "stage", "--from-profile", "e1", "--follow", "trainer", "--depth", "2", "-P", "2")
	// The reader starts once the first file is staged.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		info, err := c.HsmState(ctx, order[0])
		if err != nil {
			t.Fatal(err)
		}
		if info.State == "archived" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stager did not stage %s: %s", order[0], st.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Staging is running: it says so in the metrics (reported each second).
	waitFor(t, "sluice_stage_running and restored files of job trainer", func() bool {
		m := scrapeStage(t, admin, "trainer")
		return m["sluice_stage_running"] == 1 && m["sluice_stage_restored_files_total"] >= 1 && m["sluice_stage_depth"] >= 2
	})
	// The stager's recording of the job is the running one: find its name
	// for the reader's join check.
	var following string
	for following == "" {
		l, err := c.Profiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range l {
			if strings.HasPrefix(s.Name, "stage-trainer-") {
				following = s.Name
			}
		}
	}
	epoch(following)
	if _, err := st.WaitLine(regexp.MustCompile(`staged \d+ files; readers' first reads`), 2*time.Minute); err != nil {
		t.Fatalf("stage --follow: %v\n%s", err, st.Logs())
	}
	<-st.Exited()
	var hits, misses int
	fmt.Sscanf(strings.Join(regexp.MustCompile(`(\d+) hits, (\d+) misses`).FindStringSubmatch(st.Logs())[1:], " "), "%d %d", &hits, &misses)
	t.Logf("stage --follow:\n%s", st.Logs())
	if hits+misses != n || hits < 1 {
		t.Errorf("%d hits and %d misses for %d files read (the first must be a hit)", hits, misses, n)
	}
	m := scrapeStage(t, admin, "trainer")
	var aheadPrinted, onDemandPrinted string
	if g := regexp.MustCompile(`(\S+ \S+) restored ahead, (\S+ \S+) on demand`).FindStringSubmatch(st.Logs()); g != nil {
		aheadPrinted, onDemandPrinted = g[1], g[2]
	}
	if m["sluice_stage_hits_total"] != float64(hits) || m["sluice_stage_misses_total"] != float64(misses) ||
		m["sluice_stage_ahead_bytes_total"]+m["sluice_stage_on_demand_bytes_total"] != float64(n*(512<<10)) ||
		m["sluice_stage_ahead_bytes_total"] != float64(hits*(512<<10)) ||
		m["sluice_stage_restored_files_total"] != n || m["sluice_stage_running"] != 0 {
		t.Errorf("metrics of job trainer at the end: %v; want %d hits, %d misses (%s ahead, %s on demand), %d files restored, none running",
			m, hits, misses, aheadPrinted, onDemandPrinted, n)
	}
	// The dashboard's snapshot has the job's staging too.
	snap, err := dashboard.Fetch(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Stage) != 1 || snap.Stage[0].Job != "trainer" || snap.Stage[0].Hits != float64(hits) || snap.Stage[0].Restored != n {
		t.Errorf("dashboard snapshot stage: %+v", snap.Stage)
	}
	hsm := fs.mustCLI("hsm", "state", "-r", "/ds")
	if strings.Count(hsm, "archived") != n {
		t.Errorf("after stage --follow, not every file is staged:\n%s", hsm)
	}
	if l := fs.mustCLI("profile", "ls"); strings.Contains(l, "stage-trainer") {
		t.Errorf("the stager left its recording:\n%s", l)
	}
}

// TestStageWait: with the backend down, `sluice stage` fails its restores
// and returns; `stage --wait --wait-timeout` fails too, listing each file
// not on the targets, as does `stage --wait` stopped by SIGTERM; `stage
// --wait` keeps retrying and returns 0 once the backend is back and every
// file is restored.
func TestStageWait(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := newClient(t, fs.addr, 0)
	if err := c.MkdirAll(ctx, "/w", 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	paths := []string{"/w/f0", "/w/f1", "/w/f2"}
	for i, p := range paths {
		files[p] = randomData(uint64(500+i), 1<<20+i)
		if err := writeSluice(ctx, c, p, files[p]); err != nil {
			t.Fatal(err)
		}
	}
	fs.mustCLI("hsm", "archive", "-r", "/w")
	fs.mustCLI("hsm", "release", "-r", "/w")
	be.proc.Kill()

	if r := fs.cli(append([]string{"stage"}, paths...)...); r.code == 0 || !strings.Contains(r.stderr, "3 of 3 files failed") {
		t.Fatalf("stage with the backend down: exit %d, %q", r.code, r.stderr)
	}
	r := fs.cli(append([]string{"stage", "--wait", "--wait-timeout", "3s"}, paths...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "3 of 3 files are not on the targets") {
		t.Fatalf("stage --wait --wait-timeout with the backend down: exit %d, %q", r.code, r.stderr)
	}
	for _, p := range paths {
		if !strings.Contains(r.stderr, "not on the targets: "+p+" (released)") {
			t.Errorf("stage --wait --wait-timeout did not list %s: %q", p, r.stderr)
		}
	}

	// SIGTERM (a Ctrl-C) stops the wait: the files are listed, exit 1.
	st, _ := startCLI(t, fs, "waiting for 3 files", append([]string{"stage", "--wait"}, paths...)...)
	if err := st.Stop(time.Minute); err == nil || !strings.Contains(st.Logs(), "not on the targets: /w/f1 (released)") {
		t.Fatalf("stage --wait stopped by SIGTERM: %v\n%s", err, st.Logs())
	}

	st, _ = startCLI(t, fs, "waiting for 3 files", append([]string{"stage", "--wait"}, paths...)...)
	be.restart()
	select {
	case <-st.Exited():
	case <-time.After(2 * time.Minute):
		t.Fatalf("stage --wait did not return 2 minutes after the backend came back: %s", st.Logs())
	}
	if code := st.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("stage --wait: exit %d: %s", code, st.Logs())
	}
	hsm := fs.mustCLI("hsm", "state", "-r", "/w")
	if strings.Count(hsm, "archived") != len(paths) {
		t.Fatalf("after stage --wait:\n%s", hsm)
	}
	for _, p := range paths {
		if sum, _, err := readSum(ctx, c, p); err != nil || sum != sha256.Sum256(files[p]) {
			t.Fatalf("%s after stage --wait: %v", p, err)
		}
	}
}

// scrapeStage returns the sluice_stage_* values of job from the admin
// port's /metrics, by metric name.
func scrapeStage(t testing.TB, admin, job string) map[string]float64 {
	t.Helper()
	body := proctest.Metrics(t, admin)
	out := map[string]float64{}
	re := regexp.MustCompile(`(?m)^(sluice_stage_\w+)\{job="` + regexp.QuoteMeta(job) + `"\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		var v float64
		if _, err := fmt.Sscan(m[2], &v); err != nil {
			t.Fatalf("%s: %q: %v", m[1], m[2], err)
		}
		out[m[1]] = v
	}
	return out
}
