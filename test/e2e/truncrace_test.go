package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/tcpproxy"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestTruncateRacingWriter races a shrinking truncate through one client
// with a synced write past the new size through another, round after
// round, and checks that the file ends as one of the two orders leaves
// it. Written first, then cut: the file ends at the cut size, and growing
// it again (truncate up) shows zeros where the write was. Cut first, then
// written: the write's bytes are there. Either way the file's old bytes
// past the cut never come back, and the write's bytes are never lost.
// Before the size change was made conditional on the file being as the
// cut found it (wire.SetIfAt), a write committed between the truncate's
// cut and its size change kept its bytes in the chunks past the new size,
// and the growth showed them. Before cut generations (wire/cut.go), a
// write whose data landed before the cut and whose size commit landed
// after the truncate left the file at the write's end with zeros where
// its bytes were (2 of 2,000 and 11 of 5,000 rounds): now its commit is
// refused and the write goes again.
// SLUICE_TRUNCRACE_ROUNDS sets the rounds (default 150).
func TestTruncateRacingWriter(t *testing.T) {
	rounds, err := fsx.TruncRaceRounds(150)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "")
	testTruncateRacingWriter(t, s.client(), s.client(), rounds)
}

// TestTruncateRacingWriterJitter is TestTruncateRacingWriter with both
// clients' connections (metadata and targets) behind a proxy that delays
// each piece of what they send by a random 0-2 ms: the truncate's chunk
// truncates, its size change, the write's data and its commit overtake
// one another. SLUICE_TRUNCRACE_ROUNDS sets the rounds (default 100).
func TestTruncateRacingWriterJitter(t *testing.T) {
	t.Parallel()
	rounds, err := fsx.TruncRaceRounds(100)
	if err != nil {
		t.Fatal(err)
	}
	listen := freePort(t)
	px := tcpproxy.Start(t, listen)
	px.SetJitter(2 * time.Millisecond)
	startServer(t, "", "--listen", listen, "--advertise", px.Addr)
	testTruncateRacingWriter(t, proctest.Client(t, px.Addr), proctest.Client(t, px.Addr), rounds)
}

