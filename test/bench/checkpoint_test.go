package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/bench"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestBenchCheckpointAbsorb runs the checkpoint phase (8 writers,
// DCP-shaped) in one `sluice bench` command on Sluice under the absorb
// policy, on Sluice without it, and on a local directory with fsync, and
// logs the stall and durable times as ratios to the local directory.
// SLUICE_BENCH_CKPT_SIZE sets the checkpoint's total size (default 64MiB;
// the figures use 1GiB); SLUICE_BENCH_CKPT_COLD=1 drops the page
// cache before each restore (--ckpt-cold-restore, root only);
// SLUICE_BENCH_CKPT_STAGING=DIR puts the staging area in a new directory
// under DIR (for example /dev/shm, memory: docs/checkpoint.md) instead of
// the test's temporary directory on the disk; SLUICE_BENCH_CKPT_RESERVE=SIZE
// gives the client a staging reserve (--staging-reserve; in memory only).
func TestBenchCheckpointAbsorb(t *testing.T) {
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	for _, d := range []string{"/absorb", "/plain"} {
		if err := c.Mkdir(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetAbsorb(ctx, "/absorb", client.AbsorbOn); err != nil {
		t.Fatal(err)
	}
	size := os.Getenv("SLUICE_BENCH_CKPT_SIZE")
	if size == "" {
		size = "64MiB"
	}
	staging, local := t.TempDir(), t.TempDir()
	if parent := os.Getenv("SLUICE_BENCH_CKPT_STAGING"); parent != "" {
		d, err := os.MkdirTemp(parent, "sluice-staging-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		staging = d
	}
	args := []string{"bench", "--json", "--no-io500", "--no-train", "--ckpt-writers", "8", "--ckpt-size", size,
		"--staging-dir", staging}
	if r := os.Getenv("SLUICE_BENCH_CKPT_RESERVE"); r != "" {
		args = append(args, "--staging-reserve", r)
	}
	cache := "page cache warm on the local directory"
	if os.Getenv("SLUICE_BENCH_CKPT_COLD") != "" {
		args, cache = append(args, "--ckpt-cold-restore"), "page cache dropped before each"
	}
	out := s.cli(append(args, "sluice:/absorb", "sluice:/plain", local)...)
	var results []bench.Result
	if err := json.Unmarshal([]byte(out), &results); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(results) != 3 {
		t.Fatalf("results for %d targets: %s", len(results), out)
	}
	want, _ := bench.ParseSize(size)
	for _, r := range results {
		ck := r.Checkpoint
		if ck == nil || ck.Bytes != want/8*8 || ck.StallSeconds <= 0 || ck.DurableSeconds < ck.StallSeconds || ck.RestoreSeconds <= 0 {
			t.Fatalf("%s: checkpoint %+v", r.FS, ck)
		}
	}
	abs, plain, dir := results[0].Checkpoint, results[1].Checkpoint, results[2].Checkpoint
	ratio := func(a, b float64) string { return strconv.FormatFloat(a/b, 'f', 2, 64) }
	t.Logf("staging area: %s", staging)
	t.Logf("checkpoint %s, 8 writers: stall absorb %.3fs plain %.3fs local %.3fs; durable absorb %.3fs plain %.3fs local %.3fs",
		size, abs.StallSeconds, plain.StallSeconds, dir.StallSeconds, abs.DurableSeconds, plain.DurableSeconds, dir.DurableSeconds)
	t.Logf("stall / local-dir stall: absorb %s, plain %s; absorb stall / plain stall %s; durable absorb / plain %s",
		ratio(abs.StallSeconds, dir.StallSeconds), ratio(plain.StallSeconds, dir.StallSeconds),
		ratio(abs.StallSeconds, plain.StallSeconds), ratio(abs.DurableSeconds, plain.DurableSeconds))
	t.Logf("restore (8 readers, %s): absorb %.3fs plain %.3fs local %.3fs; local-dir time / Sluice time: absorb %s plain %s",
		cache, abs.RestoreSeconds, plain.RestoreSeconds, dir.RestoreSeconds, ratio(dir.RestoreSeconds, abs.RestoreSeconds), ratio(dir.RestoreSeconds, plain.RestoreSeconds))
	// Everything drained and was cleaned up: the staging area is empty.
	left, err := os.ReadDir(filepath.Join(staging, c.FSID()))
	if err != nil || len(left) != 0 {
		t.Fatalf("staging after the bench: %v, %v", left, err)
	}
	if staged, err := c.StagedFiles(ctx); err != nil || len(staged) != 0 {
		t.Fatalf("staged marks after the bench: %v, %v", staged, err)
	}
}

// BenchmarkStagedCheckpoints writes checkpoints of 8 shards of 128 MiB
// (SLUICE_BENCH_CKPT_SIZE in all) through one client staging in memory
// (/dev/shm), one checkpoint after another, each drained before the next
// (as training saves every few minutes): the stall of each, until every
// shard's Close returned. From the second on, segments go into the data
// files of drained ones (client/stage.go, reuse); with reserve=1x the
// client allocated as many bytes at its start (Options.StagingReserve,
// waited for before the first checkpoint), so the first one goes into
// existing pages too.
//
//	go test -run '^$' -bench StagedCheckpoints -benchtime 4x ./test/bench
func BenchmarkStagedCheckpoints(b *testing.B) {
	for _, reserve := range []bool{false, true} {
		b.Run(fmt.Sprintf("reserve=%dx", map[bool]int{false: 0, true: 1}[reserve]), func(b *testing.B) {
			stagedCheckpoints(b, reserve)
		})
	}
}

func stagedCheckpoints(b *testing.B, reserve bool) {
	s := startServer(b)
	ctx := context.Background()
	if err := s.client().Mkdir(ctx, "/ckpt", 0o755); err != nil {
		b.Fatal(err)
	}
	if err := s.client().SetAbsorb(ctx, "/ckpt", client.AbsorbOn); err != nil {
		b.Fatal(err)
	}
	size := int64(1 << 30)
	if v := os.Getenv("SLUICE_BENCH_CKPT_SIZE"); v != "" {
		n, err := bench.ParseSize(v)
		if err != nil {
			b.Fatal(err)
		}
		size = n
	}
	staging := proctest.MemDir(b)
	o := client.Options{Server: s.addr, StagingDir: staging}
	if reserve {
		o.StagingReserve = size
	}
	c, err := client.New(ctx, o)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitStagingReserve(ctx); err != nil {
		b.Fatal(err)
	}
	if st := c.StagingStats(); reserve && st.Reserved < size {
		b.Fatalf("staging stats %+v: the reserve of %d bytes was not allocated", st, size)
	}
	const writers = 8
	shard := make([]byte, size/writers)
	for i := range shard {
		shard[i] = byte(i*7 + i>>12)
	}
	b.SetBytes(size / writers * writers)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		var g errgroup.Group
		for w := range writers {
			g.Go(func() error {
				f, err := c.Create(ctx, fmt.Sprintf("/ckpt/step%d-%d", i, w))
				if err != nil {
					return err
				}
				for off := 0; off < len(shard); off += 4 << 20 {
					if _, err := f.Write(shard[off:min(off+4<<20, len(shard))]); err != nil {
						return err
					}
				}
				return f.Close()
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		stall := time.Since(start)
		b.StopTimer()
		if err := c.WaitStaged(ctx); err != nil {
			b.Fatal(err)
		}
		b.Logf("checkpoint %d: stall %.3fs (%.3f s/GiB); segments in reused files so far %d", i+1, stall.Seconds(), stall.Seconds()/(float64(size)/(1<<30)), c.StagingStats().Recycled)
		b.StartTimer()
	}
}
