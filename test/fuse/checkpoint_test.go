package fuse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/dashboard"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/fsx/fsxtest"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestCheckpointAbsorb writes PyTorch-DCP-shaped checkpoints through a
// mount with --staging-dir under a directory with the absorb policy: the
// writer reads its own data back at once, another client never sees a
// ".metadata" before its shards, and a mount killed with SIGKILL right
// after the commit leaves its staging for the next mount, which drains it
// and carries out the commit. Staging on the disk and in memory
// (/dev/shm), where the mount must warn that a restart of the machine
// would lose what has not drained.
func TestCheckpointAbsorb(t *testing.T) {
	requireFUSE(t)
	for _, place := range []string{"disk", "memory"} {
		t.Run(place, func(t *testing.T) {
			srv := startServer(t, "", "")
			c := srv.client()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := c.Mkdir(ctx, "/ckpt", 0o777); err != nil {
				t.Fatal(err)
			}
			if err := c.SetAbsorb(ctx, "/ckpt", client.AbsorbOn); err != nil {
				t.Fatal(err)
			}
			staging := stagingIn(t, place)
			m := startMount(t, srv.addr, "--staging-dir", staging)
			// The mount warns when its staged data would not survive a restart
			// of the machine, and only then.
			if warned := strings.Contains(m.logs.String(), "memory file system"); warned != (place == "memory") {
				t.Fatalf("staging in %s: the mount warned of memory: %v; its log: %s", place, warned, m.logs.String())
			}

			data := func(step, i int) []byte {
				r := rand.New(rand.NewPCG(uint64(step), uint64(i)))
				b := make([]byte, 2<<20+int(r.IntN(100000)))
				for k := range b {
					b[k] = byte(r.Uint32())
				}
				return b
			}
			const shards = 4
			// write writes checkpoint step the way DCP does: shards, fsync each,
			// .metadata.tmp, fsync, rename to .metadata.
			write := func(m *mount, step int) {
				dir := m.path("ckpt", fmt.Sprintf("step%d", step))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for i := range shards {
					f, err := os.Create(filepath.Join(dir, fmt.Sprintf("__%d_0.distcp", i)))
					if err != nil {
						t.Fatal(err)
					}
					if _, err := f.Write(data(step, i)); err != nil {
						t.Fatal(err)
					}
					if err := f.Sync(); err != nil {
						t.Fatal(err)
					}
					if err := f.Close(); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(filepath.Join(dir, ".metadata.tmp"), []byte(fmt.Sprintf("step %d", step)), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(filepath.Join(dir, ".metadata.tmp"), filepath.Join(dir, ".metadata")); err != nil {
					t.Fatal(err)
				}
			}
			// committed waits until another client sees step's .metadata, then
			// checks every shard there, whole.
			committed := func(step int) {
				t.Helper()
				dir := fmt.Sprintf("/ckpt/step%d", step)
				deadline := time.Now().Add(time.Minute)
				for {
					_, err := c.Stat(ctx, path.Join(dir, ".metadata"))
					if err == nil {
						break
					}
					if !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
						t.Fatalf("%s/.metadata: %v", dir, err)
					}
					time.Sleep(5 * time.Millisecond)
				}
				for i := range shards {
					f, err := c.Open(ctx, path.Join(dir, fmt.Sprintf("__%d_0.distcp", i)))
					if err != nil {
						t.Fatal(err)
					}
					got, err := io.ReadAll(f)
					f.Close()
					if err != nil || !bytes.Equal(got, data(step, i)) {
						t.Fatalf("%s shard %d once .metadata is visible: %d bytes (want %d), %v", dir, i, len(got), len(data(step, i)), err)
					}
				}
			}

			write(m, 1)
			// The writer's own mount sees its data at once: size and bytes.
			p := m.path("ckpt", "step1", "__2_0.distcp")
			if fi, err := os.Stat(p); err != nil || fi.Size() != int64(len(data(1, 2))) {
				t.Fatalf("stat through the writing mount: %v, %v", fi, err)
			}
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data(1, 2)) {
				t.Fatalf("read back through the writing mount: %d bytes, %v", len(got), err)
			}
			committed(1)

			// Kill the mount right after the commit of step 2 was acknowledged.
			write(m, 2)
			m.kill()
			m2 := startMount(t, srv.addr, "--staging-dir", staging)
			committed(2)
			committed(1)
			// Once the mount has nothing left staged, its staging area is empty
			// after a clean unmount.
			write(m2, 3)
			committed(3)
			m2.stop()
			left, err := os.ReadDir(filepath.Join(staging, c.FSID()))
			if err != nil || len(left) != 0 {
				t.Fatalf("staging after a clean unmount: %v, %v", left, err)
			}
		})
	}
}

