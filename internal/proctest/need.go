package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI, which sets CI=true. There a
// missing tool is a broken set-up (.ci/run installs every tool the tests
// drive), so tests fail instead of skipping.
func InCI() bool { return os.Getenv("CI") == "true" }

// SkipMissing skips the test because something it needs is missing from
// this machine (a program, a device), with the formatted reason; in CI it
// fails the test instead.
func SkipMissing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		tb.Fatalf("%s (CI=true: .ci/run must provide it)", msg)
	}
	tb.Skip(msg)
}

// NeedTool returns the path of the program name: an absolute path is
// checked as it is (to use a given installation rather than whatever PATH
// finds first), another name is looked up on PATH. If it is missing the
// test is skipped, or fails in CI (SkipMissing).
func NeedTool(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		SkipMissing(tb, "%s is not installed: %v", name, err)
	}
	return p
}
