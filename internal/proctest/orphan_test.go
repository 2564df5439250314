package proctest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestChildDiesWithTest: a process started by Start does not outlive a
// test process that dies without running its cleanups (as a test binary
// does when its timeout panics). The test runs itself again as such a
// parent, which starts a long sleep and exits at once.
func TestChildDiesWithTest(t *testing.T) {
	if os.Getenv("PROCTEST_ORPHAN_PARENT") == "1" {
		p, _ := Start(t, "/bin/sh", nil, regexp.MustCompile(`^ready$`), "-c", "echo ready; exec sleep 300")
		fmt.Printf("child %d\n", p.Cmd.Process.Pid)
		os.Exit(0) // no cleanups, like a timeout's panic
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestChildDiesWithTest$")
	cmd.Env = append(os.Environ(), "PROCTEST_ORPHAN_PARENT=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f, ok := strings.CutPrefix(sc.Text(), "child "); ok {
			pid, _ = strconv.Atoi(f)
		}
	}
	cmd.Wait()
	if pid == 0 {
		t.Fatal("the parent process did not report its child")
	}
	alive := func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		return len(f) > 0 && f[0] != "Z" && f[0] != "X"
	}
	for deadline := time.Now().Add(10 * time.Second); alive() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if alive() {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("process %d outlived the test process that started it", pid)
	}
}
