// Package cluster tests a multi-node Sluice: metadata services on etcd and
// storage nodes as separate processes, with chain replication, killed and
// cut-off nodes, and metadata service failover.
package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/wire"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.Main(m, &binary)) }

// workload writes files of random content under dir from several writers
// and reads back files already written, checking every byte, until stop
// is closed and each writer wrote at least min files. It records the
// SHA-256 of every acknowledged file (Close returned nil).
type workload struct {
	c   *client.Client
	dir string

	mu     sync.Mutex
	sums   map[string][32]byte
	errs   []error
	writes atomic.Int64
	reads  atomic.Int64
}

func (w *workload) fail(err error) {
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
}

func (w *workload) run(ctx context.Context, writers int, stop <-chan struct{}, minFiles int) {
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			for n := 0; ; n++ {
				select {
				case <-stop:
					if n >= minFiles {
						return
					}
				default:
				}
				if ctx.Err() != nil {
					return
				}
				name := fmt.Sprintf("%s/w%d-%04d", w.dir, i, n)
				data := make([]byte, 1+rng.IntN(3<<20))
				for k := 0; k < len(data); k += 8 {
					data[k] = byte(rng.Uint32())
				}
				if err := proctest.WriteFile(ctx, w.c, name, data); err != nil {
					w.fail(fmt.Errorf("write %s: %w", name, err))
					return
				}
				w.mu.Lock()
				w.sums[name] = sha256.Sum256(data)
				w.mu.Unlock()
				w.writes.Add(1)
				// Read back an older file.
				w.mu.Lock()
				var pick string
				var want [32]byte
				for p, s := range w.sums {
					pick, want = p, s
					break
				}
				w.mu.Unlock()
				got, err := readFile(ctx, w.c, pick)
				if err != nil {
					w.fail(fmt.Errorf("read %s: %w", pick, err))
					return
				}
				if sha256.Sum256(got) != want {
					w.fail(fmt.Errorf("read %s: content differs from what was written", pick))
					return
				}
				w.reads.Add(1)
			}
		})
	}
	wg.Wait()
}

// errors returns the errors the workload met so far.
func (w *workload) errors() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.errs)
}

