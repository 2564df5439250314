package kv_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/kv/etcdtest"
	"github.com/sluice-fs/sluice/internal/kv/kvtest"
)

var quiet = slog.New(slog.DiscardHandler)

func openEtcd(t testing.TB, opts kv.EtcdOptions) kv.DB {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	db, err := kv.OpenEtcd(context.Background(), opts)
	if err != nil {
		t.Fatalf("OpenEtcd: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newClient(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestEtcdConformance runs the suite with one prefix per subtest on one
// shared server.
func TestEtcdConformance(t *testing.T) {
	eps := etcdtest.Start(t)
	kvtest.Run(t, func(t *testing.T) kv.DB {
		return openEtcd(t, kv.EtcdOptions{Endpoints: eps, Prefix: "conformance/" + t.Name() + "/"})
	})
}

// TestEtcdTwoClients: two DBs with their own etcd clients, as two metadata
// services would have, increment one counter concurrently and lose no
// update.
func TestEtcdTwoClients(t *testing.T) {
	t.Parallel()
	eps := etcdtest.Start(t)
	dbs := []kv.DB{
		openEtcd(t, kv.EtcdOptions{Endpoints: eps, Prefix: "two/"}),
		openEtcd(t, kv.EtcdOptions{Endpoints: eps, Prefix: "two/"}),
	}
	const workers, perWorker = 4, 25
	var attempts atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		db := dbs[w%2]
		wg.Go(func() {
			for range perWorker {
				err := db.Update(t.Context(), func(tx kv.Txn) error {
					attempts.Add(1)
					n := 0
					if v, err := tx.Get([]byte("counter")); err == nil {
						n, _ = strconv.Atoi(string(v))
					} else if !errors.Is(err, kv.ErrNotFound) {
						return err
					}
					tx.Set([]byte("counter"), []byte(strconv.Itoa(n+1)))
					// A blind write by both sides does not conflict.
					tx.Set([]byte("last-writer"), []byte(strconv.Itoa(w)))
					return nil
				})
				if err != nil {
					t.Errorf("increment: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i, db := range dbs {
		err := db.View(t.Context(), func(tx kv.Txn) error {
			v, err := tx.Get([]byte("counter"))
			if err != nil {
				return err
			}
			if string(v) != strconv.Itoa(workers*perWorker) {
				return fmt.Errorf("db %d sees counter = %s, want %d", i, v, workers*perWorker)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if attempts.Load() == workers*perWorker {
		t.Logf("no conflicts happened; the test did not exercise them")
	}
	t.Logf("%d increments took %d attempts", workers*perWorker, attempts.Load())
}

// TestEtcdTwoClientsPhantom: a scan in one DB and an insert into the
// scanned range through another conflict.
func TestEtcdTwoClientsPhantom(t *testing.T) {
	t.Parallel()
	eps := etcdtest.Start(t)
	a := openEtcd(t, kv.EtcdOptions{Endpoints: eps, Prefix: "ph/"})
	b := openEtcd(t, kv.EtcdOptions{Endpoints: eps, Prefix: "ph/"})
	put := func(db kv.DB, k, v string) {
		t.Helper()
		if err := db.Update(t.Context(), func(tx kv.Txn) error { tx.Set([]byte(k), []byte(v)); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	put(a, "dir/x", "1")
	cases := []struct {
		name  string
		other func()
		want  int
	}{
		{"insert", func() { put(b, "dir/y", "1") }, 2},
		{"update", func() { put(b, "dir/x", "2") }, 2},
		{"delete", func() {
			if err := b.Update(t.Context(), func(tx kv.Txn) error { tx.Delete([]byte("dir/x")); return nil }); err != nil {
				t.Fatal(err)
			}
		}, 2},
		{"outside", func() { put(b, "dis", "1") }, 1},
	}
	for _, tc := range cases {
		calls := 0
		err := a.Update(t.Context(), func(tx kv.Txn) error {
			calls++
			n := 0
			if err := tx.Scan([]byte("dir/"), kv.PrefixEnd([]byte("dir/")), 0, func(_, _ []byte) bool { n++; return true }); err != nil {
				return err
			}
			if calls == 1 {
				tc.other()
			}
			tx.Set([]byte("count"), []byte(strconv.Itoa(n)))
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if calls != tc.want {
			t.Errorf("%s by another client: fn ran %d times, want %d", tc.name, calls, tc.want)
		}
		put(a, "dir/x", "1")
	}
}

// TestEtcdLimits: against an etcd with its default --max-txn-ops (128),
// an Update needing more compares or writes fails with errs.ErrInvalid
// naming the limit and writes nothing; one at the limit commits. A commit
// too large for etcd fails the same way.
func TestEtcdLimits(t *testing.T) {
	t.Parallel()
	srv := etcdtest.StartServerFor(t, etcdtest.Options{MaxTxnOps: 128})
	db := openEtcd(t, kv.EtcdOptions{Endpoints: srv.Endpoints(), Prefix: "ops/"})
	setN := func(n int, prefix string) func(tx kv.Txn) error {
		return func(tx kv.Txn) error {
			for i := range n {
				tx.Set(fmt.Appendf(nil, "%s%03d", prefix, i), []byte("v"))
			}
			return nil
		}
	}
	if err := db.Update(t.Context(), setN(128, "ok/")); err != nil {
		t.Fatalf("128 writes: %v", err)
	}
	err := db.Update(t.Context(), setN(129, "big/"))
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "--max-txn-ops") {
		t.Fatalf("129 writes: %v, want errs.ErrInvalid naming --max-txn-ops", err)
	}
	// 129 compares: 129 keys read, one written.
	calls := 0
	err = db.Update(t.Context(), func(tx kv.Txn) error {
		calls++
		for i := range 129 {
			if _, err := tx.Get(fmt.Appendf(nil, "read/%03d", i)); !errors.Is(err, kv.ErrNotFound) {
				return err
			}
		}
		tx.Set([]byte("big/x"), nil)
		return nil
	})
	if !errors.Is(err, errs.ErrInvalid) || calls != 1 {
		t.Fatalf("129 reads: %v after %d calls, want errs.ErrInvalid after 1", err, calls)
	}
	// A DB told a higher limit than the server's: etcd itself rejects the
	// commit, which is not an unknown outcome.
	loose := openEtcd(t, kv.EtcdOptions{Endpoints: srv.Endpoints(), Prefix: "ops/", MaxTxnOps: 1000})
	err = loose.Update(t.Context(), setN(200, "big/"))
	if !errors.Is(err, errs.ErrInvalid) || errors.Is(err, kv.ErrCommitUnknown) {
		t.Fatalf("200 writes against a server allowing 128: %v, want errs.ErrInvalid", err)
	}
	// Requests over etcd's --max-request-bytes (1.5 MiB), or over the
	// client's send limit (2 MiB), are rejected before they are proposed.
	for _, sizes := range [][]int{{kv.MaxValueSize, 600 << 10}, {kv.MaxValueSize, kv.MaxValueSize}} {
		err = db.Update(t.Context(), func(tx kv.Txn) error {
			for i, n := range sizes {
				tx.Set(fmt.Appendf(nil, "big/%d", i), make([]byte, n))
			}
			return nil
		})
		if !errors.Is(err, errs.ErrInvalid) || errors.Is(err, kv.ErrCommitUnknown) {
			t.Fatalf("values of %v bytes in one commit: %v, want errs.ErrInvalid", sizes, err)
		}
	}
	var n int
	err = db.View(t.Context(), func(tx kv.Txn) error {
		return tx.Scan(nil, nil, 0, func(k, _ []byte) bool {
			if !strings.HasPrefix(string(k), "ok/") {
				t.Errorf("a rejected transaction wrote %q", k)
			}
			n++
			return true
		})
	})
	if err != nil || n != 128 {
		t.Fatalf("db holds %d keys (%v), want 128", n, err)
	}
}

// TestEtcdPaging: scans larger than a page see every key once, in order,
// at the transaction's revision, and a phantom on a later page conflicts.
func TestEtcdPaging(t *testing.T) {
	t.Parallel()
	eps := etcdtest.Start(t)
	// A scan in an Update needs a compare per key seen; the server allows
	// 10240.
	db := openEtcd(t, kv.EtcdOptions{Endpoints: eps, Prefix: "pg/", MaxTxnOps: 10000})
	const n = 1200 // three pages
	for i := 0; i < n; i += 400 {
		err := db.Update(t.Context(), func(tx kv.Txn) error {
			for j := i; j < i+400; j++ {
				tx.Set(fmt.Appendf(nil, "k%05d", 2*j), []byte("v"))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	other := openEtcd(t, kv.EtcdOptions{Endpoints: eps, Prefix: "pg/"})
	err := db.View(t.Context(), func(tx kv.Txn) error {
		i := 0
		err := tx.Scan(nil, nil, 0, func(k, _ []byte) bool {
			if want := fmt.Sprintf("k%05d", 2*i); string(k) != want {
				t.Errorf("key %d is %q, want %q", i, k, want)
				return false
			}
			if i == 10 { // insert on a later page, after the first fetch
				if err := other.Update(t.Context(), func(tx kv.Txn) error {
					tx.Set([]byte("k02001"), nil)
					return nil
				}); err != nil {
					t.Error(err)
				}
			}
			i++
			return true
		})
		if err == nil && i != n {
			err = fmt.Errorf("scan visited %d keys, want %d", i, n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	err = db.Update(t.Context(), func(tx kv.Txn) error {
		calls++
		seen := 0
		if err := tx.Scan([]byte("k"), nil, 0, func(_, _ []byte) bool { seen++; return true }); err != nil {
			return err
		}
		if calls == 1 {
			if err := other.Update(t.Context(), func(tx kv.Txn) error { tx.Delete([]byte("k02300")); return nil }); err != nil {
				return err
			}
		}
		tx.Set([]byte("seen"), []byte(strconv.Itoa(seen)))
		return nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("scan with a concurrent delete on its last page: %v after %d calls, want a retry", err, calls)
	}
}

// TestEtcdPrefix: keys live under the prefix, and DBs on different
// prefixes of one cluster do not see each other.
func TestEtcdPrefix(t *testing.T) {
	t.Parallel()
	eps := etcdtest.Start(t)
	c := newClient(t, eps)
	a := openEtcd(t, kv.EtcdOptions{Client: c, Prefix: "fs-a/"})
	b := openEtcd(t, kv.EtcdOptions{Client: c, Prefix: "fs-a0"}) // sorts right after "fs-a/"
	def := openEtcd(t, kv.EtcdOptions{Client: c})
	for _, db := range []kv.DB{a, b, def} {
		if err := db.Update(t.Context(), func(tx kv.Txn) error {
			tx.Set([]byte(""), []byte("empty"))
			tx.Set([]byte("\xff"), []byte("ff"))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := c.Get(t.Context(), "", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	if got, want := strings.Join(keys, " "), "fs-a/ fs-a/\xff fs-a0 fs-a0\xff sluice/ sluice/\xff"; got != want {
		t.Fatalf("etcd holds %q, want %q", got, want)
	}
	err = a.View(t.Context(), func(tx kv.Txn) error {
		n := 0
		err := tx.Scan(nil, nil, 0, func(_, _ []byte) bool { n++; return true })
		if err == nil && n != 2 {
			err = fmt.Errorf("scan of prefix fs-a/ saw %d keys, want 2", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Close does not close a client it was given.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(t.Context(), "x"); err != nil {
		t.Fatalf("client unusable after Close of a DB using it: %v", err)
	}
	if err := a.View(t.Context(), func(kv.Txn) error { return nil }); !errors.Is(err, kv.ErrClosed) {
		t.Fatalf("View after Close: %v", err)
	}
}

// TestEtcdCompacted: a transaction whose revision is compacted while it
// runs is run again on a new one.
func TestEtcdCompacted(t *testing.T) {
	t.Parallel()
	eps := etcdtest.Start(t)
	c := newClient(t, eps)
	db := openEtcd(t, kv.EtcdOptions{Client: c, Prefix: "cp/"})
	calls := 0
	err := db.Update(t.Context(), func(tx kv.Txn) error {
		calls++
		if _, err := tx.Get([]byte("a")); !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		if calls == 1 {
			r, err := c.Put(t.Context(), "unrelated", "x")
			if err != nil {
				return err
			}
			if _, err := c.Compact(t.Context(), r.Header.Revision); err != nil {
				return err
			}
		}
		if _, err := tx.Get([]byte("b")); err != nil && !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		tx.Set([]byte("a"), []byte("1"))
		return nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("Update across a compaction: %v after %d calls, want success after 2", err, calls)
	}
}

// TestEtcdUnavailable: with etcd down, reads fail with errs.Unavailable
// and a commit fails with ErrCommitUnknown without running fn again; with
// etcd stopped while commits are in flight, every acknowledged commit is
// there after a restart, and every failure is a clean error.
func TestEtcdUnavailable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := etcdtest.StartServerFor(t, etcdtest.Options{Dir: dir})
	db := openEtcd(t, kv.EtcdOptions{Endpoints: srv.Endpoints(), Prefix: "un/", RequestTimeout: 500 * time.Millisecond})

	// Writers commit until etcd stops under them.
	var acked sync.Map
	var unknown, ackedN, running atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		running.Add(1)
		wg.Go(func() {
			defer running.Add(-1)
			for i := 0; ; i++ {
				key := fmt.Sprintf("w%d/%d", w, i)
				calls := 0
				err := db.Update(context.Background(), func(tx kv.Txn) error {
					calls++
					if _, err := tx.Get([]byte("shared")); err != nil && !errors.Is(err, kv.ErrNotFound) {
						return err
					}
					tx.Set([]byte(key), []byte("1"))
					return nil
				})
				switch {
				case err == nil:
					acked.Store(key, true)
					ackedN.Add(1)
					continue
				case errors.Is(err, kv.ErrCommitUnknown):
					unknown.Add(1)
					if calls != 1 || !errors.Is(err, errs.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("unknown commit: %v after %d calls", err, calls)
					}
				case errs.CodeOf(err) == errs.Unavailable:
					// A read failed: nothing was written.
				default:
					t.Errorf("Update with etcd stopping: %v", err)
				}
				return
			}
		})
	}
	for ackedN.Load() < 20 && running.Load() > 0 { // let commits flow
		time.Sleep(10 * time.Millisecond)
	}
	srv.Stop()
	wg.Wait()
	t.Logf("%d commits were unknown when etcd stopped", unknown.Load())

	// With etcd down: a read fails, and a blind commit is unknown.
	err := db.View(t.Context(), func(tx kv.Txn) error { _, err := tx.Get([]byte("x")); return err })
	if errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("View with etcd down: %v, want errs.Unavailable", err)
	}
	calls := 0
	err = db.Update(t.Context(), func(tx kv.Txn) error { calls++; tx.Set([]byte("blind"), nil); return nil })
	if !errors.Is(err, kv.ErrCommitUnknown) || !errors.Is(err, errs.ErrUnavailable) || calls != 1 {
		t.Fatalf("blind Update with etcd down: %v after %d calls, want ErrCommitUnknown after 1", err, calls)
	}

	srv = etcdtest.StartServerFor(t, etcdtest.Options{Dir: dir, ClientURL: srv.Endpoints()[0], PeerURL: srv.PeerURL()})
	fresh := openEtcd(t, kv.EtcdOptions{Endpoints: srv.Endpoints(), Prefix: "un/"})
	n := 0
	acked.Range(func(k, _ any) bool {
		n++
		err := fresh.View(t.Context(), func(tx kv.Txn) error {
			_, err := tx.Get([]byte(k.(string)))
			return err
		})
		if err != nil {
			t.Errorf("acknowledged write %s after restart: %v", k, err)
		}
		return true
	})
	if n == 0 {
		t.Fatal("no write was acknowledged before etcd stopped")
	}
	t.Logf("%d acknowledged writes checked after restart", n)
}

func TestEtcdOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		o    kv.EtcdOptions
		ok   bool
	}{
		{"endpoints", kv.EtcdOptions{Endpoints: []string{"http://127.0.0.1:1"}}, true},
		{"nothing", kv.EtcdOptions{}, false},
		{"negative timeout", kv.EtcdOptions{Endpoints: []string{"x"}, RequestTimeout: -1}, false},
		{"negative ops", kv.EtcdOptions{Endpoints: []string{"x"}, MaxTxnOps: -1}, false},
		{"endless prefix", kv.EtcdOptions{Endpoints: []string{"x"}, Prefix: "\xff"}, false},
	} {
		if err := tc.o.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v", tc.name, err)
		}
	}
	_, err := kv.OpenEtcd(t.Context(), kv.EtcdOptions{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: 100 * time.Millisecond, RequestTimeout: 100 * time.Millisecond, Logger: quiet})
	if errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("OpenEtcd with nothing listening: %v, want errs.Unavailable", err)
	}
}
