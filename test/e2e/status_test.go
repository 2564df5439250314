package e2e

import (
	"context"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStatusAndTop runs `sluice status` and `sluice top` against a real
// server while it does work.
func TestStatusAndTop(t *testing.T) {
	s := startServer(t, "", "--http", "127.0.0.1:0")
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := s.client()
	writeFile(t, c, "/a", randBytes(10, 3<<20))

	st := s.mustCLI("status")
	if !strings.Contains(st, "4 targets (4 healthy)") {
		t.Errorf("status does not report 4 healthy targets:\n%s", st)
	}
	for _, want := range []string{"TARGET", "healthy", "%", "[", "inodes"} {
		if !strings.Contains(st, want) {
			t.Errorf("status lacks %q:\n%s", want, st)
		}
	}

	// Keep the server busy while top samples it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			c.Stat(ctx, "/a")
			readFile(c, "/a")
		}
	}()
	out := s.mustCLI("top", "--admin", admin, "--interval", "300ms", "--count", "2")
	cancel()
	<-done
	for _, want := range []string{"sluice top", "data: read", "meta/resolve", "chunk/chunk_read"} {
		if !strings.Contains(out, want) {
			t.Errorf("top output lacks %q:\n%s", want, out)
		}
	}
	if m := regexp.MustCompile(`meta/resolve\s+(\d+)`).FindStringSubmatch(out); m == nil || m[1] == "0" {
		t.Errorf("top shows no resolve rate:\n%s", out)
	}
	s.failCLI("connection refused", "top", "--admin", "127.0.0.1:1", "--count", "1")
}

// TestStatfsCountsSharedDiskOnce: the four targets of `sluice serve` live
// in its data dir, on one disk: statfs (what df shows through the mount and
// sluice status prints) reports that disk's size once, not four times.
func TestStatfsCountsSharedDiskOnce(t *testing.T) {
	s := startServer(t, "")
	st, err := s.client().Statfs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var disk syscall.Statfs_t
	if err := syscall.Statfs(s.dataDir, &disk); err != nil {
		t.Fatal(err)
	}
	if want := int64(disk.Blocks) * int64(disk.Bsize); st.Targets != 4 || st.Capacity != want {
		t.Fatalf("statfs: %d targets, capacity %d; want 4 targets on the data dir's disk of %d bytes", st.Targets, st.Capacity, want)
	}
	if st.Free <= 0 || st.Free > st.Capacity || st.Used+st.Free != st.Capacity {
		t.Errorf("statfs: used %d + free %d, capacity %d", st.Used, st.Free, st.Capacity)
	}
}
