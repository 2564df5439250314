package proctest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

const needChildEnv = "PROCTEST_NEED_CHILD"

// TestNeedTool: a missing tool skips the test outside CI and fails it with
// CI=true; a present one is returned, by its absolute path as given. The
// missing cases run in a child test binary so that their skip or failure is
// the child's.
func TestNeedTool(t *testing.T) {
	if os.Getenv(needChildEnv) != "" {
		NeedTool(t, "/nonexistent/sluice-no-such-tool")
		t.Log("NeedTool returned for a missing tool")
		return
	}
	if p := NeedTool(t, "/bin/sh"); p != "/bin/sh" {
		t.Errorf("NeedTool(/bin/sh) = %q", p)
	}
	if p := NeedTool(t, "sh"); !strings.HasSuffix(p, "/sh") {
		t.Errorf("NeedTool(sh) = %q", p)
	}
	for _, tc := range []struct {
		ci       string
		fails    bool
		contains string
	}{
		{"", false, "--- SKIP: TestNeedTool"},
		{"false", false, "--- SKIP: TestNeedTool"},
		{"true", true, "--- FAIL: TestNeedTool"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNeedTool$", "-test.v")
		cmd.Env = append(os.Environ(), needChildEnv+"=1", "CI="+tc.ci)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fails || !strings.Contains(string(out), tc.contains) || strings.Contains(string(out), "NeedTool returned") {
			t.Errorf("CI=%q: exit %v, want failure %v and %q:\n%s", tc.ci, err, tc.fails, tc.contains, out)
		}
	}
}
