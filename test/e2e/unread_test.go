package e2e

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestUnreadReadRacesWriter: while another client overwrites whole 64 KiB
// blocks of a file and now and then cuts it and writes it again
// (blockWriter), a client reads whole blocks of it over TCP, which the
// target sends from its page cache unread (ADR 0030): a block changed
// between the target's look at its checksums and the send fails the
// client's check and is read again, verified, so no block the reader gets
// may mix two writes. The server's counter shows the reads went unread.
func TestUnreadReadRacesWriter(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, "", "--http", "127.0.0.1:0")
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	w := s.client()
	rd := s.client()
	const blk, nblk = 64 << 10, 48
	if err := w.MkdirAll(ctx, "/u", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.SetLayout(ctx, "/u", client.Layout{StripeCount: 1}); err != nil {
		t.Fatal(err)
	}
	if err := proctest.WriteFile(ctx, w, "/u/f", bytes.Repeat([]byte{1}, blk*nblk)); err != nil {
		t.Fatal(err)
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	done := blockWriter(ctx, w, "/u/f", seed, blk, nblk)
	r := rand.New(rand.NewPCG(seed, 2))
	buf := make([]byte, 4*blk)
	reads := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			unread := proctest.MetricSum(proctest.Metrics(t, admin), "sluice_target_read_sent_unread_total")
			t.Logf("%d reads, %v sent unread", reads, unread)
			if unread == 0 {
				t.Fatal("no read was sent unread")
			}
			return
		default:
		}
		f, err := rd.Open(ctx, "/u/f")
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			off := int64(r.IntN(nblk-3)) * blk // whole blocks
			n, err := f.ReadAt(buf, off)
			if err != nil && err != io.EOF {
				t.Fatal(err)
			}
			reads++
			checkBlocks(t, buf[:n], off, blk, seed)
		}
		f.Close()
	}
}
