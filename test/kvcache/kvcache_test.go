// Package kvcache tests the KV-cache store end to end: a real `sluice
// serve` process on loopback, the client library and the CLI; eviction of
// a full store while a reader holds a lease, concurrent puts of one key
// from two clients, and a restart after kill -9 that keeps the store.
// Every process is stopped by PID when its test ends.
package kvcache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pagecache"
	"github.com/sluice-fs/sluice/internal/proctest"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.Main(m, &binary)) }

var servingRE = regexp.MustCompile(`serving on (\S+)`)

func serve(t *testing.T, dataDir string) (*proctest.Proc, string) {
	t.Helper()
	return serveAt(t, dataDir, "127.0.0.1:0")
}

// serveAt starts the server on addr (one it had before a kill, so that
// its clients find it again).
func serveAt(t *testing.T, dataDir, addr string) (*proctest.Proc, string) {
	t.Helper()
	return proctest.Start(t, binary, nil, servingRE, "serve", "--data-dir", dataDir, "--listen", addr, "--http", "")
}

func value(seed, n int) []byte {
	r := rand.New(rand.NewPCG(uint64(seed), 9))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func get(t *testing.T, s *client.KVStore, key string, size int) []byte {
	t.Helper()
	buf := make([]byte, size)
	n, err := s.Get(context.Background(), []string{key}, [][]byte{buf})
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	if n[0] < 0 {
		return nil
	}
	return buf[:n[0]]
}

// createStore creates store name through c and opens it.
func createStore(t *testing.T, c *client.Client, name string, cfg client.KVConfig) *client.KVStore {
	t.Helper()
	ctx := context.Background()
	if err := c.KVCreate(ctx, name, cfg); err != nil {
		t.Fatal(err)
	}
	s, err := c.KVOpen(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKVStore(t *testing.T) {
	dataDir := t.TempDir()
	proc, addr := serve(t, dataDir)
	ctx := context.Background()
	c := proctest.Client(t, addr)
	if err := c.KVCreate(ctx, "cache", client.KVConfig{Capacity: 1 << 30, Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	if err := c.KVCreate(ctx, "cache", client.KVConfig{Capacity: 1 << 30, Replicas: 2}); err != nil {
		t.Fatalf("creating a store again with the same configuration: %v", err)
	}
	if err := c.KVCreate(ctx, "cache", client.KVConfig{Capacity: 2 << 30}); errs.CodeOf(err) != errs.Exists {
		t.Fatalf("creating a store again with another configuration: %v", err)
	}
	s, err := c.KVOpen(ctx, "cache")
	if err != nil {
		t.Fatal(err)
	}
	// Values of the sizes, 80 MiB in three requests.
	sizes := []int{64 << 10, 1 << 20, 16 << 20, 80 << 20}
	var keys []string
	var vals [][]byte
	for i, n := range sizes {
		keys = append(keys, fmt.Sprintf("seq/%d", i))
		vals = append(vals, value(i, n))
	}
	stored, err := s.Put(ctx, keys, vals)
	if err != nil || !slicesAll(stored) {
		t.Fatalf("put: %v, %v", stored, err)
	}
	bufs := make([][]byte, len(keys))
	for i := range bufs {
		bufs[i] = make([]byte, sizes[i])
	}
	n, err := s.Get(ctx, keys, bufs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if n[i] != sizes[i] || !bytes.Equal(bufs[i], vals[i]) {
			t.Fatalf("get %s: %d bytes, want %d", keys[i], n[i], sizes[i])
		}
	}
	if _, err := s.Get(ctx, keys[3:], [][]byte{make([]byte, 10)}); errs.CodeOf(err) != errs.Range {
		t.Fatalf("get into a short buffer: %v", err)
	}
	// Exists: the longest stored prefix.
	if got, err := s.Exists(ctx, []string{"seq/0", "seq/1", "seq/2", "nope", "seq/3"}); err != nil || got != 3 {
		t.Fatalf("exists: %d, %v; want 3", got, err)
	}
	// Concurrent puts of one key from two clients: one value wins.
	c2 := proctest.Client(t, addr)
	s2, err := c2.KVOpen(ctx, "cache")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wins := make([]bool, 16)
	for i := range wins {
		st := s
		if i%2 == 1 {
			st = s2
		}
		wg.Go(func() {
			ok, err := st.Put(ctx, []string{"race"}, [][]byte{value(100+i, 2<<20)})
			if err != nil {
				t.Error(err)
				return
			}
			wins[i] = ok[0]
		})
	}
	wg.Wait()
	winner := -1
	for i, w := range wins {
		if w {
			if winner >= 0 {
				t.Fatalf("puts %d and %d of one key both stored", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no put of the raced key stored")
	}
	for _, st := range []*client.KVStore{s, s2} {
		if got := get(t, st, "race", 2<<20); !bytes.Equal(got, value(100+winner, 2<<20)) {
			t.Fatalf("raced key reads %d bytes, not the winner's value", len(got))
		}
	}
	if d, err := s.Delete(ctx, []string{"seq/1", "absent"}); err != nil || d != 1 {
		t.Fatalf("delete: %d, %v", d, err)
	}
	if got := get(t, s2, "seq/1", 1<<20); got != nil {
		t.Fatal("deleted key still readable from another client")
	}

	// Restart after kill -9: the store and its values are there.
	before, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proc.Kill()
	_, addr = serve(t, dataDir)
	c3 := proctest.Client(t, addr)
	s3, err := c3.KVOpen(ctx, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, s3, "seq/3", 80<<20); !bytes.Equal(got, vals[3]) {
		t.Fatalf("80 MiB value after a restart: %d bytes", len(got))
	}
	after, err := s3.Stats(ctx)
	if err != nil || after.Keys != before.Keys || after.Used != before.Used {
		t.Fatalf("stats after restart %+v (%v), before %+v", after, err, before)
	}

	// The CLI.
	f := filepath.Join(t.TempDir(), "v")
	os.WriteFile(f, value(7, 1500000), 0o644)
	cli(t, addr, "kv", "put", "cache", "cli/key", f)
	if out := cli(t, addr, "kv", "get", "cache", "cli/key"); out != string(value(7, 1500000)) {
		t.Fatalf("kv get through the CLI: %d bytes", len(out))
	}
	if out := cli(t, addr, "kv", "ls", "cache"); !strings.Contains(out, "1500000") || !strings.Contains(out, "cli/key") || strings.Contains(out, "seq/1") {
		t.Fatalf("kv ls:\n%s", out)
	}
	if out := cli(t, addr, "kv", "stats", "cache"); !strings.Contains(out, "2 replicas") {
		t.Fatalf("kv stats:\n%s", out)
	}
	cli(t, addr, "kv", "rm", "cache", "cli/key")
	if got := get(t, s3, "cli/key", 300000); got != nil {
		t.Fatal("kv rm left the key")
	}
}

// TestKVPutAcrossRestart kills the server (kill -9) while puts of values
// of several parts are in flight to a replicated store and starts it again
// on the same data and address: every put goes on across the restart (its
// connection broke, or the target lost the upload's first parts, and it
// sends the value again from its start) and succeeds, and every value
// reads back whole from a new client. Kills at several points of the puts.
func TestKVPutAcrossRestart(t *testing.T) {
	dataDir := t.TempDir()
	proc, addr := serve(t, dataDir)
	ctx := context.Background()
	c := proctest.Client(t, addr)
	s := createStore(t, c, "r", client.KVConfig{Capacity: 4 << 30, Replicas: 2})
	var keys []string
	var vals [][]byte
	for round, delay := range []time.Duration{0, 30 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond} {
		ks := []string{fmt.Sprintf("big/%d/a", round), fmt.Sprintf("big/%d/b", round)}
		vs := [][]byte{value(300+2*round, 70<<20+5), value(301+2*round, 33<<20)}
		putDone := make(chan error, 1)
		go func() {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			_, err := s.Put(pctx, ks, vs)
			putDone <- err
		}()
		time.Sleep(delay)
		proc.Kill()
		proc, _ = serveAt(t, dataDir, addr)
		if err := <-putDone; err != nil {
			t.Fatalf("kill %v after the puts began: the puts failed across the restart: %v", delay, err)
		}
		keys, vals = append(keys, ks...), append(vals, vs...)
	}
	s2, err := proctest.Client(t, addr).KVOpen(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if got := get(t, s2, k, len(vals[i])); !bytes.Equal(got, vals[i]) {
			t.Fatalf("%s: %d bytes, not its %d-byte value", k, len(got), len(vals[i]))
		}
	}
	st, err := s2.Stats(ctx)
	if err != nil || st.Keys != int64(2*len(keys)) {
		t.Fatalf("stats %+v, %v: want %d keys (two replicas each)", st, err, len(keys))
	}
}

// TestKVEvictionWithLease fills a store while a reader holds a read lease
// on its oldest value (it read the first half): least recently used values
// are evicted, the leased one stays and reads back whole. (That a put is
// refused when only leased values are left is tested on the engine,
// internal/kvcache.)
func TestKVEvictionWithLease(t *testing.T) {
	_, addr := serve(t, t.TempDir())
	ctx := context.Background()
	c := proctest.Client(t, addr)
	// 4 targets x 8 MiB; one replica.
	s := createStore(t, c, "small", client.KVConfig{Capacity: 32 << 20})
	const size = 1 << 20
	if _, err := s.Put(ctx, []string{"leased"}, [][]byte{value(1, size)}); err != nil {
		t.Fatal(err)
	}
	half := make([]byte, size/2)
	if n, total, err := s.GetAt(ctx, "leased", half, 0); err != nil || n != size/2 || total != size {
		t.Fatalf("first half: %d of %d, %v", n, total, err)
	}
	reader := proctest.Client(t, addr) // others fill the store meanwhile
	rs, _ := reader.KVOpen(ctx, "small")
	for i := range 120 {
		if _, err := rs.Put(ctx, []string{fmt.Sprintf("fill/%d", i)}, [][]byte{value(i+2, size)}); err != nil {
			t.Fatalf("fill %d: %v", i, err)
		}
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Evictions == 0 || st.Used > 32<<20 {
		t.Fatalf("after filling: %+v, %v", st, err)
	}
	if got, err := s.Exists(ctx, []string{"fill/0"}); err != nil || got != 0 {
		t.Fatalf("the least recently used value was not evicted: %d, %v", got, err)
	}
	rest := make([]byte, size/2)
	if n, _, err := s.GetAt(ctx, "leased", rest, size/2); err != nil || n != size/2 {
		t.Fatalf("second half of the leased value: %d, %v", n, err)
	}
	if !bytes.Equal(append(half, rest...), value(1, size)) {
		t.Fatal("leased value changed")
	}
}

func slicesAll(b []bool) bool {
	for _, v := range b {
		if !v {
			return false
		}
	}
	return true
}

func cli(t *testing.T, addr string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "SLUICE_SERVER="+addr)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("sluice %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// TestKVUnreadGets checks gets that a target sends from its page cache
// without reading them (ADR 0030), over loopback TCP: a value just put is
// read right and counted as sent unread; a ranged read that does not
// start on a block is read and verified by the target; and a value
// damaged on the target's disk (while its pages are cached) is sent
// unread, refused by the client's check of each block, asked for again
// verified, and reported as corruption: never returned.
func TestKVUnreadGets(t *testing.T) {
	if !pagecache.Supported() {
		if os.Getenv("CI") == "true" {
			t.Fatal("the kernel has no cachestat(2) (CI=true: the tests need Linux 6.5 or later)")
		}
		t.Skip("the kernel has no cachestat(2) (Linux 6.5 or later)")
	}
	dataDir := t.TempDir()
	_, addr := serve(t, dataDir)
	ctx := context.Background()
	c := proctest.Client(t, addr)
	s := createStore(t, c, "u", client.KVConfig{Capacity: 1 << 30})
	const size = 3<<20 + 4321
	v := value(11, size)
	if _, err := s.Put(ctx, []string{"k"}, [][]byte{v}); err != nil {
		t.Fatal(err)
	}
	unread := func() int64 {
		t.Helper()
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.SentUnread
	}
	if got := get(t, s, "k", size); !bytes.Equal(got, v) {
		t.Fatalf("get: %d bytes, not the value", len(got))
	}
	if n := unread(); n != 1 {
		t.Fatalf("a get of a cached value: %d sent unread, want 1", n)
	}
	p := make([]byte, 1<<20)
	if n, _, err := s.GetAt(ctx, "k", p, 12345); err != nil || n != len(p) || !bytes.Equal(p, v[12345:12345+len(p)]) {
		t.Fatalf("ranged get: %d bytes, %v, or other bytes", n, err)
	}
	if n := unread(); n != 1 {
		t.Fatalf("a ranged get off a block boundary was sent unread (%d)", n)
	}

	// Damage block 1 of the value file, through the page cache.
	sum := sha256.Sum256([]byte("k"))
	name := hex.EncodeToString(sum[:])
	var path string
	filepath.WalkDir(filepath.Join(dataDir, "kvcache"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == name {
			path = p
		}
		return nil
	})
	if path == "" {
		t.Fatal("value file not found")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-size+1<<20+99] ^= 0x08
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, size)
	_, err = s.Get(ctx, []string{"k"}, [][]byte{buf})
	if errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("get of a damaged value: %v, want corruption", err)
	}
	if n := unread(); n != 2 {
		t.Fatalf("the damaged value was not sent unread first (%d sent unread, want 2)", n)
	}
}
