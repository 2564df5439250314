package tier

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// restorePollWait: a truncate that took longer waited for another client's
// restore well past its end (restores of 2 MiB take milliseconds here;
// client.restorePoll slept a second between claims before 2026-12-05,
// and 23 of 60 truncates took longer than this then).
const restorePollWait = 500 * time.Millisecond

// TestTruncateRacingRestore races a shrinking truncate of a released
// file (object tier) through one client with the file's restore, which
// writes the chunks outside any File's flush (under the restore lease's
// data ID, then OpHsmRestored moves the file to it): started by another
// client's read (in the background), by another client's `hsm restore`,
// by another client's synced write past the cut (a write restores
// first), or by a read of the truncating client itself. Half the rounds
// cut to 0, which the metadata service takes without a restore unless a
// restore lease is held (meta.hsmOnTruncate); the others cut to 100,
// which restores first. Either way, once every restore has ended, the
// file must end at the cut size (or the write's end, when the write came
// after the cut), and grown back it must show no restored byte past the
// cut (fsx.TruncRace.Check).
// It runs against each real S3 backend (another sluice gateway and
// versitygw). SLUICE_TRUNCRACE_ROUNDS sets the rounds (default 60).
func TestTruncateRacingRestore(t *testing.T) {
	rounds, err := fsx.TruncRaceRounds(60)
	if err != nil {
		t.Fatal(err)
	}
	eachBackend(t, func(t *testing.T, be *backend) { truncateRacingRestore(t, be, rounds) })
}

func truncateRacingRestore(t *testing.T, be *backend, rounds int) {
	fs := startFS(t)
	addBackend(t, fs, be, "cutrace/")
	ca, cb := proctest.Client(t, fs.addr), proctest.Client(t, fs.addr)
	ctx := context.Background()
	if err := ca.Mkdir(ctx, "/h", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ca.SetLayout(ctx, "/h", client.Layout{StripeCount: 4, StripeSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	const size = 2 << 20
	old := bytes.Repeat([]byte{'a'}, size)
	mark := bytes.Repeat([]byte{'X'}, 1000)
	rng := rand.New(rand.NewPCG(0x7e57, uint64(time.Now().UnixNano())))
	var orders [2]int
	waited := 0 // truncates that took longer than restorePollWait
	kinds := []string{"read", "hsm restore", "write", "own read"}
	for i := range rounds {
		kind := kinds[i%4]
		race := fsx.TruncRace{Size: size, Cut: 100, At: 100, Old: 'a'}
		if (i/4)%2 == 0 {
			race.Cut, race.At = 0, 0
		}
		if kind == "write" {
			race.At, race.Mark = 500000, mark
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("round %d (%s, cut to %d): %s", i, kind, race.Cut, fmt.Sprintf(format, args...))
		}
		p := fmt.Sprintf("/h/f%d", i)
		if err := writeSluice(ctx, ca, p, old); err != nil {
			fail("write: %v", err)
		}
		if _, err := ca.HsmArchive(ctx, p, ""); err != nil {
			fail("archive: %v", err)
		}
		if _, err := ca.HsmRelease(ctx, p); err != nil {
			fail("release: %v", err)
		}
		// The truncating File is opened while the file is released.
		fa, err := ca.OpenFile(ctx, p, client.O_RDWR, 0)
		if err != nil {
			fail("open: %v", err)
		}
		restorer := cb
		if kind == "own read" {
			restorer = ca
		}
		fb, err := restorer.OpenFile(ctx, p, client.O_RDWR, 0)
		if err != nil {
			fail("open: %v", err)
		}
		// The truncate starts within 3 ms of the restore either way in
		// half the rounds (around its claim), and up to 25 ms after it in
		// the others (a restore of 2 MiB takes some milliseconds here).
		delay := time.Duration(rng.IntN(6000)-3000) * time.Microsecond
		if rng.IntN(2) == 0 {
			delay = time.Duration(rng.IntN(25000)) * time.Microsecond
		}
		var wg sync.WaitGroup
		var terr, rerr error
		var tdur, rdur time.Duration
		wg.Go(func() {
			time.Sleep(delay)
			t0 := time.Now()
			terr = fa.Truncate(ctx, race.Cut)
			tdur = time.Since(t0)
		})
		wg.Go(func() {
			time.Sleep(-delay)
			t0 := time.Now()
			defer func() { rdur = time.Since(t0) }()
			switch kind {
			case "read", "own read":
				buf := make([]byte, 4096)
				n, err := fb.ReadAt(buf, 64<<10) // short past a cut
				if err != nil && err != io.EOF {
					rerr = err
				} else if k := bytes.IndexFunc(buf[:n], func(c rune) bool { return c != 'a' && c != 0 }); k >= 0 {
					rerr = fmt.Errorf("the read returned %#x", buf[k])
				}
			case "hsm restore":
				_, rerr = cb.HsmRestore(ctx, p)
			case "write":
				if _, err := fb.WriteAt(race.Mark, race.At); err != nil {
					rerr = err
					return
				}
				rerr = fb.Sync()
			}
		})
		wg.Wait()
		if terr != nil || rerr != nil {
			fail("truncate: %v; %s: %v", terr, kind, rerr)
		}
		if err := fb.Close(); err != nil {
			fail("close: %v", err)
		}
		// Wait for the restores the reads started in the background: a
		// late commit must not change the file after it was checked.
		deadline := time.Now().Add(30 * time.Second)
		for ca.RestoreStats().Running+cb.RestoreStats().Running > 0 {
			if time.Now().After(deadline) {
				fail("restores still running after 30 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		st, err := fa.Stat()
		if err != nil {
			fail("stat: %v", err)
		}
		info, err := ca.HsmState(ctx, p)
		if err != nil {
			fail("hsm state: %v", err)
		}
		if info.State == "released" && st.Size() != size {
			fail("the file is released again at size %d", st.Size())
		}
		if err := fa.Truncate(ctx, race.Size); err != nil { // grow again
			fail("grow: %v", err)
		}
		if err := fa.Close(); err != nil {
			fail("close: %v", err)
		}
		got, err := proctest.ReadFile(ctx, cb, p)
		if err != nil {
			fail("read: %v", err)
		}
		o, err := race.Check(got, st.Size())
		if err != nil {
			fail("%v (HSM state after the race %q; the truncate started %v after the %s and took %v, which took %v)", err, info.State, delay, kind, tdur, rdur)
		}
		orders[o]++
		if tdur > restorePollWait {
			waited++
		}
		if i >= 8 {
			ca.Remove(ctx, fmt.Sprintf("/h/f%d", i-8))
		}
	}
	rs := cb.RestoreStats()
	if tot, err := ca.RestoreTotals(ctx); err == nil {
		t.Logf("service: %+v", tot)
	}
	t.Logf("%d rounds: ended at the cut %d, at the write's end %d; %d truncates took over %v; restores of the second client: %d copied, %d waits, %d failed",
		rounds, orders[fsx.WrittenThenCut], orders[fsx.CutThenWritten], waited, restorePollWait, rs.Copied, rs.Waits, rs.Failed)
}
