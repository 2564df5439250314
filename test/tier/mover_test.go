package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/dashboard"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestMover runs the tier mover (`sluice mover --once`) over directory
// policies against each real S3 backend: a dry run moves nothing; a pass
// archives what its policy says, and only that; the next releases by age
// and by watermark, never an inline file; released files read back byte
// for byte.
func TestMover(t *testing.T) {
	for _, start := range backends {
		be := start(t)
		t.Run(be.name, func(t *testing.T) { testMover(t, be) })
	}
}

func testMover(t *testing.T, be *backend) {
	ctx := context.Background()
	admin := freeAddr(t)
	fs := startFS(t, "--http", admin)
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
	// So do the metadata service's metrics and dashboard, though the pass
	// ran in another process (sluice mover).
	snap, err := dashboard.Fetch(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if mp := snap.MoverPass; mp == nil || mp.Host == "" || mp.Files != 6 || mp.Archived != 1 || mp.Released != 3 || mp.ReleasedBytes != 5<<20 || mp.Failures != 0 || mp.End < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("dashboard: last pass over / is %+v, want 6 files, 1 archived, 3 released (5 MiB), no failure, within the last minute", mp)
	}
	if snap.Mover != nil {
		t.Errorf("dashboard: this process runs no mover but shows %+v", snap.Mover)
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
	// With rate caps (high enough not to slow this test down).
	fs, c, admin := startServeMover(t, "s/", "--mover-every", "200ms", "--mover-archive-rate", "1G", "--mover-release-rate", "100")
	data := randomData(21, 1<<20)
	if err := writeSluice(ctx, c, "/w/x", data); err != nil {
		t.Fatal(err)
	}
	fs.mustCLI("tier", "policy", "set", "/w", "--archive-after", "1ms")
	waitFor(t, "the serve mover archived /w/x", func() bool {
		info, err := c.HsmState(ctx, "/w/x")
		return err == nil && info.State == "archived"
	})
	if got := proctest.MetricSum(proctest.Metrics(t, admin), `sluice_mover_moved_bytes_total{action="archive"}`); got != float64(len(data)) {
		t.Errorf("sluice_mover_moved_bytes_total{action=\"archive\"} is %v, want %d", got, len(data))
	}
	// The dashboard's snapshot has the mover too.
	snap, err := dashboard.Fetch(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Mover == nil || snap.Mover.Archived < 1 || snap.Mover.ArchivedBytes < float64(len(data)) || snap.Mover.Passes < 1 {
		t.Errorf("dashboard snapshot mover: %+v", snap.Mover)
	}
	// A bad cap is a usage error before anything starts.
	for flag, bad := range map[string]string{"--mover-archive-rate": "fast", "--mover-max-archive": "lots", "--mover-max-releases": "-1", "--mover-parallel": "0"} {
		out, err := exec.Command(binary, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "", "--mover-every", "1s", flag, bad).CombinedOutput()
		if code := exitCode(err); code != 2 || !strings.Contains(string(out), flag) {
			t.Errorf("serve %s %s: exit %d: %s; want a usage error naming the flag", flag, bad, code, out)
		}
	}
}

// TestServeMoverCaps checks the per-pass caps of `sluice serve`'s mover:
// with --mover-max-releases 1 and --mover-max-archive 1 (byte: one file
// a pass), no pass archives or releases more than one file, however many
// are due, while passes go on until all are done.
func TestServeMoverCaps(t *testing.T) {
	ctx := context.Background()
	fs, c, admin := startServeMover(t, "c/", "--mover-every", "100ms", "--mover-max-releases", "1", "--mover-max-archive", "1", "--mover-parallel", "2")
	const n = 5
	for i := range n {
		if err := writeSluice(ctx, c, fmt.Sprintf("/w/%d", i), randomData(uint64(60+i), 256<<10)); err != nil {
			t.Fatal(err)
		}
	}
	fs.mustCLI("tier", "policy", "set", "/w", "--archive-after", "1ms", "--release-after", "1ms")
	// Each scrape: the files moved never outnumber the passes that could
	// have moved them (one archive per pass; one release per pass after
	// the first, which only archives: a file archived in a pass is
	// released in a later one).
	waitFor(t, "all files released, one move of each kind per pass", func() bool {
		body := proctest.Metrics(t, admin)
		// A pass's moves are counted as they finish, the pass itself
		// at its end: during pass k, passes is k-1.
		passes := proctest.MetricSum(body, "sluice_mover_passes_total")
		archived := proctest.MetricSum(body, `sluice_mover_moved_files_total{action="archive"}`)
		released := proctest.MetricSum(body, `sluice_mover_moved_files_total{action="release"}`)
		if archived > passes+1 || released > passes {
			t.Fatalf("after %v passes: %v archived, %v released: more than one a pass", passes, archived, released)
		}
		return released == n
	})
	for i := range n {
		if info, err := c.HsmState(ctx, fmt.Sprintf("/w/%d", i)); err != nil || info.State != "released" {
			t.Errorf("/w/%d: %+v, %v; want released", i, info, err)
		}
	}
}

// startServeMover starts a `sluice serve` with its admin port and args
// (the mover's flags), a Sluice backend registered under prefix, a client
// of it and the directory /w; it returns the server, the client and the
// admin address.
func startServeMover(t *testing.T, prefix string, args ...string) (*fsServer, *client.Client, string) {
	t.Helper()
	be := startSluiceBackend(t)
	admin := freeAddr(t)
	fs := startFS(t, append([]string{"--http", admin}, args...)...)
	addBackend(t, fs, be, prefix)
	c := newClient(t, fs.addr, 0)
	if err := c.MkdirAll(context.Background(), "/w", 0o755); err != nil {
		t.Fatal(err)
	}
	return fs, c, admin
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

// TestMoverTargetWatermark checks that release watermarks are per target:
// a `sluice serve` with two targets, each on a tmpfs of its own (32 MiB
// and 1 GiB), pools that put /small's files on the first and /big's on
// the second, and a policy releasing at 40% down to 20%. /small's files
// fill the first target past 40% while the file system as a whole stays
// near 2% (the fill the mover watched before): the second pass must
// release /small's least recently used files, enough to bring its target
// to 20% or below, and nothing of /big.
func TestMoverTargetWatermark(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	dir := t.TempDir()
	for id, size := range map[int]string{1: "32m", 2: "1g"} {
		proctest.MountTmpfs(t, filepath.Join(dir, "targets", strconv.Itoa(id)), size)
	}
	p, addr := proctest.Start(t, binary, nil, readyLine, "serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--http", "")
	fs := &fsServer{t: t, dataDir: dir, addr: addr, proc: p}
	addBackend(t, fs, be, "wm/")
	c := newClient(t, fs.addr, 0)
	fs.mustCLI("pool", "create", "one", "1")
	fs.mustCLI("pool", "create", "two", "2")
	for d, pool := range map[string]string{"/small": "one", "/big": "two"} {
		if err := c.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
		fs.mustCLI("layout", "set", d, "--pool", pool, "--stripe-count", "1")
	}
	const n, size = 4, 4 << 20
	files := map[string][]byte{}
	for i := range n {
		for _, d := range []string{"/small", "/big"} {
			p := fmt.Sprintf("%s/%d", d, i)
			files[p] = randomData(uint64(40+len(files)), size)
			if err := writeSluice(ctx, c, p, files[p]); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Millisecond) // distinct mtimes: the LRU order is 0, 1, 2, 3
	}
	fill := func(id uint32) float64 {
		t.Helper()
		ts, err := c.Targets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range ts {
			if tg.ID == id {
				return 100 * float64(tg.Used) / float64(tg.Capacity)
			}
		}
		t.Fatalf("no target %d", id)
		return 0
	}
	// The targets report their use with their heartbeats.
	waitFor(t, "target 1 past 40% in a heartbeat", func() bool { return fill(1) >= 40 })
	st, err := c.Statfs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fills: target 1 %.1f%%, target 2 %.1f%%, file system %.1f%%", fill(1), fill(2), 100*float64(st.Used)/float64(st.Capacity))
	if fsFill := 100 * float64(st.Used) / float64(st.Capacity); fsFill >= 20 {
		t.Fatalf("the file system is %.1f%% full as a whole: the test needs it below the low watermark", fsFill)
	}
	fs.mustCLI("tier", "policy", "set", "/", "--archive-after", "1ms", "--release-high", "40", "--release-low", "20")
	t.Logf("first pass:\n%s", fs.mustCLI("mover", "--once"))
	before := fill(1)
	out := fs.mustCLI("mover", "--once")
	t.Logf("second pass:\n%s", out)
	released := 0
	for i := range n {
		for _, d := range []string{"/small", "/big"} {
			p := fmt.Sprintf("%s/%d", d, i)
			info, err := c.HsmState(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case d == "/big" && info.State != "archived":
				t.Errorf("%s is %s: its target is nearly empty, want archived", p, info.State)
			case d == "/small" && info.State == "released":
				if i != released {
					t.Errorf("%s released, but not the %d files used before it", p, i)
				}
				released++
			case d == "/small" && info.State != "archived":
				t.Errorf("%s is %s, want archived or released", p, info.State)
			}
		}
	}
	// Enough released to bring target 1 from where it was to 20% or
	// below, counting what each frees there.
	per := 100 * float64(size) / (32 << 20)
	if need := int((before-20)/per) + 1; released < min(need, n) {
		t.Errorf("released %d of /small's files, want at least %d to take target 1 from %.1f%% to 20%%", released, min(need, n), before)
	}
	if !strings.Contains(out, "target 1 past the high watermark") {
		t.Errorf("the second pass does not say which target was past its watermark:\n%s", out)
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

// TestMoverReleasesLeastRead checks that "least recently used" means
// used: of two archived files under a watermark policy, changed and read
// days ago, the one read since (its access time set by a client's read,
// relatime-style: client/atime.go) is released after the one nobody
// read, though its data changed longer ago.
func TestMoverReleasesLeastRead(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "lru/")
	c := newClient(t, fs.addr, 0)
	if err := c.MkdirAll(ctx, "/lru", 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"/lru/read": randomData(51, 1<<20), "/lru/unread": randomData(52, 1<<20)}
	for p, d := range files {
		if err := writeSluice(ctx, c, p, d); err != nil {
			t.Fatal(err)
		}
	}
	fs.mustCLI("hsm", "archive", "/lru/read", "/lru/unread")
	// Both changed and used days ago, /lru/read longer ago.
	now := time.Now()
	for p, age := range map[string]time.Duration{"/lru/read": 5 * 24 * time.Hour, "/lru/unread": 4 * 24 * time.Hour} {
		if err := c.Chtimes(ctx, p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	// A reader opens /lru/read: its client sets the access time.
	reader := newClient(t, fs.addr, 0)
	if got, err := readAll(ctx, reader, "/lru/read"); err != nil || !bytes.Equal(got, files["/lru/read"]) {
		t.Fatalf("read: %d bytes, %v", len(got), err)
	}
	waitFor(t, "the reader's access time", func() bool {
		fi, err := c.Stat(ctx, "/lru/read")
		return err == nil && fi.Attr().Atime.After(now.Add(-time.Minute))
	})
	fs.mustCLI("tier", "policy", "set", "/lru", "--release-high", "1", "--release-low", "0")
	out := fs.mustCLI("mover", "--once", "--max-releases", "1")
	t.Logf("pass:\n%s", out)
	if st := hsmState(t, fs, "/lru/unread"); st != "released" {
		t.Errorf("/lru/unread is %s: want it released first (not used for 4 days)", st)
	}
	if st := hsmState(t, fs, "/lru/read"); st != "archived" {
		t.Errorf("/lru/read is %s: want it kept (read just now)", st)
	}
}
