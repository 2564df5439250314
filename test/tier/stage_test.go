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
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestStage: `sluice stage --from-file` restores the released files it
// lists, skips others, and afterwards they read with the backend stopped.
func TestStage(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
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
	out := fs.mustCLI("stage", "/job/f1", "--from-file", list, "--rate", "1G")
	if !strings.HasPrefix(out, "staged 3 files") || !strings.Contains(out, "1 not released") {
		t.Fatalf("stage: %q", out)
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
func TestStageFollow(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
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
	hsm := fs.mustCLI("hsm", "state", "-r", "/ds")
	if strings.Count(hsm, "archived") != n {
		t.Errorf("after stage --follow, not every file is staged:\n%s", hsm)
	}
	if l := fs.mustCLI("profile", "ls"); strings.Contains(l, "stage-trainer") {
		t.Errorf("the stager left its recording:\n%s", l)
	}
}
