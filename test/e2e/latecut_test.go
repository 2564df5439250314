package e2e

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/tcpproxy"
)

// lateRefused reads sluice_target_late_refused_total, summed over the
// targets, from the server's admin port.
func lateRefused(t *testing.T, admin string) int {
	t.Helper()
	n := 0
	for _, m := range regexp.MustCompile(`(?m)^sluice_target_late_refused_total\{[^}]*\} (\d+)`).FindAllSubmatch(adminMetrics(t, admin), -1) {
		v, _ := strconv.Atoi(string(m[1]))
		n += v
	}
	return n
}

// TestTruncateHeldOnTheNetwork: a truncating client's chunk truncate is
// held on the network (its connections to the targets stall, a proxy
// holding what it sends) until the truncate gives up (wire.CutTimeout)
// and ends its cut; another client then writes into the range the
// truncate would have cut and syncs; then the network lets the held
// truncate through. It must not cut the synced bytes: the target refuses
// it as late (ADR 0031, addendum). Before, it landed and the second
// client's acknowledged bytes read back as zeros.
func TestTruncateHeldOnTheNetwork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	listen := freePort(t)
	px := tcpproxy.Start(t, listen)
	// Clients reach the metadata service directly and the targets (the
	// advertised address) through the proxy.
	s := startServer(t, "", "--listen", listen, "--advertise", px.Addr, "--inline-max", "0", "--http", "127.0.0.1:0")
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	connect := func() *client.Client {
		// One connection per server: the truncate goes on the one the
		// writes opened.
		c, err := client.New(ctx, client.Options{Server: listen, ConnsPerServer: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a := connect()
	if err := a.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := a.SetLayout(ctx, "/d", client.Layout{StripeCount: 1}); err != nil {
		t.Fatal(err)
	}
	old := bytes.Repeat([]byte{'a'}, 1<<20)
	f, err := a.Create(ctx, "/d/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(old, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}

	px.Pause() // connections to the targets stall from here
	start := time.Now()
	err = f.Truncate(ctx, 100)
	t.Logf("the held truncate gave up after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if err == nil {
		t.Fatal("a truncate whose chunk truncate was held on the network succeeded")
	}
	px.Hold() // a's connections stay stalled, new ones pass

	b := connect() // its connections are new: they pass
	mark := bytes.Repeat([]byte{'X'}, 1000)
	g, err := b.OpenFile(ctx, "/d/f", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt(mark, 500000); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil {
		t.Fatalf("the write after the failed truncate: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}

	px.Resume() // the held truncate reaches its target now
	for end := time.Now().Add(15 * time.Second); lateRefused(t, admin) == 0 && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	refused := lateRefused(t, admin)

	want := bytes.Clone(old)
	copy(want[500000:], mark)
	r, err := connect().Open(ctx, "/d/f")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("the file after the held truncate came through: %d bytes, first difference at %d (%q, at 500000: %q; %d late refused); want the %d bytes before it with the synced write", len(got), i, got[i:min(i+8, len(got))], got[500000:500008], refused, len(want))
	}
	if refused != 1 {
		t.Fatalf("the targets refused %d late requests; want the held truncate", refused)
	}
	f.Close()
}

// TestWriteHeldOnTheNetwork: a client's flush is held on the network
// until it gives up (its FlushTimeout, 2 s here) and its Sync fails;
// another client then writes the same range and syncs; then the network
// lets the held write through. It must not replace the synced bytes: the
// target refuses it as late. Before 2026-12-05 it landed.
func TestWriteHeldOnTheNetwork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	listen := freePort(t)
	px := tcpproxy.Start(t, listen)
	s := startServer(t, "", "--listen", listen, "--advertise", px.Addr, "--inline-max", "0", "--http", "127.0.0.1:0")
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	connect := func() *client.Client {
		c, err := client.New(ctx, client.Options{Server: listen, ConnsPerServer: 1, FlushTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a := connect()
	if err := a.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := a.SetLayout(ctx, "/d", client.Layout{StripeCount: 1}); err != nil {
		t.Fatal(err)
	}
	old := bytes.Repeat([]byte{'a'}, 1<<20)
	f, err := a.Create(ctx, "/d/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(old, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}

	px.Pause()
	if _, err := f.WriteAt(bytes.Repeat([]byte{'W'}, 1000), 500000); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err == nil {
		t.Fatal("a sync whose write was held on the network succeeded")
	} else {
		t.Logf("the held write's sync: %v", err)
	}
	px.Hold()

	b := connect()
	mark := bytes.Repeat([]byte{'X'}, 1000)
	g, err := b.OpenFile(ctx, "/d/f", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt(mark, 500000); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}

	px.Resume()
	for end := time.Now().Add(15 * time.Second); lateRefused(t, admin) == 0 && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	refused := lateRefused(t, admin)
	want := bytes.Clone(old)
	copy(want[500000:], mark)
	r, err := connect().Open(ctx, "/d/f")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the file after the held write came through: %d bytes, at 500000 %q (%d late refused); want the synced %q", len(got), got[500000:500008], refused, want[500000:500008])
	}
	if refused != 1 {
		t.Fatalf("the targets refused %d late requests; want the held write", refused)
	}
	f.Close()
}
