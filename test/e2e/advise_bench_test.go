package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/cli"
)

// BenchmarkAdvise records four workloads of `sluice bench` (the small-file
// training emulation, ior-easy's large sequential files, a checkpoint and
// its restore, ior-hard's strided records on files of one target), asks
// the advisor about each with the built-in model (or $SLUICE_ADVISE_MODEL)
// and checks its advice by replay: it reports, per workload, whether a
// change was advised (1) or not (0), and the replay's measured and
// predicted ratios of the advised (or best alternative) configuration to
// the current one.
//
//	go test -run '^$' -bench Advise -benchtime 1x ./test/e2e
func BenchmarkAdvise(b *testing.B) {
	s := startServer(b, "")
	model := []string{}
	if f := os.Getenv("SLUICE_ADVISE_MODEL"); f != "" {
		model = []string{"--model", f}
	}
	for _, w := range []struct {
		name    string
		stripes string // the directory's stripe count ("": the default, every target)
		bench   []string
	}{
		{"training", "", []string{"--no-io500", "--no-checkpoint", "--accelerators", "2"}},
		{"ior-easy", "", []string{"--no-train", "--no-checkpoint", "--phases", "ior-easy", "--easy-size", "256MiB"}},
		{"checkpoint", "", []string{"--no-train", "--no-io500", "--ckpt-size", "1GiB"}},
		// ior-hard's small strided records on one target each.
		{"ior-hard-1", "1", []string{"--no-train", "--no-checkpoint", "--phases", "ior-hard"}},
	} {
		dir := "/w-" + w.name
		s.mustCLI("mkdir", dir)
		if w.stripes != "" {
			s.mustCLI("layout", "set", dir, "--stripe-count", w.stripes)
		}
		s.mustCLI("profile", "record", "--job", w.name, "--name", w.name, "--dir", dir, "--duration", "1h", "--detach")
		time.Sleep(1500 * time.Millisecond) // the bench's clients join at their first check
		args := append([]string{"bench", "--qos-job", w.name, "--keep"}, w.bench...)
		out := s.mustCLI(append(args, "sluice:"+dir)...)
		s.mustCLI("profile", "stop", w.name)
		time.Sleep(3 * time.Second)
		b.Logf("%s: %s", w.name, firstLines(out, 3))
		b.Logf("%s: %s", w.name, firstLines(s.mustCLI("profile", "report", w.name), 2))
		var res cli.AdviseResult
		j := s.mustCLI(append([]string{"advise", w.name, "--check", "--json"}, model...)...)
		if err := json.Unmarshal([]byte(j), &res); err != nil {
			b.Fatalf("%s: %v\n%s", w.name, err, j)
		}
		lay, ra := res.Advice[0], res.Advice[1]
		b.Logf("%s: %s %s requests of %d, %.1f in flight, files of %d on %s: layout %q -> %q (%s); read-ahead -> %q; qos-class %s",
			w.name, res.Workload.Pattern, res.Workload.Op, res.Workload.ReqSize, res.Workload.Streams, res.Workload.FileSpan,
			res.Layout, lay.From, lay.To, lay.Reason, ra.To, res.Advice[2].To)
		changed := 0.0
		if lay.Change() || ra.Change() {
			changed = 1
		}
		b.ReportMetric(changed, w.name+"-changed")
		if c := res.Check; c != nil {
			b.Logf("%s check: %s %.0f MB/s, %s %.0f MB/s: measured %.2fx, predicted %.2fx (%d bytes, %d streams, %d at once)",
				w.name, c.From, c.FromMBps, c.To, c.ToMBps, c.Measured, c.Predicted, c.Bytes, c.Streams, c.Workers)
			b.ReportMetric(c.Measured, w.name+"-measured")
			b.ReportMetric(c.Predicted, w.name+"-predicted")
		}
		s.mustCLI("rm", "-r", dir)
	}
}

func firstLines(s string, n int) string {
	l := strings.SplitN(s, "\n", n+1)
	return strings.Join(l[:min(n, len(l))], " | ")
}
