package e2e

import (
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

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
	s := startServer(t, "", "--http", "127.0.0.1:0")
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	reads := readsRacingWriter(t, s.client(), s.client(), "/u", 4*raceBlock, func(r *rand.Rand, n int) int64 {
		return int64(r.IntN(raceBlocks-n/raceBlock+1)) * raceBlock // whole blocks
	})
	unread := proctest.MetricSum(proctest.Metrics(t, admin), "sluice_target_read_sent_unread_total")
	t.Logf("%d reads, %v sent unread", reads, unread)
	if unread == 0 {
		t.Fatal("no read was sent unread")
	}
}
