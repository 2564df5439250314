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

// heldNetwork is the stage of the tests of requests held on the network:
// a server whose targets clients reach through a proxy (the advertised
// address) and whose metadata service they reach directly, and a file
// of one stripe, 1 MiB of 'a', written and synced by the first client.
type heldNetwork struct {
	px    *tcpproxy.Proxy
	admin string
	opts  client.Options
	f     *client.File // the first client's, open
	old   []byte
}

func startHeldNetwork(t *testing.T, opts client.Options) *heldNetwork {
	t.Helper()
	listen := freePort(t)
	h := &heldNetwork{px: tcpproxy.Start(t, listen), opts: opts}
	s := startServer(t, "", "--listen", listen, "--advertise", h.px.Addr, "--inline-max", "0", "--http", "127.0.0.1:0")
	var err error
	if h.admin, err = s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// One connection per server: the held requests go on the one the
	// first writes opened.
	h.opts.Server, h.opts.ConnsPerServer = listen, 1
	ctx := context.Background()
	a := h.connect(t)
	if err := a.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := a.SetLayout(ctx, "/d", client.Layout{StripeCount: 1}); err != nil {
		t.Fatal(err)
	}
	h.old = bytes.Repeat([]byte{'a'}, 1<<20)
	if h.f, err = a.Create(ctx, "/d/f"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.f.Close() })
	if _, err := h.f.WriteAt(h.old, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.f.Sync(); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *heldNetwork) connect(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(context.Background(), h.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// writeOver has a new client write mark at off over the file and sync
// (its connections are new: they pass the proxy); then it lets the held
// requests through and checks that the file is the old bytes with mark
// over them, and that the targets refused one request as late.
func (h *heldNetwork) writeOver(t *testing.T, mark []byte, off int) {
	t.Helper()
	ctx := context.Background()
	g, err := h.connect(t).OpenFile(ctx, "/d/f", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt(mark, int64(off)); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil {
		t.Fatalf("the write after the held request's give-up: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}

	h.px.Resume() // the held requests reach their targets now
	for end := time.Now().Add(15 * time.Second); lateRefused(t, h.admin) == 0 && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	refused := lateRefused(t, h.admin)
	want := bytes.Clone(h.old)
	copy(want[off:], mark)
	r, err := h.connect(t).Open(ctx, "/d/f")
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
		t.Fatalf("the file after the held request came through: %d bytes, first difference at %d (%q; at %d: %q; %d late refused); want the %d bytes with the synced write",
			len(got), i, got[i:min(i+8, len(got))], off, got[off:off+8], refused, len(want))
	}
	if refused != 1 {
		t.Fatalf("the targets refused %d late requests; want the held one", refused)
	}
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
	h := startHeldNetwork(t, client.Options{})
	h.px.Pause() // connections to the targets stall from here
	start := time.Now()
	err := h.f.Truncate(context.Background(), 100)
	t.Logf("the held truncate gave up after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if err == nil {
		t.Fatal("a truncate whose chunk truncate was held on the network succeeded")
	}
	h.px.Hold() // the first client's connections stay stalled, new ones pass
	h.writeOver(t, bytes.Repeat([]byte{'X'}, 1000), 500000)
}

// TestWriteHeldOnTheNetwork: a client's flush is held on the network
// until it gives up (its FlushTimeout, 2 s here) and its Sync fails;
// another client then writes the same range and syncs; then the network
// lets the held write through. It must not replace the synced bytes: the
// target refuses it as late. Before 2026-12-05 it landed.
func TestWriteHeldOnTheNetwork(t *testing.T) {
	t.Parallel()
	h := startHeldNetwork(t, client.Options{FlushTimeout: 2 * time.Second})
	h.px.Pause()
	if _, err := h.f.WriteAt(bytes.Repeat([]byte{'W'}, 1000), 500000); err != nil {
		t.Fatal(err)
	}
	if err := h.f.Sync(); err == nil {
		t.Fatal("a sync whose write was held on the network succeeded")
	} else {
		t.Logf("the held write's sync: %v", err)
	}
	h.px.Hold()
	h.writeOver(t, bytes.Repeat([]byte{'X'}, 1000), 500000)
}
