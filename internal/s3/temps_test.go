package s3

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestAbandonedTemp(t *testing.T) {
	t.Parallel()
	now := exampleTime
	grace := time.Hour
	self := tempMaker{node: "n1", pid: 100}
	alive := func(pid int) bool { return pid == 100 || pid == 200 }
	fresh, old := now.Add(-time.Minute), now.Add(-2*time.Hour)
	tests := []struct {
		name  string
		mtime time.Time
		inUse bool
		want  bool
	}{
		{"n1.300.abc", fresh, false, true},  // this node, its process is dead
		{"n1.200.abc", fresh, false, false}, // this node, its process lives
		{"n1.200.abc", old, false, true},    // ... but it stopped writing long ago
		{"n1.100.abc", fresh, false, false}, // this process: its uploads remove their files
		{"n1.100.abc", fresh, true, false},
		{"n1.100.abc", old, true, false}, // in use: never, however old
		{"n1.300.abc", fresh, true, false},
		{"n2.300.abc", fresh, false, false}, // another node: wait for the grace
		{"n2.300.abc", old, false, true},
		{"0123456789abcdef01234567", fresh, false, false}, // an older gateway's name
		{"0123456789abcdef01234567", old, false, true},
		{"n1.x.abc", fresh, false, false},
		{"n1.-3.abc", fresh, false, false},
		{".300.abc", fresh, false, false},
	}
	for _, tc := range tests {
		if got := abandonedTemp(tc.name, tc.mtime, now, grace, self, tc.inUse, alive); got != tc.want {
			t.Errorf("abandonedTemp(%q, %v ago, inUse=%v) = %v, want %v", tc.name, now.Sub(tc.mtime), tc.inUse, got, tc.want)
		}
	}
	// A gateway that cannot identify its node only goes by age.
	if abandonedTemp("n1.300.abc", fresh, now, grace, tempMaker{pid: 100}, false, alive) {
		t.Error("removed a fresh file without knowing the node")
	}
}

func TestTemps(t *testing.T) {
	t.Parallel()
	ts := newTemps()
	p := ts.path("b")
	name := p[strings.LastIndexByte(p, '/')+1:]
	if !strings.HasPrefix(p, "/b/.sluice-s3/tmp/") {
		t.Fatalf("path %q", p)
	}
	m, ok := parseTempName(name)
	if !ok || m.pid != os.Getpid() || m.node != ts.self.node {
		t.Fatalf("parseTempName(%q) = %+v %v, want this process", name, m, ok)
	}
	if !ts.inUse(p) {
		t.Error("a new temporary path is not in use")
	}
	ts.done(p)
	if ts.inUse(p) {
		t.Error("done did not release it")
	}
	if ts.self.node == "" {
		t.Log("no node ID here (/proc?): only the grace applies")
	}
	if !processAlive(os.Getpid()) {
		t.Error("processAlive(self) = false")
	}
}