// TestFsxAbsorbMount runs the data-integrity exerciser through a `sluice
// mount` process staging under the absorb policy, in memory (/dev/shm,
// where drained data files are reused) and on the disk, and through a
// `sluice serve --mount` (in-process calls) staging in memory: writes, mmap
// writes, copy_file_range, truncates, fsyncs and re-opens through the
// kernel go through staging and drains, and every read and size must be
// the model's. SLUICE_FSX_SEED, SLUICE_FSX_OPS and SLUICE_FSX_LONG=1
// replay a seed or run longer (see package fsx).
func TestFsxAbsorbMount(t *testing.T) {
	requireFUSE(t)
	// "serve --mount": the mount in the server's process (in-process
	// calls to the metadata service and the targets), staging in memory.
	// "limit": a separate mount staging on the disk with --staging-max
	// 1M, so that writes wait for drains and segments are sealed early;
	// the bytes of staged data files, sampled as it runs, stay near it.
	for _, place := range []string{"memory", "disk", "serve --mount", "limit"} {
		t.Run(place, func(t *testing.T) {
			var addr, adminHTTP, mp string
			var m *mount
			staging := stagingIn(t, place)
			if place == "serve --mount" {
				staging = stagingIn(t, "memory")
				var p *proctest.Proc
				p, mp, _, addr = startServeMount(t, "--staging-dir", staging, "--http", "127.0.0.1:0")
				var err error
				if adminHTTP, err = p.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second); err != nil {
					t.Fatal(err)
				}
			} else {
				addr, adminHTTP = startServerAdmin(t)
				args := []string{"--staging-dir", staging}
				if place == "limit" {
					args = append(args, "--staging-max", "1M", "--http", "127.0.0.1:0")
				}
				m = startMount(t, addr, args...)
				mp = m.dir
			}
			// The mount's staging metrics: the server's own for serve
			// --mount, the mount's admin port (--http) for "limit".
			mountHTTP := ""
			switch place {
			case "serve --mount":
				mountHTTP = adminHTTP
			case "limit":
				mountHTTP = m.adminAddr()
			}
			var stopSampling func() int64
			if place == "limit" {
				stopSampling = sampleStaged(staging)
				defer stopSampling()
			}
			admin := proctest.Client(t, addr)
			ctx := context.Background()
			layouts := []client.Layout{{StripeCount: 1}, {StripeCount: 4, StripeSize: 64 << 10}}
			seeds := []uint64{41, 42}
			if place != "memory" {
				seeds = []uint64{43}
			}
			if place == "limit" {
				seeds = []uint64{44}
			}
			fsxtest.Run(t, admin, layouts, 1000, seeds, func(dir string) fsx.Target {
				if err := admin.SetAbsorb(ctx, dir, client.AbsorbOn); err != nil {
					t.Fatal(err)
				}
				return fsx.Dir(filepath.Join(mp, dir))
			})
			// The exerciser's writes went through staging: the mount marked
			// files staged in the metadata service, and in memory it kept
			// drained data files for reuse (*.pool).
			if n := opCount(t, adminHTTP, "staged_add"); n == 0 {
				t.Error("no file was marked staged: the writes did not go through staging")
			}
			pooled := 0
			filepath.WalkDir(staging, func(p string, d fs.DirEntry, err error) error {
				if err == nil && strings.HasSuffix(p, ".pool") {
					pooled++
				}
				return nil
			})
			if stopSampling != nil {
				// 1 MiB of held bytes, rounded up to whole blocks per file.
				peak := stopSampling()
				t.Logf("staged data files held at most %d bytes (--staging-max 1M)", peak)
				if peak == 0 || peak > 2<<20 {
					t.Errorf("staged data files held at most %d bytes under --staging-max 1M: want some, and about 1 MiB", peak)
				}
			}
			if mountHTTP != "" {
				// Everything staged drains, and the metrics say so.
				var page string
				deadline := time.Now().Add(time.Minute)
				for {
					page = proctest.Metrics(t, mountHTTP)
					if proctest.MetricSum(page, "sluice_absorb_held_bytes") == 0 &&
						proctest.MetricSum(page, "sluice_absorb_drained_bytes_total") == proctest.MetricSum(page, "sluice_absorb_staged_bytes_total") {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("staging did not drain in a minute:\n%s", grepLines(page, "sluice_absorb_"))
					}
					time.Sleep(50 * time.Millisecond)
				}
				staged, peak := proctest.MetricSum(page, "sluice_absorb_staged_bytes_total"), proctest.MetricSum(page, "sluice_absorb_held_peak_bytes")
				t.Logf("mount metrics: staged %.0f bytes, peak held %.0f, limit %.0f, throttled %.0f writes",
					staged, peak, proctest.MetricSum(page, "sluice_absorb_limit_bytes"), proctest.MetricSum(page, "sluice_absorb_throttled_writes_total"))
				if staged == 0 || peak == 0 {
					t.Errorf("mount metrics: staged %.0f bytes, peak held %.0f: want some", staged, peak)
				}
				if place == "serve --mount" {
					// The server's dashboard shows its mount's staging.
					snap, err := dashboard.Fetch(ctx, adminHTTP)
					if err != nil {
						t.Fatal(err)
					}
					if snap.Absorb == nil || snap.Absorb.Staged != staged || snap.Absorb.Held != 0 {
						t.Errorf("dashboard staging %+v, want %.0f bytes staged, none held", snap.Absorb, staged)
					}
				}
				if place == "limit" {
					// At most one FUSE write (1 MiB) over the limit.
					if limit := proctest.MetricSum(page, "sluice_absorb_limit_bytes"); limit != 1<<20 || peak > 2<<20 {
						t.Errorf("mount metrics: limit %.0f, peak held %.0f: want the limit 1 MiB and the peak within a write of it", limit, peak)
					}
				}
			}
			if (pooled > 0) != (place != "disk" && place != "limit") {
				t.Errorf("%d drained staging files kept for reuse: want some in memory only", pooled)
			}
			if m != nil {
				m.stop()
			}
		})
	}
}

