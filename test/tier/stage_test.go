package tier

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"testing"
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
