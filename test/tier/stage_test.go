package tier

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
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
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := c.Profile(ctx, "e1")
		if err != nil {
			t.Fatal(err)
		}
		if s.Clients == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reader did not join the recording")
		}
		time.Sleep(20 * time.Millisecond)
	}
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
