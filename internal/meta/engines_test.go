package meta

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/kv/etcdtest"
)

// The namespace tests create their services with newTestService(t, nil, …)
// or newClockService, which open the DB with openTestDB: an in-memory one,
// unless the test runs under a test that chose another engine with
// useEngine. TestEngines runs the core namespace tests that way on the
// durable engines, so the same assertions hold on every engine.

// opener opens a new, empty DB for a test and closes it when the test ends.
type opener func(t testing.TB) kv.DB

// engines maps a test's name to the opener chosen for it and its subtests.
var engines sync.Map

// useEngine makes openTestDB use open for t and its subtests.
func useEngine(t *testing.T, open opener) {
	engines.Store(t.Name(), open)
	t.Cleanup(func() { engines.Delete(t.Name()) })
}

// openTestDB opens an empty DB on the engine chosen for t (useEngine) or
// for the nearest test above it, or an in-memory one.
func openTestDB(t testing.TB) kv.DB {
	t.Helper()
	for name := t.Name(); ; {
		if open, ok := engines.Load(name); ok {
			return open.(opener)(t)
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			break
		}
		name = name[:i]
	}
	db := kv.NewMemory()
	t.Cleanup(func() { db.Close() })
	return db
}

// pebbleEngine opens each DB in its own directory.
func pebbleEngine(t *testing.T) opener {
	return func(t testing.TB) kv.DB {
		t.Helper()
		db, err := kv.OpenPebble(t.TempDir(), nil)
		if err != nil {
			t.Fatalf("OpenPebble: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
}

// etcdEngine starts one etcd server, with etcd's default --max-txn-ops, for
// t and its subtests, and opens each DB under its own prefix.
func etcdEngine(t *testing.T) opener {
	srv := etcdtest.StartServerFor(t, etcdtest.Options{MaxTxnOps: 128})
	var n atomic.Int64
	return func(t testing.TB) kv.DB {
		t.Helper()
		return openEtcdPrefix(t, srv.Endpoints(), fmt.Sprintf("fs%d/", n.Add(1)))
	}
}

func openEtcdPrefix(t testing.TB, endpoints []string, prefix string) kv.DB {
	t.Helper()
	db, err := kv.OpenEtcd(context.Background(), kv.EtcdOptions{
		Endpoints: endpoints,
		Prefix:    prefix,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("OpenEtcd: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestEngines runs the core namespace tests on the pebble and etcd engines
// (the tests themselves run on the in-memory engine).
func TestEngines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"Names", TestNames},
		{"Create", TestCreate},
		{"MkdirRmdir", TestMkdirRmdir},
		{"UnlinkAndLink", TestUnlinkAndLink},
		{"SymlinkAndResolve", TestSymlinkAndResolve},
		{"SetAttr", TestSetAttr},
		{"CommitWrite", TestCommitWrite},
		{"Layouts", TestLayouts},
		{"Xattrs", TestXattrs},
		{"ReadDir", TestReadDir},
		{"Rename", TestRename},
		{"RenameSetsCtime", TestRenameSetsCtime},
		{"GarbageCollection", TestGarbageCollection},
		{"Inline", TestInline},
		{"Audit", TestAudit},
		{"AuditConcurrent", TestAuditConcurrent},
		{"RenameRace", func(t *testing.T) {
			t.Parallel()
			runRenameRace(t, newTestService(t, nil, nil), 4, 40)
		}},
	}
	for _, e := range []struct {
		name  string
		start func(t *testing.T) opener
	}{
		{"pebble", pebbleEngine},
		{"etcd", etcdEngine},
	} {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			open := e.start(t)
			var opened atomic.Int64
			useEngine(t, func(t testing.TB) kv.DB {
				opened.Add(1)
				return open(t)
			})
			t.Cleanup(func() { // after the parallel subtests
				if opened.Load() < int64(len(tests)) {
					t.Errorf("%d DBs opened on %s for %d tests", opened.Load(), e.name, len(tests))
				}
			})
			for _, tc := range tests {
				t.Run(tc.name, tc.fn)
			}
		})
	}
}
