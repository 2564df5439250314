package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
)

// startMigrateRace starts a server and three clients of it (the
// truncating, the writing and the migrating one) and makes /m, files in 4
// stripes of 64 KiB.
func startMigrateRace(t *testing.T) (ca, cb, cm *client.Client) {
	t.Helper()
	s := startServer(t, "")
	ca, cb, cm = s.client(), s.client(), s.client()
	ctx := context.Background()
	if err := ca.Mkdir(ctx, "/m", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ca.SetLayout(ctx, "/m", client.Layout{StripeCount: 4, StripeSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	return ca, cb, cm
}

// TestTruncateRacingMigrate races a shrinking truncate through one client
// and a synced write past the new size through another with an online
// migration of the file (client.Migrate, ADR 0020), which copies the
// chunks to a new layout outside any File's flush, freezes the old ones,
// copies what changed, verifies and switches the layout without looking at
// the file's size, mtime or cut generation. The truncate and the write
// start as the migration enters a phase chosen at random (the first copy,
// just before the freeze, after it, before the verify, before the
// commit), the migrator held there up to 3 ms; the migration goes to
// another shape (2 stripes of 128 KiB) or to the same shape on other
// chains (where the recopy and the verify compare digests instead of
// bytes), and runs through a third client, the truncating one or the
// writing one. The file must end as one of the two orders of the truncate
// and the write leaves it, with no old byte past the cut once grown back
// (fsx.TruncRace.Check), whatever the migration did; the migration itself
// must succeed.
// SLUICE_TRUNCRACE_ROUNDS sets the rounds (default 150).
func TestTruncateRacingMigrate(t *testing.T) {
	rounds, err := fsx.TruncRaceRounds(150)
	if err != nil {
		t.Fatal(err)
	}
	ca, cb, cm := startMigrateRace(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(0x316a, uint64(time.Now().UnixNano())))
	phases := []string{"copy", "freeze", "recopy", "verify", "commit"}
	var orders [2]int
	var moved int
	for i := range rounds {
		race := fsx.TruncRace{Size: 1 << 20, Cut: 100, At: 500000, Old: 'a', Mark: bytes.Repeat([]byte{'X'}, 1000)}
		if i%3 == 1 {
			race.Cut = 300000 // inside slot 0's second stripe
		}
		if i%5 == 4 {
			race.Mark, race.At = nil, race.Cut // a truncate alone
		}
		old := bytes.Repeat([]byte{race.Old}, int(race.Size))
		phase := phases[rng.IntN(len(phases))]
		migrator := []*client.Client{cm, ca, cb}[i%3]
		same := (i/3)%2 == 1
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("round %d (truncate and write at %q, same shape %v, migrator %d): %s", i, phase, same, i%3, fmt.Sprintf(format, args...))
		}
		p := fmt.Sprintf("/m/f%d", i%4)
		fa, err := ca.OpenFile(ctx, p, client.O_RDWR|client.O_CREATE|client.O_TRUNC, 0o644)
		if err != nil {
			fail("%v", err)
		}
		if _, err := fa.WriteAt(old, 0); err != nil {
			fail("%v", err)
		}
		if err := fa.Sync(); err != nil {
			fail("%v", err)
		}
		fb, err := cb.OpenFile(ctx, p, client.O_RDWR, 0)
		if err != nil {
			fail("%v", err)
		}
		if i%2 == 0 { // the writer learns the cut generation of the O_TRUNC (TestTruncateRacingWriter)
			if _, err := fb.WriteAt(old[:1], 0); err != nil {
				fail("%v", err)
			}
			if err := fb.Sync(); err != nil {
				fail("%v", err)
			}
		}
		before, err := ca.GetLayout(ctx, p)
		if err != nil {
			fail("%v", err)
		}
		spec := client.MigrateSpec{StripeCount: 2, StripeSize: 128 << 10}
		if before.StripeCount == 2 {
			spec = client.MigrateSpec{StripeCount: 4, StripeSize: 64 << 10}
		}
		if same {
			spec = client.MigrateSpec{Chains: append(slices.Clone(before.Chains[1:]), before.Chains[0])}
		}
		start := make(chan struct{})
		var once sync.Once
		trigger := func() { once.Do(func() { close(start) }) }
		hold := time.Duration(rng.IntN(3000)) * time.Microsecond
		tdelay := time.Duration(rng.IntN(1500)) * time.Microsecond
		wdelay := time.Duration(rng.IntN(1500)) * time.Microsecond
		opts := client.MigrateOptions{Phase: func(p string, _ client.Layout) {
			if p == phase {
				trigger()
				time.Sleep(hold)
			}
		}}
		var wg sync.WaitGroup
		var terr, werr, merr error
		var res client.MigrateResult
		wg.Go(func() {
			res, merr = migrator.Migrate(ctx, p, spec, opts)
			trigger() // a migration that ended before the phase
		})
		wg.Go(func() {
			<-start
			time.Sleep(tdelay)
			terr = fa.Truncate(ctx, race.Cut)
		})
		if race.Mark != nil {
			wg.Go(func() {
				<-start
				time.Sleep(wdelay)
				if _, err := fb.WriteAt(race.Mark, race.At); err != nil {
					werr = err
					return
				}
				werr = fb.Sync()
			})
		}
		wg.Wait()
		if terr != nil || werr != nil || merr != nil {
			fail("truncate: %v; write: %v; migrate: %v", terr, werr, merr)
		}
		if res.Moved {
			moved++
		}
		if err := fb.Close(); err != nil {
			fail("%v", err)
		}
		st, err := fa.Stat()
		if err != nil {
			fail("%v", err)
		}
		if err := fa.Truncate(ctx, race.Size); err != nil { // grow again
			fail("%v", err)
		}
		if err := fa.Close(); err != nil {
			fail("%v", err)
		}
		after, err := ca.GetLayout(ctx, p)
		if err != nil {
			fail("%v", err)
		}
		if after.Data == before.Data || after.StripeCount != max(spec.StripeCount, len(spec.Chains)) {
			fail("the layout after the migration is %+v (before %+v)", after, before)
		}
		got, err := readFile(cb, p)
		if err != nil {
			fail("%v", err)
		}
		o, err := race.Check(got, st.Size())
		if err != nil {
			fail("%v (recopied %d bytes, %d slots unchanged, %d compared)", err, res.Recopied, res.Unchanged, res.Compared)
		}
		if race.Mark == nil && o != fsx.WrittenThenCut {
			fail("a truncate alone ended at %d", st.Size())
		}
		orders[o]++
	}
	t.Logf("%d rounds (%d moved chunks): ended at the cut %d, at the write's end %d", rounds, moved, orders[fsx.WrittenThenCut], orders[fsx.CutThenWritten])
}

// TestTruncateDuringLongFreeze: a truncate whose chunks a migration keeps
// frozen for longer than a cut may be held (wire.CutTimeout, 15 s; the
// migrator is held 20 s after the freeze here) ends its cut, waits for
// the migration outside it and cuts the new chunks. Before, it spent its
// held time waiting and failed with the slots it had cut before the
// freeze cut and the size unchanged. A synced write past the cut by
// another client, begun during the freeze, lands too.
func TestTruncateDuringLongFreeze(t *testing.T) {
	t.Parallel() // it mostly waits
	ca, cb, cm := startMigrateRace(t)
	ctx := context.Background()
	race := fsx.TruncRace{Size: 1 << 20, Cut: 100, At: 500000, Old: 'a', Mark: bytes.Repeat([]byte{'X'}, 1000)}
	writeFile(t, ca, "/m/f", bytes.Repeat([]byte{race.Old}, int(race.Size)))
	fa, err := ca.OpenFile(ctx, "/m/f", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := cb.OpenFile(ctx, "/m/f", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	const hold = 20 * time.Second
	frozen := make(chan struct{})
	var res client.MigrateResult
	var merr error
	var wg sync.WaitGroup
	wg.Go(func() {
		res, merr = cm.Migrate(ctx, "/m/f", client.MigrateSpec{StripeCount: 2, StripeSize: 128 << 10}, client.MigrateOptions{
			Phase: func(p string, _ client.Layout) {
				if p == "recopy" { // after the freeze
					close(frozen)
					time.Sleep(hold)
				}
			}})
	})
	<-frozen
	var werr error
	wg.Go(func() {
		time.Sleep(time.Second) // after the truncate's cut began
		if _, err := fb.WriteAt(race.Mark, race.At); err != nil {
			werr = err
			return
		}
		werr = fb.Sync()
	})
	start := time.Now()
	terr := fa.Truncate(ctx, race.Cut)
	took := time.Since(start)
	wg.Wait()
	if merr != nil || !res.Moved {
		t.Fatalf("migration: %+v, %v", res, merr)
	}
	if terr != nil {
		t.Fatalf("truncate during a %v freeze: %v (after %v)", hold, terr, took.Round(time.Millisecond))
	}
	if werr != nil {
		t.Fatalf("write during the freeze: %v", werr)
	}
	if err := fb.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := fa.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := fa.Truncate(ctx, race.Size); err != nil {
		t.Fatal(err)
	}
	got, err := readFile(ca, "/m/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := race.Check(got, st.Size()); err != nil {
		t.Fatal(err)
	}
	t.Logf("the truncate took %v beside a migration frozen %v; the file ended at %d", took.Round(time.Millisecond), hold, st.Size())
}
