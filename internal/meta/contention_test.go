package meta

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// attemptDB counts Update calls and how often their functions ran: every
// extra run is a retry after a conflict.
type attemptDB struct {
	kv.DB
	calls, runs atomic.Int64
}

func (d *attemptDB) Update(ctx context.Context, fn func(tx kv.Txn) error) error {
	d.calls.Add(1)
	return d.DB.Update(ctx, func(tx kv.Txn) error {
		d.runs.Add(1)
		return fn(tx)
	})
}

// TestNoConflictsInOneDirectory checks the claim of the key layout:
// concurrent creates and unlinks of different names in one directory never
// conflict, so no transaction is retried.
func TestNoConflictsInOneDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := kv.NewMemory()
	defer mem.Close()
	db := &attemptDB{DB: mem}
	s := newTestService(t, db, nil)
	d := mustMkdir(t, s, RootIno, "d")
	for _, phase := range []string{"create", "unlink", "create+unlink"} {
		calls0, runs0 := db.calls.Load(), db.runs.Load()
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := range 200 {
					name := fmt.Sprintf("g%d-%d", g, i)
					var err error
					switch phase {
					case "create":
						_, err = s.Create(ctx, &wire.CreateReq{Parent: d.Ino, Name: name, Mode: 0o644, Exclusive: true})
					case "unlink":
						err = s.Unlink(ctx, d.Ino, name)
					default:
						if _, err = s.Create(ctx, &wire.CreateReq{Parent: d.Ino, Name: "x" + name, Mode: 0o644, Exclusive: true}); err == nil {
							err = s.Unlink(ctx, d.Ino, "x"+name)
						}
					}
					if err != nil {
						t.Errorf("%s %s: %v", phase, name, err)
						return
					}
				}
			})
		}
		wg.Wait()
		calls, runs := db.calls.Load()-calls0, db.runs.Load()-runs0
		t.Logf("%s: %d updates, %d runs", phase, calls, runs)
		if runs != calls {
			t.Errorf("%s: %d transactions retried in one directory", phase, runs-calls)
		}
	}
	if es := listAll(t, s, d.Ino, 1000); len(es) != 0 {
		t.Fatalf("%d entries left", len(es))
	}
}