// waitWrites waits until the workload acknowledged n files in all. It
// returns an error when the workload met an error or stopped (done closed)
// first, or when ctx ends: the wait is bounded by ctx's deadline.
func (w *workload) waitWrites(ctx context.Context, n int64, done <-chan struct{}) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for w.writes.Load() < n {
		if errs := w.errors(); len(errs) > 0 {
			return fmt.Errorf("the workload failed after %d of %d writes: %v", w.writes.Load(), n, errs)
		}
		select {
		case <-done:
			return fmt.Errorf("the workload stopped after %d of %d writes: %v", w.writes.Load(), n, w.errors())
		case <-ctx.Done():
			return fmt.Errorf("the workload wrote %d of %d files before its deadline: %w", w.writes.Load(), n, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

func readFile(ctx context.Context, c *client.Client, p string) ([]byte, error) {
	f, err := c.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// verify reads every acknowledged file back.
func (w *workload) verify(t *testing.T, ctx context.Context) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, want := range w.sums {
		got, err := readFile(ctx, w.c, p)
		if err != nil {
			t.Fatalf("read %s after the failure: %v", p, err)
		}
		if sha256.Sum256(got) != want {
			t.Fatalf("%s: content differs from what was acknowledged", p)
		}
	}
}

func newWorkload(t *testing.T, c *client.Client, dir string, replicas int) *workload {
	t.Helper()
	ctx := context.Background()
	if err := c.MkdirAll(ctx, dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, dir, client.Layout{StripeSize: 1 << 20, StripeCount: 2, Replicas: replicas}); err != nil {
		t.Fatal(err)
	}
	return &workload{c: c, dir: dir, sums: make(map[string][32]byte)}
}

// verifyReplicas retries checkReplicas while the chain table is still
// spreading (a metadata service's cache lags the KV by up to half a
// second, and a target may ask that one).
func verifyReplicas(t *testing.T, cl *proctest.Cluster) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := checkReplicas(cl)
		// A chain that changed, or a target that has briefly lost the
		// metadata service on a loaded machine (it refuses chain requests
		// until it reaches it again, ADR 0004), is worth another look.
		code := errs.CodeOf(err)
		if err == nil || time.Now().After(deadline) || code != errs.ChainChanged && code != errs.Unavailable {
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkReplicas checks, chunk by chunk, that the replicas of every chain
// hold the same chunks with the same lengths and content digests, as the
// targets themselves report them (OpChunkList).
func checkReplicas(cl *proctest.Cluster) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := cl.Info(ctx)
	if err != nil {
		return 0, err
	}
	addr := map[placement.TargetID]string{}
	for _, tg := range info.Targets {
		addr[tg.ID] = tg.Addr
	}
	total := 0
	for _, ch := range info.Chains {
		var lists [][]wire.ChunkInfo
		for _, r := range ch.Replicas {
			if r.State != placement.Serving {
				return 0, fmt.Errorf("%v: replica %d is not serving", ch, r.Target)
			}
			conn, err := wire.Dial(ctx, addr[r.Target])
			if err != nil {
				return 0, err
			}
			var all []wire.ChunkInfo
			req := wire.ChunkListReq{Target: r.Target, ChainRef: wire.ChainRef{Chain: ch.ID, ChainVer: ch.Version}, Limit: 1000}
			for {
				var page wire.ChunkListResp
				if _, err := conn.Call(ctx, wire.OpChunkList, &req, nil, &page, nil); err != nil {
					conn.Close()
					return 0, fmt.Errorf("list chunks of replica %d of %v: %w", r.Target, ch, err)
				}
				all = append(all, page.Chunks...)
				if !page.More || len(page.Chunks) == 0 {
					break
				}
				last := page.Chunks[len(page.Chunks)-1]
				req.AfterIno, req.AfterSlot = last.Ino, last.Slot
			}
			conn.Close()
			lists = append(lists, all)
		}
		for i := 1; i < len(lists); i++ {
			if !slices.Equal(lists[0], lists[i]) {
				return 0, fmt.Errorf("%v: replicas %d and %d differ: %d vs %d chunks", ch, ch.Replicas[0].Target, ch.Replicas[i].Target, len(lists[0]), len(lists[i]))
			}
		}
		total += len(lists[0])
	}
	return total, nil
}

// offline reports whether any replica of a target on node is offline.
func offlineOn(info *wire.ClusterInfo, node string) bool {
	on := map[placement.TargetID]bool{}
	for _, tg := range info.Targets {
		on[tg.ID] = tg.Node == node
	}
	for _, ch := range info.Chains {
		for _, r := range ch.Replicas {
			if on[r.Target] && r.State == placement.Offline {
				return true
			}
		}
	}
	return false
}

// failNode runs the workload on 2 replicas, fails node 2 with fail, waits
// until the metadata service took it out of its chains and more files got
// written, recovers it with recover, and checks data and replicas.
func failNode(t *testing.T, cl *proctest.Cluster, fail, recover func()) {
	c := proctest.Client(t, cl.MetaAddrs())
	w := newWorkload(t, c, "/r2", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { w.run(ctx, 3, stop, 0); close(done) }()
	// fatal stops the workload and fails the test with the services' logs.
	fatal := func(format string, args ...any) {
		t.Helper()
		cancel()
		<-done
		ictx, icancel := context.WithTimeout(context.Background(), 10*time.Second)
		info, _ := cl.Info(ictx)
		icancel()
		for _, m := range cl.Metas {
			t.Logf("meta %s:\n%s", m.Addr, m.Proc.Logs())
		}
		t.Fatalf(format+"\ncluster: %+v", append(args, info)...)
	}

	if err := w.waitWrites(ctx, 10, done); err != nil {
		fatal("before the failure: %v", err)
	}
	fail()
	failedAt := time.Now()
	cl.WaitFor(t, 30*time.Second, "node2 taken out of its chains", func(info *wire.ClusterInfo) bool { return offlineOn(info, "node2") })
	t.Logf("node2 out of its chains %v after the failure", time.Since(failedAt).Round(time.Millisecond))
	out := status(t, cl)
	for _, want := range []string{"node2", "DOWN", "offline", "serving"} {
		if !strings.Contains(out, want) {
			t.Errorf("sluice status during the failure does not say %q:\n%s", want, out)
		}
	}
	if err := w.waitWrites(ctx, w.writes.Load()+10, done); err != nil {
		fatal("during the failure: %v", err)
	}
	close(stop)
	<-done
	if errs := w.errors(); len(errs) > 0 {
		fatal("the workload saw errors: %v", errs)
	}
	t.Logf("workload: %d files written, %d read back", w.writes.Load(), w.reads.Load())
	w.verify(t, ctx)

	recover()
	cl.WaitHealthy(t, 60*time.Second)
	n := verifyReplicas(t, cl)
	if n == 0 {
		t.Fatal("no chunks in any chain")
	}
	w.verify(t, ctx)
	t.Logf("replicas identical: %d chunks", n)
	if out := status(t, cl); strings.Contains(out, "DOWN") || strings.Contains(out, "offline") || strings.Contains(out, "syncing") {
		t.Errorf("sluice status after recovery:\n%s", out)
	}
}

// status runs `sluice status` against the cluster.
func status(t *testing.T, cl *proctest.Cluster) string {
	t.Helper()
	out, err := exec.Command(binary, "status", "--server", cl.MetaAddrs()).CombinedOutput()
	if err != nil {
		t.Fatalf("sluice status: %v: %s", err, out)
	}
	return string(out)
}

func TestKillStorageNode(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{})
	node := cl.Nodes[1]
	failNode(t, cl, node.Proc.Kill, func() { cl.Restart(node) })
}

func TestCutStorageNode(t *testing.T) {
	ns := proctest.NewNetns(t)
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{
		Host: ns.HostIP,
		Netns: func(i int) (string, string) {
			if i == 1 {
				return ns.Name, ns.NsIP
			}
			return "", ""
		},
	})
	failNode(t, cl, func() { ns.Down(t) }, func() { ns.Up(t) })
}

func TestKillMetaService(t *testing.T) {
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{})
	c := proctest.Client(t, cl.MetaAddrs())
	ctx := context.Background()
	if err := c.MkdirAll(ctx, "/m", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if i == 50 {
			cl.Metas[0].Proc.Kill()
		}
		p := fmt.Sprintf("/m/f%03d", i)
		data := []byte(p)
		if err := proctest.WriteFile(ctx, c, p, data); err != nil {
			t.Fatalf("write %s (meta 0 killed at 50): %v", p, err)
		}
		got, err := readFile(ctx, c, p)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %s: %q, %v", p, got, err)
		}
	}
	ents, err := c.ReadDirAll(ctx, "/m")
	if err != nil || len(ents) != 200 {
		t.Fatalf("readdir: %d entries, %v", len(ents), err)
	}
	// A new client finds the surviving service.
	c2 := proctest.Client(t, cl.MetaAddrs())
	if _, err := c2.Stat(ctx, "/m/f199"); err != nil {
		t.Fatal(err)
	}
}

// TestWaitWritesIsBounded: waiting for a workload's writes ends with an
// error, not a spin, when the workload stopped, failed, or ran out of time.
func TestWaitWritesIsBounded(t *testing.T) {
	t.Parallel()
	stopped := make(chan struct{})
	close(stopped)
	running := make(chan struct{})
	expired, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	failed := &workload{}
	failed.fail(fmt.Errorf("write /r2/w0-0001: boom"))
	for _, tc := range []struct {
		name string
		w    *workload
		ctx  context.Context
		done chan struct{}
		want string
	}{
		{"stopped", &workload{}, context.Background(), stopped, "stopped after 0 of 10"},
		{"failed", failed, context.Background(), running, "boom"},
		{"out of time", &workload{}, expired, running, "deadline"},
	} {
		err := tc.w.waitWrites(tc.ctx, 10, tc.done)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	w := &workload{}
	w.writes.Store(10)
	if err := w.waitWrites(context.Background(), 10, running); err != nil {
		t.Errorf("10 writes done: %v", err)
	}
}
