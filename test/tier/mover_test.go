package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/dashboard"
)

// TestMover runs the tier mover (`sluice mover --once`) over directory
// policies against each real S3 backend: a dry run moves nothing; a pass
// archives what its policy says, and only that; the next releases by age
// and by watermark, never an inline file; released files read back byte
// for byte.
func TestMover(t *testing.T) {
	for _, start := range []func(testing.TB) *backend{startSluiceBackend, startVersity} {
		be := start(t)
		t.Run(be.name, func(t *testing.T) { testMover(t, be) })
	}
}

func testMover(t *testing.T, be *backend) {
	ctx := context.Background()
	fs := startFS(t)
	addBackend(t, fs, be, "m/")
	c := newClient(t, fs.addr, 0)
	files := map[string][]byte{
		"/cold/a":        randomData(11, 3<<20+5),
		"/cold/sub/b":    randomData(12, 1<<20),
		"/cold/small":    randomData(13, 100), // inline: archived, never released
		"/cold/keep/c":   randomData(14, 1<<20),
		"/hot/d":         randomData(15, 1<<20),
		"/full/e":        randomData(16, 2<<20),
		"/full/sub/f":    randomData(17, 2<<20),
		"/cold/sub/late": randomData(18, 1<<20),
	}
	for _, d := range []string{"/cold/sub", "/cold/keep", "/hot", "/full/sub"} {
		if err := c.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, d := range files {
		if p == "/cold/sub/late" {
			continue
		}
		if err := writeSluice(ctx, c, p, d); err != nil {
			t.Fatal(err)
		}
	}
	// /cold: archive at once, release an hour after the last use; /cold/sub
	// releases at once; /cold/keep stops the inheritance; /full releases
	// by watermark (any fill is over 1%).
	fs.mustCLI("tier", "policy", "set", "/cold", "--archive-after", "1ms", "--release-after", "1h")
	fs.mustCLI("tier", "policy", "set", "/cold/sub", "--archive-after", "1ms", "--release-after", "1ms", "--backend", "t")
	fs.mustCLI("tier", "policy", "set", "/cold/keep")
	fs.mustCLI("tier", "policy", "set", "/full", "--archive-after", "1ms", "--release-high", "1", "--release-low", "0")
	out := fs.mustCLI("tier", "policy", "get", "/cold/a", "/cold/sub/b", "/cold/keep/c", "/hot/d", "/full/sub/f")
	for _, want := range []string{
		`/cold/a\s+archive-after=1ms release-after=1h0m0s\s+/cold\n`,
		`/cold/sub/b\s+backend=t archive-after=1ms release-after=1ms\s+/cold/sub\n`,
		`/cold/keep/c\s+\(none\)\s+/cold/keep\n`,
		`/hot/d\s+\(none\)\s+-\n`,
		`/full/sub/f\s+archive-after=1ms high=1 low=0\s+/full\n`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("tier policy get: no line matching %q in:\n%s", want, out)
		}
	}
	for _, bad := range [][]string{
		{"tier", "policy", "set", "/cold", "--release-high", "50"},
		{"tier", "policy", "set", "/cold", "--release-high", "50", "--release-low", "60"},
		{"tier", "policy", "set", "/cold/a", "--archive-after", "1h"},
		{"tier", "policy", "set", "/nowhere", "--archive-after", "1h"},
	} {
		if r := fs.cli(bad...); r.code == 0 {
			t.Errorf("sluice %s succeeded", strings.Join(bad, " "))
		}
	}

	states := func() map[string]string {
		t.Helper()
		m := map[string]string{}
		for p := range files {
			info, err := c.HsmState(ctx, p)
			if err == nil {
				m[p] = info.State
			}
		}
		return m
	}
	expect := func(when string, want map[string]string) {
		t.Helper()
		got := states()
		for p, s := range want {
			if got[p] != s {
				t.Errorf("%s: %s is %q, want %q", when, p, got[p], s)
			}
		}
	}

	out = fs.mustCLI("mover", "--once", "--dry-run")
	if strings.Count(out, "would archive ") != 5 {
		t.Errorf("dry run: want 5 archives planned, got:\n%s", out)
	}
	expect("after the dry run", map[string]string{"/cold/a": "resident", "/cold/sub/b": "resident", "/full/e": "resident"})

	out = fs.mustCLI("mover", "--once")
	t.Logf("first pass:\n%s", out)
	expect("after the first pass", map[string]string{
		"/cold/a": "archived", "/cold/sub/b": "archived", "/cold/small": "archived", "/full/e": "archived", "/full/sub/f": "archived",
		"/cold/keep/c": "resident", "/hot/d": "resident",
	})
	// A file written after the first pass is archived by the next.
	if err := writeSluice(ctx, c, "/cold/sub/late", files["/cold/sub/late"]); err != nil {
		t.Fatal(err)
	}
	before := fs.chunkBytes()
	// The second pass releases at most 50 files a second (three here:
	// paced, not refused).
	out = fs.mustCLI("mover", "--once", "--release-rate", "50")
	t.Logf("second pass:\n%s", out)
	expect("after the second pass", map[string]string{
		"/cold/a":        "archived", // used within the hour
		"/cold/sub/b":    "released", // by age
		"/cold/small":    "archived", // inline: never released
		"/full/e":        "released", // by watermark
		"/full/sub/f":    "released",
		"/cold/sub/late": "archived",
		"/cold/keep/c":   "resident", "/hot/d": "resident",
	})
	if !strings.Contains(out, "released 3 (") {
		t.Errorf("second pass: want 3 releases reported, got:\n%s", out)
	}
	waitFor(t, "released chunks freed", func() bool { return fs.chunkBytes() <= before-(5<<20) })
	// sluice status shows the last pass.
	status := fs.mustCLI("status")
	if !regexp.MustCompile(`TIER MOVER.*\n\S+\s+\d+s ago\s+6\s+1 \(1\.0 MiB\)\s+3 \(5\.0 MiB\)\s+0\s`).MatchString(status) {
		t.Errorf("sluice status does not show the second pass (6 files, 1 archived, 3 released):\n%s", status)
	}
	if r := fs.cli("mover", "--once", "--archive-rate", "0"); r.code == 0 {
		t.Error("sluice mover --archive-rate 0 succeeded")
	}
	if r := fs.cli("mover", "--once", "--release-rate", "-1"); r.code != 2 {
		t.Errorf("sluice mover --release-rate -1: exit %d, want 2 (usage): %s", r.code, r.stderr)
	}

	for p, d := range files {
		got, err := readAll(ctx, c, p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if !bytes.Equal(got, d) {
			t.Fatalf("%s: read %d bytes that differ from the %d written", p, len(got), len(d))
		}
	}
}

// TestServeMover checks the mover of `sluice serve --mover-every`: it
// archives a file under a policy by itself, and its counters are in
// /metrics.
func TestServeMover(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	admin := freeAddr(t)
	// With rate caps (high enough not to slow this test down).
	fs := startFS(t, "--mover-every", "200ms", "--http", admin, "--mover-archive-rate", "1G", "--mover-release-rate", "100")
	addBackend(t, fs, be, "s/")
	c := newClient(t, fs.addr, 0)
	if err := c.MkdirAll(ctx, "/w", 0o755); err != nil {
		t.Fatal(err)
	}
	data := randomData(21, 1<<20)
	if err := writeSluice(ctx, c, "/w/x", data); err != nil {
		t.Fatal(err)
	}
	fs.mustCLI("tier", "policy", "set", "/w", "--archive-after", "1ms")
	waitFor(t, "the serve mover archived /w/x", func() bool {
		info, err := c.HsmState(ctx, "/w/x")
		return err == nil && info.State == "archived"
	})
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^sluice_mover_moved_bytes_total\{action="archive"\} (\S+)$`).FindStringSubmatch(string(body))
	if m == nil {
		t.Fatalf("/metrics has no sluice_mover_moved_bytes_total{action=\"archive\"}")
	}
	var got float64
	if _, err := fmt.Sscan(m[1], &got); err != nil || got != float64(len(data)) {
		t.Errorf("sluice_mover_moved_bytes_total{action=\"archive\"} is %s, want %d", m[1], len(data))
	}
	// The dashboard's snapshot has the mover too.
	snap, err := dashboard.Fetch(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Mover == nil || snap.Mover.Archived < 1 || snap.Mover.ArchivedBytes < float64(len(data)) || snap.Mover.Passes < 1 {
		t.Errorf("dashboard snapshot mover: %+v", snap.Mover)
	}
	// A bad rate is a usage error before anything starts.
	out, err := exec.Command(binary, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "", "--mover-every", "1s", "--mover-archive-rate", "fast").CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "--mover-archive-rate") {
		t.Errorf("serve --mover-archive-rate fast: exit %d: %s; want a usage error naming the flag", code, out)
	}
}

// exitCode returns a finished command's exit code (0 for no error, -1 when
// it did not run).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func readAll(ctx context.Context, c *client.Client, p string) ([]byte, error) {
	f, err := c.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// TestKillMover kills `sluice mover --once` with SIGKILL once its first
// archive is done, then once its first release is done: each time every
// file is in a state its policy allows and reads back byte for byte, and
// the next pass finishes the work (every object matching its file).
func TestKillMover(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := newClient(t, fs.addr, 0)
	files := writeTree(t, c, 24, 200)
	check := func(stage string, allowed ...string) map[string]int {
		t.Helper()
		states := map[string]int{}
		for p, d := range files {
			info, err := c.HsmState(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			states[info.State]++
			if !slices.Contains(allowed, info.State) {
				t.Errorf("%s: %s is %s", stage, p, info.State)
			}
			if got, err := readAll(ctx, c, p); err != nil || !bytes.Equal(got, d) {
				t.Fatalf("%s: read %s: %v", stage, p, err)
			}
		}
		return states
	}
	fs.mustCLI("tier", "policy", "set", "/tree", "--archive-after", "1ms")
	killDuring(t, fs, "archived /tree/", "mover", "--once", "-P", "2")
	t.Logf("after kill -9 during the archives: %v", check("after kill -9 during the archives", "resident", "archived"))
	fs.mustCLI("mover", "--once")
	check("after the next pass", "archived")
	checkObjects(t, be, files)
	fs.mustCLI("tier", "policy", "set", "/tree", "--archive-after", "1ms", "--release-after", "1ms")
	killDuring(t, fs, "released /tree/", "mover", "--once", "-P", "1")
	t.Logf("after kill -9 during the releases: %v", check("after kill -9 during the releases", "archived", "released"))
	fs.mustCLI("mover", "--once")
	check("after the next pass", "released")
}
