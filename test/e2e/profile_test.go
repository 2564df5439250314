package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/profile"
)

// jobClient connects a client of QoS job job that checks for recordings
// every 50 ms.
func jobClient(t testing.TB, addr, job string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Options{Server: addr, Job: job, ProfilePoll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitClients waits until recording name counts n clients.
func waitClients(t testing.TB, c *client.Client, name string, n uint32) {
	t.Helper()
	proctest.WaitProfileClients(t, c, name, n)
}

// randomOffsets returns n 4 KiB-aligned offsets in [0, size) such that no
// read follows on from the one before it and no two consecutive gaps are
// equal: each is a random read by the profiler's definition.
func randomOffsets(n int, size int64) []int64 {
	blocks := size / 4096
	var out []int64
	for i := range int64(n) {
		out = append(out, ((i*i*7+3*i+5)%blocks)*4096)
	}
	return out
}

// TestProfile records a job's I/O through the client library while
// another job works beside it, and checks the report against what was
// done: the reads, writes, creates and unlinks counted exactly, their
// bytes and patterns, the hot file named, the other job and the files
// outside --dir left out. Then the CLI's errors, ls and rm.
func TestProfile(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	ctx := context.Background()
	setup := s.client()
	for _, d := range []string{"/data/small", "/data/out", "/other"} {
		if err := setup.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, n int) {
		if err := proctest.WriteFile(ctx, setup, p, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	write("/data/seq", 8<<20)
	write("/data/rnd", 8<<20)
	write("/other/x", 1<<20)
	const smalls, smallSize = 40, 100 << 10
	for i := range smalls {
		write(fmt.Sprintf("/data/small/f%03d", i), smallSize)
	}

	s.failCLI("--job", "profile", "record", "--duration", "1s")
	s.mustCLI("profile", "record", "--job", "pj", "--name", "p1", "--dir", "/data", "--duration", "1h", "--detach")
	s.failCLI("exists", "profile", "record", "--job", "pj2", "--name", "p1", "--duration", "1h", "--detach")
	s.failCLI("recorded already", "profile", "record", "--job", "pj", "--name", "p2", "--duration", "1h", "--detach")

	c := jobClient(t, s.addr, "pj")
	other := jobClient(t, s.addr, "other-job")
	waitClients(t, setup, "p1", 1)

	// The other job reads the same files meanwhile: not recorded.
	for _, p := range []string{"/data/seq", "/data/small/f000"} {
		f, err := other.Open(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, f)
		f.Close()
	}

	read := func(p string, offs []int64, n int) {
		t.Helper()
		f, err := c.Open(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, n)
		for _, off := range offs {
			if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var seqOffs []int64
	for off := int64(0); off < 8<<20; off += 1 << 20 {
		seqOffs = append(seqOffs, off)
	}
	read("/data/seq", seqOffs, 1<<20)
	rnd := randomOffsets(64, 8<<20)
	read("/data/rnd", rnd, 4096)
	for i := range smalls {
		read(fmt.Sprintf("/data/small/f%03d", i), []int64{0}, 128<<10) // one read: the whole file
	}
	read("/other/x", []int64{0}, 1<<20) // outside --dir
	for i := range 10 {
		f, err := c.Create(ctx, fmt.Sprintf("/data/out/o%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, 64<<10), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if err := c.Remove(ctx, fmt.Sprintf("/data/out/o%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	s.mustCLI("profile", "stop", "p1")
	c.Close() // ships what is left

	out := s.mustCLI("profile", "report", "p1", "--json")
	var rep struct {
		Recording client.ProfileSession
		Report    profile.Report
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	r := rep.Report
	if rep.Recording.Clients != 1 || rep.Recording.Dropped != 0 {
		t.Errorf("recording %+v: want 1 client, nothing dropped", rep.Recording)
	}
	wantReads := len(seqOffs) + len(rnd) + smalls
	wantBytes := int64(8<<20 + len(rnd)*4096 + smalls*smallSize)
	if r.Read.Ops != wantReads || r.Read.Bytes != wantBytes {
		t.Errorf("reads: %d ops, %d bytes; want %d, %d (the other job's and /other's left out)", r.Read.Ops, r.Read.Bytes, wantReads, wantBytes)
	}
	if got, want := r.Read.Random, float64(len(rnd)*4096)/float64(wantBytes); got != want {
		t.Errorf("random share of read bytes %v, want %v", got, want)
	}
	if r.Read.Strided != 0 {
		t.Errorf("strided share %v, want 0", r.Read.Strided)
	}
	if r.Write.Ops != 10 || r.Write.Bytes != 10*64<<10 || r.Write.Sequential != 1 {
		t.Errorf("writes %+v: want 10 of 64 KiB, sequential", r.Write)
	}
	if n := r.Ops["create"].Count; n != 10 {
		t.Errorf("%d creates recorded, want 10", n)
	}
	if n := r.Ops["unlink"].Count; n != 5 {
		t.Errorf("%d unlinks recorded, want 5", n)
	}
	if n := r.Ops["open"].Count; n != 2+smalls+10 {
		t.Errorf("%d opens recorded, want %d", n, 2+smalls+10)
	}
	if len(r.Hot) == 0 || r.Hot[0].Path != "/data/seq" || r.Hot[0].Bytes != 8<<20 {
		t.Errorf("hottest file %+v, want /data/seq with 8 MiB", r.Hot)
	}
	if r.WholeFileReads < float64(smalls)/float64(smalls+2) {
		t.Errorf("whole-file reads %v: the %d small files were read whole", r.WholeFileReads, smalls)
	}
	if r.Ops["read"].P50 <= 0 || r.MeanInFlight <= 0 || r.PeakInFlight < 1 {
		t.Errorf("latency %+v, in flight %v/%d", r.Ops["read"], r.MeanInFlight, r.PeakInFlight)
	}

	text := s.mustCLI("profile", "report", "p1")
	for _, want := range []string{"workload:", "/data/seq", "random"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	// The whole namespace: /other/x counts too.
	var all struct{ Report profile.Report }
	if err := json.Unmarshal([]byte(s.mustCLI("profile", "report", "p1", "--json", "--dir", "/")), &all); err != nil {
		t.Fatal(err)
	}
	if all.Report.Read.Ops != wantReads+1 || all.Report.Read.Bytes != wantBytes+1<<20 {
		t.Errorf("report of /: %d reads of %d bytes, want %d of %d", all.Report.Read.Ops, all.Report.Read.Bytes, wantReads+1, wantBytes+1<<20)
	}
	if ls := s.mustCLI("profile", "ls"); !strings.Contains(ls, "p1") || !strings.Contains(ls, "done") {
		t.Errorf("profile ls:\n%s", ls)
	}
	s.mustCLI("profile", "rm", "p1")
	s.failCLI("no recording", "profile", "report", "p1")
}
