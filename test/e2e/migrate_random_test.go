package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestMigrateRandom runs a random sequence of writes, truncates (shrinking
// and growing), syncs and reads on one open file, every read checked byte
// for byte against a model, while another goroutine migrates the file
// again and again to random layouts (stripe count 1-4, stripe size 64 KiB
// to 1 MiB; a third of them progressive, of three extents; a third of all
// the same shape on other targets, as a rebalance moves a file, which
// checks the copy by the targets' block checksums). The seed is logged; SLUICE_MIGRATE_SEED replays one and
// SLUICE_MIGRATE_OPS sets the number of operations (default 1000). A
// replay repeats the operations and the layouts, not how the migrations
// interleave with them.
func TestMigrateRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SLUICE_MIGRATE_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	ops := 1000
	if v := os.Getenv("SLUICE_MIGRATE_OPS"); v != "" {
		var err error
		if ops, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (SLUICE_MIGRATE_SEED=%d replays it), %d ops", seed, seed, ops)
	// The targets forget a moved chunk's fence 5 s after removing it, and
	// the client renews its layout every 100 ms (ADR 0023, addendum): the
	// writes and reads of a File whose layout a migration replaced must go
	// to the new chunks once the old ones' fences are gone too.
	s := startServer(t, "", "--chunk-fence-grace", "5s", "--http", "127.0.0.1:0")
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Server: s.addr, LayoutLease: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	const maxSize = 6 << 20
	model := randBytes(seed, 2<<20)
	writeFile(t, c, "/r", model)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var migrations, unchanged, compared int
	var merr error
	wg.Go(func() {
		mr := rand.New(rand.NewPCG(seed, 0x6d6967))
		for {
			select {
			case <-stop:
				return
			default:
			}
			spec := client.MigrateSpec{StripeCount: 1 + mr.IntN(4), StripeSize: int64(1+mr.IntN(16)) << 16}
			if mr.IntN(3) == 0 {
				// A progressive layout (ADR 0021): its extents' ends inside
				// the file, which grows to 6 MiB.
				e1 := int64(1+mr.IntN(16)) << 16
				e2 := e1 + int64(1+mr.IntN(48))<<16
				spec = client.MigrateSpec{Components: []client.LayoutComponent{
					{End: e1, StripeSize: int64(1+mr.IntN(4)) << 16, StripeCount: 1 + mr.IntN(2)},
					{End: e2, StripeSize: int64(1+mr.IntN(8)) << 16, StripeCount: 1 + mr.IntN(3)},
					{StripeSize: int64(1+mr.IntN(16)) << 16, StripeCount: 1 + mr.IntN(4)},
				}}
			}
			if mr.IntN(3) == 0 {
				// The same shape on other targets, as the rebalancer and
				// drain move files: the copy is checked by the targets'
				// block checksums instead of a read-back.
				l, err := c.GetLayout(ctx, "/r")
				if err != nil {
					merr = err
					return
				}
				perm := mr.Perm(4) // targets 1-4 mapped to others
				spec = client.MigrateSpec{}
				if len(l.Components) == 0 {
					spec.StripeSize = l.StripeSize
				}
				for _, ch := range l.Chains {
					spec.Chains = append(spec.Chains, uint32(perm[ch-1]+1))
				}
			}
			res, err := c.Migrate(ctx, "/r", spec, client.MigrateOptions{})
			if err != nil {
				merr = err
				return
			}
			migrations++
			unchanged += res.Unchanged
			compared += res.Compared
		}
	})
	f, err := c.OpenFile(ctx, "/r", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fail := func(i int, what string, err error) {
		t.Helper()
		close(stop)
		wg.Wait()
		t.Fatalf("op %d (%s): %v (seed %d)", i, what, err, seed)
	}
	for i := range ops {
		switch k := rng.IntN(20); {
		case k < 9: // write, sometimes past the end
			off := rng.IntN(len(model) + 256<<10)
			n := 1 + rng.IntN(300<<10)
			if off+n > maxSize {
				off, n = 0, min(n, maxSize)
			}
			b := make([]byte, n)
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			if _, err := f.WriteAt(b, int64(off)); err != nil {
				fail(i, "write", err)
			}
			if off+n > len(model) {
				model = append(model, make([]byte, off+n-len(model))...)
			}
			copy(model[off:], b)
		case k < 11: // truncate, shrinking or growing
			size := rng.IntN(maxSize)
			if err := f.Truncate(ctx, int64(size)); err != nil {
				fail(i, "truncate", err)
			}
			if size <= len(model) {
				model = model[:size]
			} else {
				model = append(model, make([]byte, size-len(model))...)
			}
		case k < 12:
			if err := f.Sync(); err != nil {
				fail(i, "sync", err)
			}
		default: // read a range, maybe past the end
			off := rng.IntN(len(model) + 1)
			n := 1 + rng.IntN(512<<10)
			buf := make([]byte, n)
			got, err := f.ReadAt(buf, int64(off))
			if err != nil && !errors.Is(err, io.EOF) {
				fail(i, "read", err)
			}
			want := model[off:min(off+n, len(model))]
			if got != len(want) || !bytes.Equal(buf[:got], want) {
				close(stop)
				wg.Wait()
				t.Fatalf("op %d: read of %d at %d returned %d bytes that differ from the model's %d (seed %d, after %d migrations)", i, n, off, got, len(want), seed, migrations)
			}
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if merr != nil {
		t.Fatalf("migration: %v (seed %d)", merr, seed)
	}
	got, err := readFile(s.client(), "/r")
	if err != nil || !bytes.Equal(got, model) {
		t.Fatalf("after %d ops and %d migrations the file (%d bytes, %v) differs from the model (%d bytes) (seed %d)", ops, migrations, len(got), err, len(model), seed)
	}
	t.Logf("%d ops, %d migrations, final size %d; %d old chunks not read again after the freeze, %d new chunks checked by digest", ops, migrations, len(model), unchanged, compared)
	if admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second); err == nil {
		m := proctest.Metrics(t, admin)
		t.Logf("fences: %.0f expired during the run, %.0f held at its end", proctest.MetricSum(m, "sluice_target_fences_expired_total"), proctest.MetricSum(m, "sluice_target_fences"))
	}
	if compared == 0 {
		t.Errorf("no migration to the same shape checked its copy by digest")
	}
	if migrations < 2 {
		t.Errorf("only %d migrations ran during the ops", migrations)
	}
}