// TestAbsorbListingSizes: files written and closed under the absorb policy
// whose staging has not drained yet (a writer keeps writing, so the drain
// yields to it) show their sizes in a listing with attributes (READDIRPLUS,
// which the kernel then caches), and read back whole.
func TestAbsorbListingSizes(t *testing.T) {
	requireFUSE(t)
	srv := startServer(t, "", "")
	c := srv.client()
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/ckpt", 0o777); err != nil {
		t.Fatal(err)
	}
	if err := c.SetAbsorb(ctx, "/ckpt", client.AbsorbOn); err != nil {
		t.Fatal(err)
	}
	m := startMount(t, srv.addr, "--staging-dir", t.TempDir())
	// A writer that never stops for long: the drain yields to it.
	stop := make(chan struct{})
	busy := make(chan error, 1)
	go func() {
		f, err := os.Create(m.path("ckpt", "busy"))
		if err != nil {
			busy <- err
			return
		}
		defer f.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				busy <- nil
				return
			case <-time.After(2 * time.Millisecond):
			}
			if _, err := f.WriteAt([]byte("busy"), int64(4*i)); err != nil {
				busy <- err
				return
			}
		}
	}()
	defer func() {
		close(stop)
		if err := <-busy; err != nil {
			t.Error(err)
		}
	}()
	want := map[string][]byte{}
	for i := range 8 {
		name := fmt.Sprintf("shard%d", i)
		b := bytes.Repeat([]byte{byte('a' + i)}, 100000+i*4099)
		if err := os.WriteFile(m.path("ckpt", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		want[name] = b
	}
	ents, err := os.ReadDir(m.path("ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, ok := want[e.Name()]
		if !ok {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != int64(len(b)) {
			t.Errorf("%s listed with %d bytes, want %d", e.Name(), fi.Size(), len(b))
		}
		got, err := os.ReadFile(m.path("ckpt", e.Name()))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s reads %d bytes, %v; want its %d", e.Name(), len(got), err, len(b))
		}
	}
}

// stagingIn returns a new staging directory on the disk ("disk") or in
// memory ("memory": /dev/shm), removed when the test ends.
// sampleStaged samples the bytes allocated to staged data files (*.dat)
// below dir every 10 ms until the returned function is called, which
// returns the most seen (calling it again returns the same).
func sampleStaged(dir string) func() int64 {
	stop, done := make(chan struct{}), make(chan struct{})
	var peak int64
	go func() {
		defer close(done)
		for {
			var sum int64
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !strings.HasSuffix(p, ".dat") {
					return nil
				}
				var st syscall.Stat_t
				if syscall.Stat(p, &st) == nil {
					sum += st.Blocks * 512
				}
				return nil
			})
			peak = max(peak, sum)
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	return func() int64 {
		once.Do(func() { close(stop); <-done })
		return peak
	}
}

func stagingIn(t *testing.T, place string) string {
	t.Helper()
	if place != "memory" {
		return t.TempDir()
	}
	return proctest.MemDir(t)
}

// adminAddr is the address of the mount's admin port (--http), from its
// "admin on" line.
func (m *mount) adminAddr() string {
	m.t.Helper()
	sub := regexp.MustCompile(`sluice: admin on (\S+)`).FindStringSubmatch(m.logs.String())
	if sub == nil {
		m.t.Fatalf("no admin address in the mount's output:\n%s", m.logs.String())
	}
	return sub[1]
}

// grepLines returns the lines of page that contain s.
func grepLines(page, s string) string {
	var out []string
	for _, l := range strings.Split(page, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// waitMountDrained waits until mount m (started with --http) drained its
// staged files and carried out its queued renames, and returns how many
// renames it queued.
func waitMountDrained(t *testing.T, m *mount) float64 {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		page := proctest.Metrics(t, m.adminAddr())
		queued := proctest.MetricSum(page, "sluice_absorb_renames_queued_total")
		if proctest.MetricSum(page, "sluice_absorb_held_bytes") == 0 && proctest.MetricSum(page, "sluice_absorb_renamed_total") == queued {
			if errs := proctest.MetricSum(page, "sluice_absorb_rename_errors_total"); errs != 0 {
				t.Fatalf("the mount's queued renames failed %.0f times:\n%s", errs, grepLines(page, "sluice_absorb_"))
			}
			return queued
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mount did not drain in a minute:\n%s", grepLines(page, "sluice_absorb_"))
		}
	}
}

// absorbDir makes directory dir with the absorb policy.
func absorbDir(ctx context.Context, t *testing.T, c *client.Client, dir string) {
	t.Helper()
	if err := c.Mkdir(ctx, dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetAbsorb(ctx, dir, client.AbsorbOn); err != nil {
		t.Fatal(err)
	}
}

// TestRandomTreeMount runs fsx.RunTree (files and directories made,
// renamed and removed, as a checkpoint committed by renaming its
// directory is; every answer checked against a model) through a `sluice
// mount --staging-dir` in a directory under the absorb policy, then
// checks that a client without staging reads the model's files once the
// mount drained. SLUICE_FSX_SEED and SLUICE_FSX_OPS replay one.
func TestRandomTreeMount(t *testing.T) {
	requireFUSE(t)
	addr, _ := startServerAdmin(t)
	m := startMount(t, addr, "--staging-dir", t.TempDir(), "--http", "127.0.0.1:0")
	admin := proctest.Client(t, addr)
	ctx := context.Background()
	plan, err := fsx.PlanFromEnv(400, 63)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range plan.Seeds {
		dir := fmt.Sprintf("/t%d", seed)
		absorbDir(ctx, t, admin, dir)
		files, counts, err := fsx.RunTree(fsx.DirNames(m.path(dir)), seed, plan.Ops)
		if err != nil {
			t.Fatal(err)
		}
		queued := waitMountDrained(t, m)
		t.Logf("seed %d: %d ops %+v, %.0f renames queued behind staged files: every answer as the model's", seed, plan.Ops, counts, queued)
		proctest.CheckTree(ctx, t, admin, dir, files)
	}
	m.stop()
}

// TestRandomTreeKillMount kills (SIGKILL) a `sluice mount --staging-dir`
// after a random number of fsx.RunTree operations under the absorb
// policy and a last commit (a file written and renamed into place), with
// staged files not drained and renames queued, then lets a
// new client with the same staging directory replay what the mount
// staged: every acknowledged operation must survive, so another client
// then reads exactly the model's files. Three rounds, each with its own
// kill point (drawn from the seed); SLUICE_FSX_SEED and SLUICE_FSX_OPS
// replay one.
func TestRandomTreeKillMount(t *testing.T) {
	requireFUSE(t)
	addr, _ := startServerAdmin(t)
	admin := proctest.Client(t, addr)
	staging := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	plan, err := fsx.PlanFromEnv(300, 67)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range plan.Seeds {
		r := rand.New(rand.NewPCG(seed, 0xdead))
		for round := range 3 {
			ops := 20 + r.IntN(max(plan.Ops-20, 1))
			dir := fmt.Sprintf("/k%d-%d", seed, round)
			absorbDir(ctx, t, admin, dir)
			m := startMount(t, addr, "--staging-dir", staging)
			files, counts, err := fsx.RunTree(fsx.DirNames(m.path(dir)), seed+uint64(round), ops)
			if err != nil {
				t.Fatal(err)
			}
			// Last, a commit whose drain and rename are still pending
			// at the kill (most likely): 4 MiB written and renamed into
			// place.
			commit := make([]byte, 4<<20)
			for i := range commit {
				commit[i] = byte(r.Uint32())
			}
			if err := os.WriteFile(m.path(dir, "ckpt.tmp"), commit, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(m.path(dir, "ckpt.tmp"), m.path(dir, "ckpt")); err != nil {
				t.Fatal(err)
			}
			files["ckpt"] = commit
			m.kill()
			// A new client on this node adopts the dead mount's area.
			c, err := client.New(ctx, client.Options{Server: addr, StagingDir: staging})
			if err != nil {
				t.Fatal(err)
			}
			st := c.StagingStats()
			if err := c.WaitStaged(ctx); err != nil {
				t.Fatal(err)
			}
			if after := c.StagingStats(); after.LastErrors != 0 {
				t.Fatalf("seed %d, round %d: replayed renames failed: %+v", seed, round, after)
			}
			c.Close()
			proctest.CheckTree(ctx, t, admin, dir, files)
			t.Logf("seed %d, round %d: killed after %d ops %+v; %d segments and renames adopted: every acknowledged operation there",
				seed+uint64(round), round, ops, counts, st.Adopted)
		}
	}
}

// TestRandomTreePlainMount runs fsx.RunTree through a plain mount (no
// staging, no policy): the mount's own caches (entries, attributes,
// names absent from directories it made, READDIRPLUS) against a model of
// files and directories made, renamed and removed; another client then
// reads the model's files.
func TestRandomTreePlainMount(t *testing.T) {
	requireFUSE(t)
	addr, _ := startServerAdmin(t)
	admin := proctest.Client(t, addr)
	ctx := context.Background()
	plan, err := fsx.PlanFromEnv(400, 65)
	if err != nil {
		t.Fatal(err)
	}
	for k, flags := range [][]string{
		nil,
		{"--writeback-cache"},
		{"--passthrough", "--direct-read"},
		{"--watch-timeout", "-1s"}, // no change feed: the 1 s timeouts
	} {
		t.Run(strings.Join(append([]string{"mount"}, flags...), " "), func(t *testing.T) {
			m := startMount(t, addr, flags...)
			for _, seed := range plan.Seeds {
				dir := fmt.Sprintf("/p%d-%d", seed, k)
				if err := os.Mkdir(m.path(dir), 0o755); err != nil {
					t.Fatal(err)
				}
				files, counts, err := fsx.RunTree(fsx.DirNames(m.path(dir)), seed, plan.Ops)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("seed %d: %d ops %+v: every answer as the model's", seed, plan.Ops, counts)
				proctest.CheckTree(ctx, t, admin, dir, files)
			}
			m.stop()
		})
	}
}

// TestRandomRenamesMount runs fsx.RunNames (random whole writes,
// renames, removals, reads and stats of a few names, every answer
// checked against a model) through a `sluice mount --staging-dir` in a
// directory under the absorb policy: renames queued behind staged files
// look done through the mount at once (the kernel's entries, and the
// mount's lookups and removals that wait for them), and a client without
// staging sees the model's namespace once the mount drained. The seed is
// printed; SLUICE_FSX_SEED and SLUICE_FSX_OPS replay one.
func TestRandomRenamesMount(t *testing.T) {
	requireFUSE(t)
	addr, _ := startServerAdmin(t)
	m := startMount(t, addr, "--staging-dir", t.TempDir(), "--http", "127.0.0.1:0")
	admin := proctest.Client(t, addr)
	ctx := context.Background()
	plan, err := fsx.PlanFromEnv(300, 61)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a", "b", "c", "d", "e"}
	for _, seed := range plan.Seeds {
		dir := fmt.Sprintf("/r%d", seed)
		absorbDir(ctx, t, admin, dir)
		model, counts, err := fsx.RunNames(fsx.DirNames(m.path(dir)), names, seed, plan.Ops)
		if err != nil {
			t.Fatal(err)
		}
		// Wait for the mount's drain, then read through another client.
		queued := waitMountDrained(t, m)
		t.Logf("seed %d: %d ops %+v, %.0f renames queued behind staged files: every answer as the model's", seed, plan.Ops, counts, queued)
		for _, n := range names {
			got, err := proctest.ReadFile(ctx, admin, path.Join(dir, n))
			want, had := model[n]
			if had != (err == nil) || !bytes.Equal(got, want) {
				t.Fatalf("seed %d, at the end: %s read by another client: %d bytes, %v; the model has it: %v (%d bytes)", seed, n, len(got), err, had, len(want))
			}
		}
	}
	m.stop()
}
