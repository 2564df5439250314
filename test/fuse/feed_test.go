package fuse

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestChangeFeedCachesLonger: while the feed is live, a mount with the
// default timeouts lets the kernel keep a name it created past the short
// timeout (1 s): a stat 1.5 s later asks the metadata service nothing. With
// --watch-timeout -1s it asks again, as before the feed.
func TestChangeFeedCachesLonger(t *testing.T) {
	requireFUSE(t)
	addr, admin := startServerAdmin(t)
	for _, c := range []struct {
		args  []string
		asked bool
	}{{nil, false}, {[]string{"--watch-timeout", "-1s"}, true}} {
		polls := opCount(t, admin, "watch")
		m := startMount(t, addr, c.args...)
		if !c.asked {
			// The long timeouts hold only once the feed is live.
			waitFeedLive(t, admin, polls)
		}
		p := m.path("own")
		if asked := statLaterAsks(t, admin, p); asked != c.asked {
			t.Errorf("mount %v: a stat 1.5 s after the create asked the metadata service: %v, want %v", c.args, asked, c.asked)
		}
		must(t, os.Remove(p))
		m.stop()
	}
}

// statLaterAsks creates the file p through a mount and stats it, then
// stats it again 1.5 s later (past the short timeouts) and reports whether
// that stat asked the metadata service (admin: its admin address).
func statLaterAsks(t *testing.T, admin, p string) bool {
	t.Helper()
	writeFile(t, p, "x")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	before := opCount(t, admin, "lookup") + opCount(t, admin, "getattr")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return opCount(t, admin, "lookup")+opCount(t, admin, "getattr") > before
}

