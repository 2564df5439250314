// Package checkpoint tests the checkpoint absorb policy (ADR 0013) with real
// processes: a cluster of `sluice meta` and `sluice target` processes, and
// checkpoint writers that are separate processes (this test binary run
// again as a writer, using the client library with a staging directory),
// killed with SIGKILL at several points of a PyTorch-DCP-shaped checkpoint.
// Every process is stopped by PID when its test ends.
package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

var binary string

func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_CKPT_WRITER") != "" {
		if err := writerMain(); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(proctest.Main(m, &binary))
}

const (
	shards    = 4
	shardSize = 3<<20 + 12345
)

// shardData is the content of shard i of checkpoint step.
func shardData(step, i int) []byte {
	r := rand.New(rand.NewChaCha8([32]byte{byte(step), byte(i), 7}))
	b := make([]byte, shardSize)
	for k := 0; k+8 <= len(b); k += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[k+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func shardName(i int) string { return fmt.Sprintf("__%d_0.distcp", i) }

// manifest is what the writer puts in ".metadata": every shard's size and
// SHA-256, so that a reader can check a committed checkpoint whole.
type manifest struct {
	Step   int               `json:"step"`
	Shards map[string]string `json:"shards"` // name -> hex sha256
}

// writerMain is a checkpoint writer process: it writes a DCP-shaped
// checkpoint (shards, ".metadata.tmp", rename to ".metadata") under
// $CKPT_DIR through a client with staging in $STAGING, printing a line at
// each point, and stops at $STOP_AT (blocking until killed).
func writerMain() error {
	ctx := context.Background()
	step, _ := strconv.Atoi(os.Getenv("CKPT_STEP"))
	dir, stop := os.Getenv("CKPT_DIR"), os.Getenv("STOP_AT")
	limit, _ := strconv.ParseInt(os.Getenv("STAGING_MAX"), 10, 64)
	c, err := client.New(ctx, client.Options{Server: os.Getenv("SLUICE_SERVER"), StagingDir: os.Getenv("STAGING"), StagingMax: limit})
	if err != nil {
		return err
	}
	fmt.Println("writer: started")
	if stop == "throttled" {
		// A write waits for room in the staging area (blocks until killed).
		go func() {
			for c.StagingStats().Waiting == 0 {
				time.Sleep(time.Millisecond)
			}
			fmt.Println("writer: at throttled")
		}()
	}
	block := func(point string) {
		fmt.Println("writer: at " + point)
		if stop == point {
			select {} // until killed
		}
	}
	if err := c.MkdirAll(ctx, dir, 0o755); err != nil {
		return err
	}
	m := manifest{Step: step, Shards: map[string]string{}}
	for i := range shards {
		data := shardData(step, i)
		sum := sha256.Sum256(data)
		m.Shards[shardName(i)] = hex.EncodeToString(sum[:])
		f, err := c.Create(ctx, path.Join(dir, shardName(i)))
		if err != nil {
			return err
		}
		half := len(data) / 2
		if _, err := f.Write(data[:half]); err != nil {
			return err
		}
		if i == 1 {
			block("mid-shard") // half a shard written, not closed
		}
		if _, err := f.Write(data[half:]); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	block("shards")
	b, _ := json.Marshal(m)
	if err := proctest.WriteFile(ctx, c, path.Join(dir, ".metadata.tmp"), b); err != nil {
		return err
	}
	if err := c.Rename(ctx, path.Join(dir, ".metadata.tmp"), path.Join(dir, ".metadata")); err != nil {
		return err
	}
	block("renamed")
	if err := c.WaitStaged(ctx); err != nil {
		return err
	}
	st := c.StagingStats()
	fmt.Printf("writer: durable adopted=%d peak=%d limit=%d throttled=%d held=%d\n", st.Adopted, st.PeakHeld, st.Limit, st.Throttled, st.Held)
	return c.Close()
}

// startWriter runs a writer process for checkpoint step in dir.
func startWriter(t *testing.T, addr, staging, dir string, step int, stopAt string, env ...string) *proctest.Proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, "SLUICE_CKPT_WRITER=1", "SLUICE_SERVER="+addr, "STAGING="+staging,
		"CKPT_DIR="+dir, "CKPT_STEP="+strconv.Itoa(step), "STOP_AT="+stopAt)
	p, _ := proctest.Start(t, exe, env, regexp.MustCompile(`^writer: started$`))
	return p
}

func readFile(ctx context.Context, c *client.Client, p string) ([]byte, error) {
	f, err := c.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// checkCommitted checks that checkpoint dir is committed and whole: its
// ".metadata" names every shard with the right content.
func checkCommitted(ctx context.Context, c *client.Client, dir string, step int) error {
	b, err := readFile(ctx, c, path.Join(dir, ".metadata"))
	if err != nil {
		return err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%s/.metadata: %v (%q)", dir, err, b)
	}
	if m.Step != step || len(m.Shards) != shards {
		return fmt.Errorf("%s/.metadata: step %d with %d shards, want step %d with %d", dir, m.Step, len(m.Shards), step, shards)
	}
	for name, want := range m.Shards {
		data, err := readFile(ctx, c, path.Join(dir, name))
		if err != nil {
			return fmt.Errorf("committed checkpoint: %w", err)
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != want {
			return fmt.Errorf("committed checkpoint %s: shard %s has %d bytes with sha256 %s, want %s", dir, name, len(data), got[:12], want[:12])
		}
	}
	return nil
}

func exists(ctx context.Context, c *client.Client, p string) bool {
	_, err := c.Stat(ctx, p)
	return !errors.Is(err, fs.ErrNotExist)
}

// TestKillWriter kills a checkpoint writer at several points of a
// DCP-shaped checkpoint while the storage node is paused (so nothing has
// drained), checks that another client never sees the new ".metadata"
// before every shard is on the targets, then starts a client on the same
// staging directory and checks that it replays what was acknowledged: the
// previous checkpoint intact, the new one complete or absent.
func TestKillWriter(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{Metas: 1, Nodes: 1, TargetsPerNode: 2, Embedded: true, HeartbeatTimeout: 10 * time.Second})
	addr := cl.MetaAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reader := proctest.Client(t, addr) // another client, without staging
	if err := reader.Mkdir(ctx, "/ckpt", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := reader.SetAbsorb(ctx, "/ckpt", client.AbsorbOn); err != nil {
		t.Fatal(err)
	}
	if pol, err := reader.GetAbsorb(ctx, "/ckpt/sub"); err == nil || pol.Mode == client.AbsorbOn {
		t.Fatalf("policy of a missing directory: %+v, %v", pol, err)
	}

	// The previous checkpoint, written under the policy to the end.
	staging := t.TempDir()
	w := startWriter(t, addr, staging, "/ckpt/step1", 1, "")
	if _, err := w.WaitLine(regexp.MustCompile(`^writer: durable `), time.Minute); err != nil {
		t.Fatal(err)
	}
	<-w.Exited()
	if err := checkCommitted(ctx, reader, "/ckpt/step1", 1); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(staging)); len(left) != 1 {
		t.Fatalf("staging after a clean exit: %v", left)
	}

	node := cl.Nodes[0].Proc
	// "draining": killed after the commit was queued, while the drain
	// runs (how far it got varies from run to run).
	for k, point := range []string{"mid-shard", "shards", "renamed", "draining"} {
		step := k + 2
		if point == "draining" {
			step = 6
		}
		t.Run(point, func(t *testing.T) {
			stopAt := point
			if point == "draining" {
				stopAt = "renamed"
			}
			dir := fmt.Sprintf("/ckpt/step%d", step)
			staging := t.TempDir()
			node.Pause(t)
			defer node.Resume()
			w := startWriter(t, addr, staging, dir, step, stopAt)
			if _, err := w.WaitLine(regexp.MustCompile(`^writer: at `+stopAt+`$`), time.Minute); err != nil {
				t.Fatal(err)
			}
			// The writer was acknowledged up to here, but nothing reached
			// the paused targets: no other client may see the commit.
			if exists(ctx, reader, path.Join(dir, ".metadata")) {
				t.Fatalf("%s/.metadata visible while its shards are only staged", dir)
			}
			if stopAt == "renamed" && !exists(ctx, reader, path.Join(dir, ".metadata.tmp")) {
				t.Fatalf("the queued rename of %s/.metadata.tmp happened before the drain", dir)
			}
			if point == "draining" {
				node.Resume()
			}
			w.Kill()
			node.Resume()

			// A reader polls for the commit while the staging is replayed:
			// once it sees ".metadata", every shard must be whole.
			var seen atomic.Bool
			var pollErr error
			stopPoll := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-stopPoll:
						return
					default:
					}
					if exists(ctx, reader, path.Join(dir, ".metadata")) {
						seen.Store(true)
						pollErr = checkCommitted(ctx, reader, dir, step)
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
			// The next clients on the node, three starting at once on the
			// same staging directory: one adopts the dead client's area.
			var st client.StagingStats
			var startErr error
			var mu sync.Mutex
			var starts sync.WaitGroup
			for range 3 {
				starts.Go(func() {
					rc, err := client.New(ctx, client.Options{Server: addr, StagingDir: staging})
					if err == nil {
						err = rc.WaitStaged(ctx)
						mu.Lock()
						st.Adopted += rc.StagingStats().Adopted
						mu.Unlock()
						rc.Close()
					}
					if err != nil {
						mu.Lock()
						startErr = err
						mu.Unlock()
					}
				})
			}
			starts.Wait()
			if startErr != nil {
				t.Fatal(startErr)
			}
			close(stopPoll)
			wg.Wait()
			if pollErr != nil {
				t.Fatalf("a reader saw the commit early: %v", pollErr)
			}
			if left, _ := os.ReadDir(filepath.Join(staging, reader.FSID())); len(left) != 0 {
				t.Fatalf("staging areas left after the replay: %v", left)
			}

			if err := checkCommitted(ctx, reader, "/ckpt/step1", 1); err != nil {
				t.Fatalf("previous checkpoint: %v", err)
			}
			committed := exists(ctx, reader, path.Join(dir, ".metadata"))
			switch point {
			case "mid-shard":
				// One shard acknowledged and replayed; the second never was.
				if committed || st.Adopted != 1 {
					t.Fatalf("committed %v, adopted %d records, want false, 1", committed, st.Adopted)
				}
				for i := range 1 {
					got, err := readFile(ctx, reader, path.Join(dir, shardName(i)))
					if err != nil || !bytes.Equal(got, shardData(step, i)) {
						t.Fatalf("acknowledged shard %d after replay: %d bytes, %v", i, len(got), err)
					}
				}
			case "shards":
				if committed || st.Adopted != shards {
					t.Fatalf("committed %v, adopted %d records, want false, %d", committed, st.Adopted, shards)
				}
			case "draining":
				if !committed || st.Adopted > shards+2 {
					t.Fatalf("committed %v, adopted %d records, want true, at most %d", committed, st.Adopted, shards+2)
				}
				t.Logf("killed while draining: %d records left to replay", st.Adopted)
				if err := checkCommitted(ctx, reader, dir, step); err != nil {
					t.Fatal(err)
				}
			case "renamed":
				// Shards, .metadata.tmp and the rename were acknowledged
				// (the small .metadata.tmp may have drained already: its
				// bytes go inline to the metadata service, not paused).
				if !committed || st.Adopted < shards+1 || st.Adopted > shards+2 {
					t.Fatalf("committed %v, adopted %d records, want true, %d or %d", committed, st.Adopted, shards+1, shards+2)
				}
				if !seen.Load() {
					t.Log("the poller did not see the commit before the replay ended")
				}
				if err := checkCommitted(ctx, reader, dir, step); err != nil {
					t.Fatal(err)
				}
			}
			if staged, err := reader.StagedFiles(ctx); err != nil || len(staged) != 0 {
				t.Fatalf("staged marks after the replay: %v, %v", staged, err)
			}
		})
	}

	// Ranks on two nodes: the writer process stages the shards, another
	// client without staging (rank 0 elsewhere) commits. Its rename waits
	// until the shards drained, whichever client staged them.
	t.Run("other-client-commits", func(t *testing.T) {
		dir := "/ckpt/step5"
		node.Pause(t)
		defer node.Resume()
		w := startWriter(t, addr, t.TempDir(), dir, 5, "shards")
		if _, err := w.WaitLine(regexp.MustCompile(`^writer: at shards$`), time.Minute); err != nil {
			t.Fatal(err)
		}
		m := manifest{Step: 5, Shards: map[string]string{}}
		for i := range shards {
			sum := sha256.Sum256(shardData(5, i))
			m.Shards[shardName(i)] = hex.EncodeToString(sum[:])
		}
		b, _ := json.Marshal(m)
		if err := proctest.WriteFile(ctx, reader, path.Join(dir, ".metadata.tmp"), b); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- reader.Rename(ctx, path.Join(dir, ".metadata.tmp"), path.Join(dir, ".metadata")) }()
		// The shards cannot drain while the node is paused, so the commit
		// cannot have happened, however long this takes to look.
		if exists(ctx, reader, path.Join(dir, ".metadata")) {
			t.Fatal(".metadata visible while the shards are staged on another client")
		}
		select {
		case err := <-done:
			t.Fatalf("the commit returned while the shards were staged on another client: %v", err)
		default:
		}
		node.Resume()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := checkCommitted(ctx, reader, dir, 5); err != nil {
			t.Fatal(err)
		}
		w.Kill()
	})

	// The CLI sees one incomplete checkpoint per kill before the commit.
	out := sluiceCLI(t, addr, "checkpoint", "ls", "/ckpt")
	if c, i := strings.Count(out, "committed"), strings.Count(out, "incomplete"); c != 4 || i != 2 {
		t.Fatalf("checkpoint ls: %d committed, %d incomplete, want 4 and 2:\n%s", c, i, out)
	}
	if out := sluiceCLI(t, addr, "checkpoint", "verify", "/ckpt"); strings.Count(out, "ok ") != 4 {
		t.Fatalf("checkpoint verify:\n%s", out)
	}
	if out := sluiceCLI(t, addr, "layout", "get", "/ckpt/step3"); !strings.Contains(out, "absorb: on (set on inode") {
		t.Fatalf("layout get below the policy:\n%s", out)
	}
	sluiceCLI(t, addr, "layout", "set", "/ckpt/step3", "--absorb", "off")
	if out := sluiceCLI(t, addr, "layout", "get", "/ckpt/step3"); !strings.Contains(out, "absorb: off") {
		t.Fatalf("layout get after --absorb off:\n%s", out)
	}
	cmd := exec.Command(binary, "layout", "set", "/ckpt", "--absorb", "maybe")
	cmd.Env = append(os.Environ(), "SLUICE_SERVER="+addr)
	if out, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "maybe") {
		t.Fatalf("layout set --absorb maybe: exit %d, %v: %s", cmd.ProcessState.ExitCode(), err, out)
	}
	sluiceCLI(t, addr, "checkpoint", "prune", "--keep", "1", "/ckpt")
	if exists(ctx, reader, "/ckpt/step1") || exists(ctx, reader, "/ckpt/step4") || exists(ctx, reader, "/ckpt/step6") ||
		checkCommitted(ctx, reader, "/ckpt/step5", 5) != nil || !exists(ctx, reader, "/ckpt/step3") {
		t.Fatal("prune --keep 1 did not remove only the older committed checkpoints")
	}

	// A flipped byte in a shard's chunk on disk fails verify, naming it.
	fi, err := reader.Stat(ctx, "/ckpt/step5/"+shardName(2))
	if err != nil {
		t.Fatal(err)
	}
	chunks, _ := filepath.Glob(filepath.Join(cl.Nodes[0].DataDir, "targets", "*", "chunks", "*", fmt.Sprintf("%016x.*.dat", fi.Attr().Ino)))
	if len(chunks) == 0 {
		t.Fatalf("no chunk file of inode %d under %s", fi.Attr().Ino, cl.Nodes[0].DataDir)
	}
	b, err := os.ReadFile(chunks[0])
	if err != nil || len(b) < 1000 {
		t.Fatalf("chunk %s: %d bytes, %v", chunks[0], len(b), err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(chunks[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(binary, "checkpoint", "verify", "/ckpt")
	cmd.Env = append(os.Environ(), "SLUICE_SERVER="+addr)
	out2, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out2), "FAIL /ckpt/step5") || !strings.Contains(string(out2), "corrupt") {
		t.Fatalf("verify of a damaged checkpoint: exit %d:\n%s", cmd.ProcessState.ExitCode(), out2)
	}
}

func sluiceCLI(t *testing.T, addr string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "SLUICE_SERVER="+addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// absorbCluster starts a one-node cluster with /ckpt under the absorb
// policy, and returns it, its address and a client without staging.
func absorbCluster(t *testing.T) (*proctest.Cluster, string, *client.Client) {
	t.Helper()
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{Metas: 1, Nodes: 1, TargetsPerNode: 2, Embedded: true, HeartbeatTimeout: 10 * time.Second})
	addr := cl.MetaAddrs()
	ctx := context.Background()
	other := proctest.Client(t, addr)
	if err := other.Mkdir(ctx, "/ckpt", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := other.SetAbsorb(ctx, "/ckpt", client.AbsorbOn); err != nil {
		t.Fatal(err)
	}
	return cl, addr, other
}

// TestRewriteWhileStaged rewrites part of a file whose staged data has
// not drained (the storage node is paused), through a File opened by
// inode, which the policy alone would not stage: the rewrite is staged
// behind the first data, so after the drain the file holds the rewrite
// over the original, never the reverse.
func TestRewriteWhileStaged(t *testing.T) {
	cl, addr, other := absorbCluster(t)
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Server: addr, StagingDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	node := cl.Nodes[0].Proc
	node.Pause(t)
	defer node.Resume()
	first := bytes.Repeat([]byte{'A'}, 4<<20)
	f, err := c.Create(ctx, "/ckpt/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(first); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, _, err := c.OpenIno(ctx, f.Ino(), client.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt(bytes.Repeat([]byte{'B'}, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil { // staged: returns with the node paused
		t.Fatal(err)
	}
	node.Resume()
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := readFile(ctx, other, "/ckpt/f")
	want := append(bytes.Repeat([]byte{'B'}, 1<<20), first[1<<20:]...)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the drain: %d bytes (B at 0: %v, A at 1 MiB: %v), %v", len(got), len(got) > 0 && got[0] == 'B', len(got) > 1<<20 && got[1<<20] == 'A', err)
	}
}

// TestRecycledStaging: a client staging in memory (/dev/shm) writes new
// segments into the data files of drained ones, whose old bytes must
// never come through: a file with a hole where the reused file held data
// reads zeros there, after the drain, from another client.
func TestRecycledStaging(t *testing.T) {
	_, addr, other := absorbCluster(t)
	ctx := context.Background()
	staging := proctest.MemDir(t)
	c, err := client.New(ctx, client.Options{Server: addr, StagingDir: staging})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.StagingStats().InMemory {
		t.Fatalf("staging in %s is not seen as memory", staging)
	}
	write := func(name string, data []byte, off int64) { t.Helper(); createAt(t, c, "/ckpt/"+name, data, off) }
	want := map[string][]byte{}
	// First checkpoint: two files full of data.
	for i, name := range []string{"a", "b"} {
		want[name] = shardData(1, i)
		write(name, want[name], 0)
	}
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	// Second: a file whose first bytes are a hole, one shorter than the
	// files before; both go into reused data files.
	tail := shardData(2, 0)[:1<<20]
	write("c", tail, 3<<20)
	want["c"] = append(make([]byte, 3<<20), tail...)
	want["d"] = shardData(2, 1)[:512<<10]
	write("d", want["d"], 0)
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	if st := c.StagingStats(); st.Recycled < 2 || st.Drained != 4 {
		t.Fatalf("staging stats %+v: want 4 segments drained, the last 2 in reused files", st)
	}
	for name, w := range want {
		got, err := readFile(ctx, other, "/ckpt/"+name)
		if err != nil || !bytes.Equal(got, w) {
			t.Fatalf("%s after the drain: %d bytes, %v; want %d (first difference at %d)", name, len(got), err, len(w), firstDiff(got, w))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestStagingReserve: a client staging in memory with a reserve allocates
// it in the background at start, and its first checkpoint's segments go
// into those files (counted as recycled before anything drained); what
// drains from them is the data written, holes reading zeros.
func TestStagingReserve(t *testing.T) {
	_, addr, other := absorbCluster(t)
	ctx := context.Background()
	staging := proctest.MemDir(t)
	const reserve = 256 << 20 // four files of 64 MiB
	c, err := client.New(ctx, client.Options{Server: addr, StagingDir: staging, StagingReserve: reserve})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitStagingReserve(ctx); err != nil {
		t.Fatal(err)
	}
	if st := c.StagingStats(); st.Reserved != reserve {
		t.Fatalf("staging stats %+v: the reserve of %d bytes was not allocated", st, reserve)
	}
	want := map[string][]byte{}
	for i, name := range []string{"a", "b", "c"} {
		data := shardData(1, i)
		off := int64(i) << 20 // "b" and "c" start with a hole
		createAt(t, c, "/ckpt/"+name, data, off)
		want[name] = append(make([]byte, off), data...)
	}
	if st := c.StagingStats(); st.Recycled != 3 {
		t.Fatalf("staging stats %+v: want the first 3 segments in reserved files", st)
	}
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		got, err := readFile(ctx, other, "/ckpt/"+name)
		if err != nil || !bytes.Equal(got, w) {
			t.Fatalf("%s after the drain: %d bytes, %v; want %d (first difference at %d)", name, len(got), err, len(w), firstDiff(got, w))
		}
	}
}

// createAt creates p through c, writes data at off and closes it.
func createAt(t *testing.T, c *client.Client, p string, data []byte, off int64) {
	t.Helper()
	f, err := c.Create(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
