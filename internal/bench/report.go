package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes res as a human-readable table.
func WriteTable(w io.Writer, res *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "sluice bench on %s, %d workers\n", res.FS, res.Workers)
	if len(res.Phases) > 0 {
		fmt.Fprintln(tw, "PHASE\tRESULT\tUNIT\tTIME\tPARAMETERS")
		for _, p := range res.Phases {
			params := p.Params
			if p.Name == "find" {
				params += fmt.Sprintf(" (found %d of %d)", p.Found, p.Ops)
			}
			fmt.Fprintf(tw, "%s\t%.3f\t%s\t%.2fs\t%s\n", p.Name, p.Value, p.Unit, p.Seconds, params)
		}
	}
	if s := res.Score; s != nil {
		partial := ""
		if s.Partial {
			partial = " (partial: not every phase ran)"
		}
		fmt.Fprintf(tw, "SCORE\tbw %.3f GiB/s\tmd %.3f kIOPS\ttotal %.3f%s\t\n", s.BW, s.MD, s.Total, partial)
	}
	if t := res.Training; t != nil {
		fmt.Fprintf(tw, "training\t%d accelerators\tutilization %.1f%%\t%.2fs\t%s; %.0f samples/s, %.3f GiB/s (data set written in %.2fs)\n",
			t.Accelerators, 100*t.Utilization, t.Seconds, t.Params, t.SamplesPerSec, t.GiBps, t.DatasetSeconds)
		for _, tr := range t.Trials {
			fmt.Fprintf(tw, "  find-max\t%d accelerators\tutilization %.1f%%\t%.2fs\t%.3f GiB/s\n", tr.Accelerators, 100*tr.Utilization, tr.Seconds, tr.GiBps)
		}
		if len(t.Trials) > 0 {
			fmt.Fprintf(tw, "  find-max\tmax %d accelerators at >= 90%%\t\t\t\n", t.MaxAccelerators)
		}
	}
	if c := res.Checkpoint; c != nil {
		fmt.Fprintf(tw, "checkpoint\tstall %.3fs\t\t\t%s, %s in all (writers may go on)\n", c.StallSeconds, c.Params, Size(c.Bytes))
		fmt.Fprintf(tw, "checkpoint\tdurable in %.3fs\t%.3f GiB/s\t\t\n", c.DurableSeconds, c.WriteGiBps)
		fmt.Fprintf(tw, "restore\tread in %.3fs\t%.3f GiB/s\t\t\n", c.RestoreSeconds, c.RestoreGiBps)
	}
	return tw.Flush()
}