func testTruncateRacingWriter(t *testing.T, ca, cb *client.Client, rounds int) {
	ctx := context.Background()
	if err := ca.Mkdir(ctx, "/r", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ca.SetLayout(ctx, "/r", client.Layout{StripeCount: 4, StripeSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	const seedKV = 0x7a7c
	race := fsx.TruncRace{Size: 1 << 20, Cut: 100, At: 500000, Old: 'a', Mark: bytes.Repeat([]byte{'X'}, 1000)}
	old := bytes.Repeat([]byte{race.Old}, int(race.Size))
	rng := rand.New(rand.NewPCG(seedKV, uint64(time.Now().UnixNano())))
	var orders [2]int
	for i := range rounds {
		p := fmt.Sprintf("/r/f%d", i%4)
		fa, err := ca.OpenFile(ctx, p, client.O_RDWR|client.O_CREATE|client.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fa.WriteAt(old, 0); err != nil {
			t.Fatal(err)
		}
		if err := fa.Sync(); err != nil {
			t.Fatal(err)
		}
		fb, err := cb.OpenFile(ctx, p, client.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			// The writer's client learns the file's cut generation (its
			// first commit since the other client's O_TRUNC is refused
			// and goes again), so that its commit in the race may come
			// before the truncate's cut; in odd rounds it learns it in
			// the race.
			if _, err := fb.WriteAt(old[:1], 0); err != nil {
				t.Fatal(err)
			}
			if err := fb.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		// One side starts up to 1.5 ms after the other, either way.
		delay := time.Duration(rng.IntN(3000)-1500) * time.Microsecond
		var wg sync.WaitGroup
		var terr, werr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			time.Sleep(-delay)
			terr = fa.Truncate(ctx, race.Cut)
		}()
		go func() {
			defer wg.Done()
			time.Sleep(delay)
			if _, err := fb.WriteAt(race.Mark, race.At); err != nil {
				werr = err
				return
			}
			werr = fb.Sync()
		}()
		wg.Wait()
		if terr != nil || werr != nil {
			t.Fatalf("round %d: truncate: %v; write: %v", i, terr, werr)
		}
		if err := fb.Close(); err != nil {
			t.Fatal(err)
		}
		st, err := fa.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if err := fa.Truncate(ctx, race.Size); err != nil { // grow again
			t.Fatal(err)
		}
		if err := fa.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := readFile(ca, p)
		if err != nil {
			t.Fatal(err)
		}
		o, err := race.Check(got, st.Size())
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		orders[o]++
	}
	t.Logf("%d rounds: written then cut %d, cut then written %d", rounds, orders[fsx.WrittenThenCut], orders[fsx.CutThenWritten])
	if orders[fsx.WrittenThenCut] == 0 || orders[fsx.CutThenWritten] == 0 {
		t.Logf("only one order happened: the rounds did not race")
	}
}

// TestTruncateUnderWriters truncates a file 300 times through one client
// while four others keep writing to it and syncing (a log cut while it
// is appended to): every truncate must succeed, where the size change's
// condition (the file as the cut found it) fails again and again, and no
// byte may be left past the file's size: once the writers stop, growing
// the file shows zeros past the size it had. Without the truncate's last
// round (which sets the size whatever changed since the cut, then cuts
// again), the conditional rounds alone failed here with EBUSY (57 and 120 of 300
// with 8 rounds each, 3 of 300 with 32), before cut generations held the
// writers' commits off during a cut (ADR 0031); with them, writers whose
// commits a cut refused write their data again after it.
func TestTruncateUnderWriters(t *testing.T) {
	s := startServer(t, "")
	ctx := context.Background()
	fa, err := s.client().OpenFile(ctx, "/log", client.O_RDWR|client.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var writes atomic.Int64
	line := bytes.Repeat([]byte("a log line, written and synced\n"), 4)
	for w := range 4 {
		fb, err := s.client().OpenFile(ctx, "/log", client.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer fb.Close()
			for off := int64(w) * 25000; !stop.Load(); off += 100000 {
				if _, err := fb.WriteAt(line, off); err != nil {
					t.Error(err)
					return
				}
				if err := fb.Sync(); err != nil {
					t.Error(err)
					return
				}
				writes.Add(1)
			}
		}()
	}
	failed := 0
	for i := range 300 {
		if err := fa.Truncate(ctx, 10); err != nil {
			failed++
			t.Errorf("truncate %d: %v", i, err)
		}
	}
	stop.Store(true)
	wg.Wait()
	st, err := fa.Stat()
	if err != nil {
		t.Fatal(err)
	}
	end := st.Size()
	if err := fa.Truncate(ctx, end+1<<20); err != nil {
		t.Fatal(err)
	}
	if err := fa.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := readFile(s.client(), "/log")
	if err != nil {
		t.Fatal(err)
	}
	if k := bytes.IndexFunc(got[end:], func(r rune) bool { return r != 0 }); k >= 0 {
		t.Fatalf("byte %d, past the size %d the file had, is %#x after growing it: a write's bytes outlived a truncate", end+int64(k), end, got[end+int64(k)])
	}
	t.Logf("300 truncates (%d failed) beside %d synced writes; size %d at the end", failed, writes.Load(), end)
}

// TestCutHeldByDeadTruncater: a truncating client that began a cut of a
// file (OpCutBegin, sent here on a raw connection) and then died never
// ends it; another client's synced write to the file must still land,
// once the metadata service takes the cut over (wire.CutHold, 30 s),
// within the writer's flush timeout, and its bytes must be there.
func TestCutHeldByDeadTruncater(t *testing.T) {
	t.Parallel() // it mostly waits
	s := startServer(t, "")
	ca := s.client()
	ctx := context.Background()
	f, err := ca.Create(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	old := bytes.Repeat([]byte{'a'}, 1<<20)
	if _, err := f.Write(old); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	conn, err := wire.Dial(ctx, s.addr)
	if err != nil {
		t.Fatal(err)
	}
	var r wire.CutResp
	if _, err := conn.Call(ctx, wire.OpCutBegin, &wire.InoReq{Ino: f.Ino()}, nil, &r, nil); err != nil || r.Cut&1 != 1 {
		t.Fatalf("cut begin: generation %d, %v", r.Cut, err)
	}
	conn.Close() // the truncater is gone, its cut held

	fb, err := s.client().OpenFile(ctx, "/f", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	mark := bytes.Repeat([]byte{'X'}, 1000)
	start := time.Now()
	if _, err := fb.WriteAt(mark, 500000); err != nil {
		t.Fatal(err)
	}
	if err := fb.Sync(); err != nil {
		t.Fatalf("synced write beside a cut whose truncater died: %v", err)
	}
	waited := time.Since(start)
	if err := fb.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := readFile(ca, "/f")
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), old...)
	copy(want[500000:], mark)
	if !bytes.Equal(got, want) {
		t.Fatalf("after the write: %d bytes, want the old 1 MiB with the write's bytes at 500000", len(got))
	}
	// Truncates of the file work again.
	if err := ca.Truncate(ctx, "/f", 10); err != nil {
		t.Fatal(err)
	}
	t.Logf("the write waited %v for the dead truncater's cut to be taken over (wire.CutHold %v)", waited.Round(time.Millisecond), wire.CutHold)
}

// TestTruncateOlderService: against a metadata service without cut
// generations (a proxy on loopback answers OpCutBegin, OpCutGen and
// OpCutEnd "not supported", as an older service does), truncates fall
// back to the conditional size change alone, and writes, truncates down
// and up and reads still give the file's bytes.
func TestTruncateOlderService(t *testing.T) {
	s := startServer(t, "")
	old := proctest.StartOlderService(t, s.addr, wire.OpCutBegin, wire.OpCutGen, wire.OpCutEnd)
	c := proctest.Client(t, old.Addr)
	ctx := context.Background()
	f, err := c.Create(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	for round := range 3 {
		if _, err := f.WriteAt(want, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(ctx, 1000); err != nil {
			t.Fatalf("round %d: truncate against the older service: %v", round, err)
		}
		if err := f.Truncate(ctx, 1<<20); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 1<<20)
		if _, err := f.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		exp := append(append([]byte(nil), want[:1000]...), make([]byte, 1<<20-1000)...)
		if !bytes.Equal(got, exp) {
			t.Fatalf("round %d: the file is not the first 1,000 bytes and zeros", round)
		}
	}
	if r := old.Refused(wire.OpCutBegin); r != 1 {
		t.Fatalf("the older service refused %d cut begins; want 1 (the client then stops asking)", r)
	}
}

// TestOpenByPathLearnsCut: a library File opened for writing by path
// learns the file's cut generation with its attributes (OpResolveRead;
// with O_CREATE, the create's answer), so that its first commit after
// another client cut the file is not refused and its data written twice:
// the metadata service counts no refused commit
// (sluice_cut_refused_commits_total). Before, it counted one per open
// (until late 2026-12-05 still with O_CREATE).
func TestOpenByPathLearnsCut(t *testing.T) {
	s := startServer(t, "", "--http", "127.0.0.1:0")
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ca := s.client()
	for _, tc := range []struct {
		name string
		flag int
	}{{"/f", client.O_RDWR}, {"/g", client.O_RDWR | client.O_CREATE}} {
		f, err := ca.Create(ctx, tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(bytes.Repeat([]byte{'a'}, 1<<20)); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(ctx, 100); err != nil { // a cut: the generation moves
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		cb := s.client() // has seen no cut
		g, err := cb.OpenFile(ctx, tc.name, tc.flag, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.WriteAt([]byte("written after the cut"), 500000); err != nil {
			t.Fatal(err)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^sluice_cut_refused_commits_total (\d+)`).FindSubmatch(adminMetrics(t, admin))
		if m == nil {
			t.Fatal("no sluice_cut_refused_commits_total on the metrics page")
		}
		if string(m[1]) != "0" {
			t.Fatalf("%s: %s size commits refused: the opener (flags %#o) did not learn the file's cut generation", tc.name, m[1], tc.flag)
		}
		got, err := readFile(ca, tc.name)
		if err != nil || len(got) != 500000+21 || !bytes.Equal(got[500000:], []byte("written after the cut")) {
			t.Fatalf("%s after the write: %d bytes, %v", tc.name, len(got), err)
		}
	}
}
