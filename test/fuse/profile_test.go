package fuse

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/profile"
)

// TestProfileThroughMount records the I/O of a `sluice mount --qos-job`
// process: files written, read, listed and removed with coreutils-style
// calls through the kernel show up in `sluice profile report` as the
// mount's creates, writes (every byte), reads, lookups and unlinks, from a
// client the report knows for a mount's (what the advisor's name-cache
// advice depends on).
func TestProfileThroughMount(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	s := startServer(t, "", "")
	ctx := context.Background()
	setup := s.client()
	if err := setup.Mkdir(ctx, "/in", 0o755); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("profile!"), 1<<17) // 1 MiB
	if err := proctest.WriteFile(ctx, setup, "/in/big", want); err != nil {
		t.Fatal(err)
	}
	m := startMount(t, s.addr, "--qos-job", "mj")
	if err := setup.ProfileStart(ctx, "m1", "mj", "", time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	proctest.WaitProfileClients(t, setup, "m1", 1)

	if err := os.Mkdir(m.path("out"), 0o755); err != nil {
		t.Fatal(err)
	}
	const files, size = 20, 64 << 10
	for i := range files {
		if err := os.WriteFile(m.path("out", fmt.Sprintf("f%02d", i)), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(m.path("in", "big"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back through the mount: %d bytes, %v", len(got), err)
	}
	if ents, err := os.ReadDir(m.path("out")); err != nil || len(ents) != files {
		t.Fatalf("listing: %d entries, %v", len(ents), err)
	}
	for i := range 5 {
		if err := os.Remove(m.path("out", fmt.Sprintf("f%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := setup.ProfileStop(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	m.stop() // the mount's client ships what is left as it closes

	r := profileReport(t, s.addr, "m1")
	if r.Clients != 1 || r.MountClients != 1 {
		t.Errorf("%d clients in the records, %d of them a mount's; want the mount alone", r.Clients, r.MountClients)
	}
	if n := r.Ops["create"].Count; n != files {
		t.Errorf("%d creates, want %d", n, files)
	}
	if n := r.Ops["unlink"].Count; n != 5 {
		t.Errorf("%d unlinks, want 5", n)
	}
	if n := r.Ops["mkdir"].Count; n != 1 {
		t.Errorf("%d mkdirs, want 1", n)
	}
	if r.Write.Bytes != files*size {
		t.Errorf("%d bytes written, want %d", r.Write.Bytes, files*size)
	}
	if r.Read.Bytes < int64(len(want)) {
		t.Errorf("%d bytes read, want at least %d", r.Read.Bytes, len(want))
	}
	if r.Ops["lookup"].Count == 0 || r.Ops["readdir"].Count == 0 {
		t.Errorf("no lookups or listings recorded: %+v", r.Ops)
	}
}

// profileReport runs `sluice profile report NAME --json` against the
// server at addr and returns its summary.
func profileReport(t *testing.T, addr, name string) profile.Report {
	t.Helper()
	cmd := exec.Command(binary, "profile", "report", name, "--json")
	cmd.Env = append(os.Environ(), "SLUICE_SERVER="+addr)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("profile report: %v\n%s", err, out)
	}
	var rep struct{ Report profile.Report }
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	return rep.Report
}
