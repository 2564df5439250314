package meta

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv/etcdtest"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestEtcdTwoServices runs two metadata services, each with its own etcd
// client, on one file system (one etcd prefix), as a multi-node cluster
// does: they format it concurrently, then create, mkdir, rename and unlink
// in the same directories through both. Afterwards the namespace is
// consistent as seen by either service, no inode number was handed out
// twice, and the stored inode counter (both services' deltas) is exact.
func TestEtcdTwoServices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := etcdtest.StartServerFor(t, etcdtest.Options{MaxTxnOps: 128})
	const prefix = "shared/"
	var svcs [2]*Service
	var wg sync.WaitGroup
	for i := range svcs {
		db := openEtcdPrefix(t, srv.Endpoints(), prefix)
		wg.Go(func() { svcs[i] = newTestService(t, db, nil) }) // both may format
	}
	wg.Wait()
	if svcs[0].FSID() != svcs[1].FSID() {
		t.Fatalf("services formatted two file systems: FSIDs %s and %s", svcs[0].FSID(), svcs[1].FSID())
	}
	var dirs []uint64
	for i := range 3 {
		dirs = append(dirs, mustMkdir(t, svcs[i%2], RootIno, fmt.Sprintf("d%d", i)).Ino)
	}

	const workers, ops = 4, 40
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	var mu sync.Mutex
	created := map[uint64]string{} // ino -> how
	record := func(ino uint64, how string) {
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := created[ino]; dup {
			t.Errorf("inode %d handed out twice: %s and %s", ino, prev, how)
		}
		created[ino] = how
	}
	for w := range workers {
		s := svcs[w%2]
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range ops {
				dir := dirs[r.IntN(len(dirs))]
				var err error
				switch op := r.IntN(10); {
				case op < 5: // create, in a shared directory
					var a wire.Attr
					name := fmt.Sprintf("w%d-%d", w, i)
					if a, err = s.Create(ctx, &wire.CreateReq{Parent: dir, Name: name, Mode: 0o644, Exclusive: true}); err == nil {
						record(a.Ino, fmt.Sprintf("service %d create %s", w%2, name))
					}
				case op < 6: // mkdir: changes the parent's nlink
					var a wire.Attr
					name := fmt.Sprintf("dir-w%d-%d", w, i)
					if a, err = s.Mkdir(ctx, &wire.CreateReq{Parent: dir, Name: name, Mode: 0o755}); err == nil {
						record(a.Ino, fmt.Sprintf("service %d mkdir %s", w%2, name))
					}
				case op < 9: // rename onto a few shared names, replacing
					from := fmt.Sprintf("w%d-%d", w, r.IntN(i+1))
					err = s.Rename(ctx, &wire.RenameReq{
						OldParent: findEntry(s, dirs, from), OldName: from,
						NewParent: dir, NewName: fmt.Sprintf("shared%d", r.IntN(4)),
					})
				default:
					err = s.Unlink(ctx, dir, fmt.Sprintf("shared%d", r.IntN(4)))
				}
				if code := errs.CodeOf(err); code != errs.OK && code != errs.NotFound {
					t.Errorf("worker %d op %d: %v (seed %d)", w, i, err, seed)
					return
				}
			}
		})
	}
	wg.Wait()

	seen := checkTree(t, svcs[0])
	if other := checkTree(t, svcs[1]); len(other) != len(seen) {
		t.Fatalf("service 0 reaches %d inodes, service 1 %d", len(seen), len(other))
	}
	for ino := range created {
		if _, ok := seen[ino]; ok {
			continue
		}
		if _, err := svcs[1].GetAttr(ctx, ino); errs.CodeOf(err) != errs.NotFound {
			t.Fatalf("inode %d (%s) is not reachable but exists: %v (seed %d)", ino, created[ino], err, seed)
		}
	}
	for ino := range seen {
		if _, ok := created[ino]; !ok && ino != RootIno && !isIn(dirs, ino) {
			t.Fatalf("reached inode %d that was never created (seed %d)", ino, seed)
		}
	}
	// Both services add their inode deltas to the stored counter, and a
	// background pass (Run) makes each see the other's.
	for _, i := range []int{0, 1, 0} {
		if err := svcs[i].flushCounters(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range svcs {
		if st, err := s.Statfs(ctx); err != nil || st.Inodes != uint64(len(seen)) {
			t.Errorf("service %d: statfs counts %d inodes (%v), %d reachable", i, st.Inodes, err, len(seen))
		}
	}
	for _, s := range svcs {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s3 := newTestService(t, openEtcdPrefix(t, srv.Endpoints(), prefix), nil)
	if st, err := s3.Statfs(ctx); err != nil || st.Inodes != uint64(len(seen)) {
		t.Fatalf("stored inode count %d (%v), %d inodes reachable", st.Inodes, err, len(seen))
	}
}

// findEntry returns the directory among dirs holding name, or dirs[0].
func findEntry(s *Service, dirs []uint64, name string) uint64 {
	for _, d := range dirs {
		if _, err := s.Lookup(context.Background(), d, name); err == nil {
			return d
		}
	}
	return dirs[0]
}

func isIn(s []uint64, v uint64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestEtcdNoConflictsInOneDirectory: on etcd too, concurrent creates and
// unlinks of different names in one directory, here through two services,
// never conflict (etcd checks the compares, so this holds the engine to
// adding none for blind writes).
func TestEtcdNoConflictsInOneDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := etcdtest.StartServerFor(t, etcdtest.Options{MaxTxnOps: 128})
	var dbs [2]*attemptDB
	var svcs [2]*Service
	for i := range svcs {
		dbs[i] = &attemptDB{DB: openEtcdPrefix(t, srv.Endpoints(), "fs/")}
		svcs[i] = newTestService(t, dbs[i], nil)
	}
	d := mustMkdir(t, svcs[0], RootIno, "d")
	// Reserve inode blocks first: the services' block reservations
	// conflict with each other, and that is not what this test is about.
	mustCreate(t, svcs[1], d.Ino, "first")
	calls0 := dbs[0].calls.Load() + dbs[1].calls.Load()
	runs0 := dbs[0].runs.Load() + dbs[1].runs.Load()
	var wg sync.WaitGroup
	for g := range 8 {
		s := svcs[g%2]
		wg.Go(func() {
			for i := range 25 {
				name := fmt.Sprintf("g%d-%d", g, i)
				if _, err := s.Create(ctx, &wire.CreateReq{Parent: d.Ino, Name: name, Mode: 0o644, Exclusive: true}); err != nil {
					t.Errorf("create %s: %v", name, err)
					return
				}
				if i%2 == 0 {
					if err := s.Unlink(ctx, d.Ino, name); err != nil {
						t.Errorf("unlink %s: %v", name, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	calls := dbs[0].calls.Load() + dbs[1].calls.Load() - calls0
	runs := dbs[0].runs.Load() + dbs[1].runs.Load() - runs0
	if runs != calls {
		t.Errorf("%d of %d transactions retried in one directory", runs-calls, calls)
	}
	if es := listAll(t, svcs[1], d.Ino, 1000); len(es) != 1+8*12 {
		t.Fatalf("%d entries, want %d", len(es), 1+8*12)
	}
}

// TestEtcdGarbageBatch: the garbage collector's dequeue must fit one etcd
// transaction at etcd's default --max-txn-ops (128).
func TestEtcdGarbageBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := etcdtest.StartServerFor(t, etcdtest.Options{MaxTxnOps: 128})
	db := openEtcdPrefix(t, srv.Endpoints(), "gc/")
	s := newTestService(t, db, nil)
	const files = 150 // more than one transaction may delete
	err := parallel(files, 16, func(i int) error {
		name := fmt.Sprintf("f%d", i)
		a, err := s.Create(ctx, &wire.CreateReq{Parent: RootIno, Name: name, Mode: 0o644})
		if err != nil {
			return err
		}
		if _, err := s.SetChunks(ctx, a.Ino); err != nil {
			return err
		}
		return s.Unlink(ctx, RootIno, name)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.PendingGarbage(ctx); err != nil || n != files {
		t.Fatalf("%d files queued (%v), want %d", n, err, files)
	}
	if err := s.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PendingGarbage(ctx); err != nil || n != 0 {
		t.Fatalf("%d files queued after collection (%v)", n, err)
	}
}
