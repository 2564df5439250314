package checkpoint

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKillThrottled kills a checkpoint writer while it waits for room in
// a staging area with a limit (its targets paused, so nothing drains),
// then starts a writer with a smaller limit on the same staging
// directory: it adopts more than its own limit, drains it, writes the
// whole checkpoint again within its limit and commits it. What the
// killed writer staged never passed its limit, what it acknowledged is
// replayed byte for byte, and its checkpoint was never visible.
func TestKillThrottled(t *testing.T) {
	cl, addr, reader := absorbCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const limit = 4 << 20
	const dir, step = "/ckpt/step7", 7
	staging := t.TempDir()
	node := cl.Nodes[0].Proc
	node.Pause(t)
	defer node.Resume()
	// Shard 0 (3 MiB) fits; shard 1's first half does not, and nothing
	// can drain: the writer waits.
	w := startWriter(t, addr, staging, dir, step, "throttled", "STAGING_MAX="+strconv.Itoa(limit))
	if _, err := w.WaitLine(regexp.MustCompile(`^writer: at throttled$`), time.Minute); err != nil {
		t.Fatal(err)
	}
	if exists(ctx, reader, path.Join(dir, ".metadata")) {
		t.Fatalf("%s/.metadata visible while the writer waits for room", dir)
	}
	var onDisk int64
	filepath.WalkDir(staging, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".dat") {
			if fi, err := d.Info(); err == nil {
				onDisk += fi.Size()
			}
		}
		return nil
	})
	if onDisk == 0 || onDisk > limit {
		t.Fatalf("staged data files hold %d bytes with a limit of %d", onDisk, limit)
	}
	w.Kill()
	node.Resume()

	// The next writer: a limit of 1 MiB, less than the 3 MiB it adopts.
	w2 := startWriter(t, addr, staging, dir, step, "", "STAGING_MAX="+strconv.Itoa(1<<20))
	line, err := w2.WaitLine(regexp.MustCompile(`^writer: durable (.*)$`), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	<-w2.Exited()
	st := map[string]int64{}
	for _, kv := range strings.Fields(line) {
		k, v, _ := strings.Cut(kv, "=")
		st[k], _ = strconv.ParseInt(v, 10, 64)
	}
	t.Logf("second writer: %v", st)
	if st["adopted"] != 1 || st["limit"] != 1<<20 || st["held"] != 0 {
		t.Fatalf("second writer: %v, want adopted=1 (shard 0), limit=%d, held=0", st, 1<<20)
	}
	// The adopted shard counted as held (more than the limit), and the new
	// shards waited for drains.
	if st["peak"] < shardSize || st["throttled"] == 0 {
		t.Fatalf("second writer: %v, want peak >= %d (the adopted shard) and throttled > 0", st, shardSize)
	}
	if err := checkCommitted(ctx, reader, dir, step); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(staging, reader.FSID())); len(left) != 0 {
		t.Fatalf("staging areas left after the replay: %v", left)
	}
}