// waitFeedLive waits for a new mount's first two change-feed polls (the
// first one starts its epoch) after the server with admin port admin had
// counted polls of them: the feed is then live. A loaded machine may take
// a while to make them.
func waitFeedLive(t *testing.T, admin string, polls int) {
	t.Helper()
	deadline := time.Now().Add(feedBound)
	for opCount(t, admin, "watch") < polls+2 {
		if time.Now().After(deadline) {
			t.Fatalf("not two change-feed polls in %v", feedBound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// feedBound is how long the tests give another client's change to reach
// a mount through the change feed. The kernel caches are set to an hour,
// so only the feed can make a change visible within it.
const feedBound = 10 * time.Second

// seenWithin polls cond every 2 ms until it holds or feedBound passes,
// and logs how long it took.
func seenWithin(t *testing.T, what string, cond func() bool) bool {
	t.Helper()
	start := time.Now()
	for end := start.Add(feedBound); ; {
		if cond() {
			t.Logf("%s: seen after %v", what, time.Since(start).Round(100*time.Microsecond))
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestChangeFeed: a mount that follows the metadata service's change feed
// (ADR 0022), with the kernel caching names, absent names and attributes
// for an hour, sees every kind of change another mount makes within
// feedBound: a new name it had cached as absent, a file's growth and mode,
// a rename and a removal, a new directory's entries. A mount that does not
// follow the feed, with the same hour of kernel caching, does not see the
// new name: the feed is what shows it.
func TestChangeFeed(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "")
	hour := []string{"--entry-timeout", "1h", "--negative-timeout", "1h", "--attr-timeout", "1h"}
	a := startMount(t, s.addr, append([]string{"--watch-timeout", "1h"}, hour...)...)
	blind := startMount(t, s.addr, append([]string{"--watch-timeout", "-1s"}, hour...)...)
	b := startMount(t, s.addr)
	defer a.stop()
	defer blind.stop()
	defer b.stop()

	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	absent := func(p string) bool { _, err := os.Stat(p); return errors.Is(err, os.ErrNotExist) }
	size := func(p string) int64 {
		st, err := os.Stat(p)
		if err != nil {
			return -1
		}
		return st.Size()
	}

	// Absent names, cached as absent by both watching mounts.
	for _, m := range []*mount{a, blind} {
		if !absent(m.path("f")) {
			t.Fatalf("%s: f exists before it was created", m.dir)
		}
	}
	writeFile(t, b.path("f"), "12345")
	if !seenWithin(t, "new file", func() bool { return size(a.path("f")) == 5 }) {
		t.Fatalf("the following mount did not see a new file within %v (stat: size %d)", feedBound, size(a.path("f")))
	}
	time.Sleep(time.Second) // what a 1 s timeout would have let through
	if exists(blind.path("f")) {
		t.Fatalf("the mount that does not follow the feed saw the new file: the test cannot tell the feed's work from the timeouts'")
	}

	// Attributes the kernel cached: growth and mode.
	writeFile(t, b.path("f"), "1234567890")
	if !seenWithin(t, "growth", func() bool { return size(a.path("f")) == 10 }) {
		t.Fatalf("the following mount did not see the file grow within %v (size %d)", feedBound, size(a.path("f")))
	}
	must(t, os.Chmod(b.path("f"), 0o600))
	if !seenWithin(t, "chmod", func() bool { st, err := os.Stat(a.path("f")); return err == nil && st.Mode().Perm() == 0o600 }) {
		t.Fatalf("the following mount did not see a chmod within %v", feedBound)
	}

	// A rename: the old name goes, the new one comes.
	if !absent(a.path("g")) {
		t.Fatal("g exists before the rename")
	}
	must(t, os.Rename(b.path("f"), b.path("g")))
	if !seenWithin(t, "rename", func() bool { return absent(a.path("f")) && size(a.path("g")) == 10 }) {
		t.Fatalf("the following mount did not see a rename within %v", feedBound)
	}

	// A removal.
	must(t, os.Remove(b.path("g")))
	if !seenWithin(t, "removal", func() bool { return absent(a.path("g")) }) {
		t.Fatalf("the following mount did not see a removal within %v", feedBound)
	}

	// A new directory and a file in it, looked up before they existed.
	if !absent(a.path("d/x")) {
		t.Fatal("d/x exists before it was created")
	}
	must(t, os.Mkdir(b.path("d"), 0o755))
	writeFile(t, b.path("d/x"), "x")
	if !seenWithin(t, "new directory's file", func() bool { return readFileOr(a.path("d/x")) == "x" }) {
		t.Fatalf("the following mount did not see a new directory's file within %v: %s", feedBound, readFileOr(a.path("d/x")))
	}
}

// feedEntry is what the model of TestChangeFeedRandom says a name holds.
type feedEntry struct {
	size int64
	mode os.FileMode
}

// TestChangeFeedRandom: two mounts whose kernels cache names, absent names
// and attributes for an hour take turns changing a small namespace at
// random: creating and rewriting files of random sizes, removing them,
// renaming them within and across two directories (over existing names
// too) and changing their modes. After every change the mount that made it
// must show the model at once, and the other mount within feedBound:
// every name present with its size and mode, every other name absent. The
// seed is printed; SLUICE_FEED_SEED replays it, SLUICE_FEED_OPS sets the
// number of changes (default 150).
func TestChangeFeedRandom(t *testing.T) {
	requireFUSE(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SLUICE_FEED_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SLUICE_FEED_SEED=%q: %v", v, err)
		}
	}
	ops := envInt(t, "SLUICE_FEED_OPS", 150)
	t.Logf("seed %d (SLUICE_FEED_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 22))
	s := startServer(t, "", "")
	hour := []string{"--watch-timeout", "1h", "--entry-timeout", "1h", "--negative-timeout", "1h", "--attr-timeout", "1h"}
	mounts := []*mount{startMount(t, s.addr, hour...), startMount(t, s.addr, hour...)}
	defer mounts[0].stop()
	defer mounts[1].stop()
	must(t, os.Mkdir(mounts[0].path("d"), 0o755))
	var names []string
	for i := range 6 {
		names = append(names, fmt.Sprintf("n%d", i), fmt.Sprintf("d/n%d", i))
	}
	model := map[string]feedEntry{}
	modes := []os.FileMode{0o600, 0o640, 0o644}

	// differs returns what m shows differently from the model, or "".
	differs := func(m *mount) string {
		for _, n := range names {
			st, err := os.Stat(m.path(n))
			want, ok := model[n]
			switch {
			case !ok && errors.Is(err, os.ErrNotExist):
			case !ok:
				return fmt.Sprintf("%s: stat %v, %v; want absent", n, st, err)
			case err != nil:
				return fmt.Sprintf("%s: %v; want size %d mode %v", n, err, want.size, want.mode)
			case st.Size() != want.size || st.Mode().Perm() != want.mode:
				return fmt.Sprintf("%s: size %d mode %v; want size %d mode %v", n, st.Size(), st.Mode().Perm(), want.size, want.mode)
			}
		}
		return ""
	}
	pick := func() string { return names[rng.IntN(len(names))] }
	present := func() (string, bool) { return oneOf(rng, names, model) }
	for op := range ops {
		k := rng.IntN(2)
		m, other := mounts[k], mounts[1-k]
		var what string
		switch r := rng.IntN(10); {
		case r < 4: // create or rewrite
			n, size := pick(), int64(rng.IntN(3000))
			mode := modes[rng.IntN(len(modes))]
			if e, ok := model[n]; ok {
				mode = e.mode // a rewrite keeps the mode
			}
			must(t, os.WriteFile(m.path(n), make([]byte, size), mode))
			model[n] = feedEntry{size, mode}
			what = fmt.Sprintf("write %s (%d bytes)", n, size)
		case r < 6:
			n, ok := present()
			if !ok {
				continue
			}
			must(t, os.Remove(m.path(n)))
			delete(model, n)
			what = "remove " + n
		case r < 8:
			from, ok := present()
			if !ok {
				continue
			}
			to := pick()
			must(t, os.Rename(m.path(from), m.path(to)))
			if from != to {
				model[to] = model[from]
				delete(model, from)
			}
			what = fmt.Sprintf("rename %s -> %s", from, to)
		default:
			n, ok := present()
			if !ok {
				continue
			}
			mode := modes[rng.IntN(len(modes))]
			must(t, os.Chmod(m.path(n), mode))
			e := model[n]
			e.mode = mode
			model[n] = e
			what = fmt.Sprintf("chmod %s %v", n, mode)
		}
		if d := differs(m); d != "" {
			t.Fatalf("seed %d, change %d (%s on mount %d): the same mount shows %s", seed, op, what, k, d)
		}
		var d string
		for end := time.Now().Add(feedBound); ; time.Sleep(2 * time.Millisecond) {
			if d = differs(other); d == "" || time.Now().After(end) {
				break
			}
		}
		if d != "" {
			t.Fatalf("seed %d, change %d (%s on mount %d): the other mount still shows %s after %v", seed, op, what, k, d, feedBound)
		}
	}
}

// TestServeWatchTimeout: `sluice serve --mount` takes --watch-timeout for
// its mount as `sluice mount` does (the advisor's name-cache advice names
// it): with -1s the kernel asks again for a name after the short timeout,
// with 1h it does not.
func TestServeWatchTimeout(t *testing.T) {
	requireFUSE(t)
	for _, c := range []struct {
		watch string
		asked bool
	}{{"1h", false}, {"-1s", true}} {
		p, mp, _, _ := startServeMount(t, "--http", "127.0.0.1:0", "--watch-timeout", c.watch)
		m := regexp.MustCompile(`admin on (\S+)`).FindStringSubmatch(p.Logs())
		if m == nil {
			t.Fatalf("no admin address in %s", p.Logs())
		}
		admin := m[1]
		if !c.asked {
			waitFeedLive(t, admin, 0)
		}
		if asked := statLaterAsks(t, admin, filepath.Join(mp, "own")); asked != c.asked {
			t.Errorf("serve --mount --watch-timeout %s: a stat 1.5 s after the create asked the metadata service: %v, want %v", c.watch, asked, c.asked)
		}
	}
}
