package proctest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Metrics returns the text of a server's /metrics page at admin (the
// host:port its "admin on" line printed); it fails the test if the page
// cannot be read.
func Metrics(tb testing.TB, admin string) string {
	tb.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET http://%s/metrics: %s", admin, resp.Status)
	}
	return string(body)
}

// CPUTime returns the CPU time (user and system) process pid has used so
// far, from /proc/PID/stat, and false where it cannot be read (benchmarks
// report it; nothing asserts on it).
func CPUTime(pid int) (time.Duration, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is the first, utime and stime the 12th and 13th,
	// in clock ticks (USER_HZ, 100 on Linux).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}

// MetricSum is the sum of every sample of metric name in page, a /metrics
// page's text, whose labels include every one of labels (each a whole
// pair, like `op="getlayout"`; none: all its label sets); 0 if there is
// none.
func MetricSum(page, name string, labels ...string) float64 {
	sum := 0.0
	for line := range strings.SplitSeq(page, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		if len(labels) > 0 {
			set, ok := strings.CutPrefix(rest, "{")
			set, _, _ = strings.Cut(set, "}")
			if !ok || !containsAll(strings.Split(set, ","), labels) {
				continue
			}
		}
		if v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
