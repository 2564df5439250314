package e2e

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestServerGCPercent: a server process runs its garbage collector at
// GOGC=400 unless the environment sets GOGC, which wins (ADR 0026). Read
// from the admin port's Go runtime metric.
func TestServerGCPercent(t *testing.T) {
	want := 400
	if v, set := os.LookupEnv("GOGC"); set {
		// The test's own environment reaches the server: it must win.
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("GOGC=%q in the test's environment: not a number", v)
		}
		want = n
	}
	if got := serverGOGC(t, nil); got != want {
		t.Errorf("sluice serve: go_gc_gogc_percent %d, want %d", got, want)
	}
	if got := serverGOGC(t, []string{"GOGC=150"}); got != 150 {
		t.Errorf("sluice serve with GOGC=150: go_gc_gogc_percent %d, want 150", got)
	}
}

// serverGOGC starts sluice serve with env added to the test's and returns
// the GC percent its metrics report.
func serverGOGC(t *testing.T, env []string) int {
	t.Helper()
	p, _ := proctest.Start(t, binary, env, readyLine, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0")
	defer p.Stop(30 * time.Second)
	admin, err := p.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	body := proctest.Metrics(t, admin)
	m := regexp.MustCompile(`(?m)^go_gc_gogc_percent (\d+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no go_gc_gogc_percent in the metrics")
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
