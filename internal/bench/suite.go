package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
)

// Suite is one `sluice bench` run on one FS: the IO500 phases, then the AI
// phases that are set.
type Suite struct {
	IO500 Config
	// SkipIO500 runs only the AI phases.
	SkipIO500  bool
	Training   *TrainingConfig
	Checkpoint *CheckpointConfig
}

// RunSuite runs s on fsys.
func RunSuite(ctx context.Context, fsys FS, s Suite) (*Result, error) {
	res := &Result{FS: fsys.Name(), Workers: s.IO500.Workers}
	if !s.SkipIO500 {
		r, err := Run(ctx, fsys, s.IO500)
		if err != nil {
			return r, err
		}
		res = r
	}
	if s.Training != nil {
		tc := *s.Training
		if tc.Dir == "" {
			tc.Dir = s.IO500.Dir
		}
		if tc.Progress == nil {
			tc.Progress = s.IO500.Progress
		}
		t, err := Train(ctx, fsys, tc)
		if err != nil {
			return res, err
		}
		res.Training = t
	}
	if s.Checkpoint != nil {
		cc := *s.Checkpoint
		if cc.Dir == "" {
			cc.Dir = s.IO500.Dir
		}
		c, err := Checkpoint(ctx, fsys, cc)
		if err != nil {
			return res, err
		}
		res.Checkpoint = c
	}
	return res, nil
}

// WriteComparison writes, for each result after the first, the ratio of
// its numbers to the first's (higher is better for every row but times).
func WriteComparison(w io.Writer, results []*Result) error {
	if len(results) < 2 {
		return nil
	}
	base := results[0]
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"METRIC", base.FS}
	for _, r := range results[1:] {
		head = append(head, r.FS, "RATIO")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	row := func(name string, get func(*Result) (float64, bool)) {
		b, ok := get(base)
		if !ok {
			return
		}
		cells := []string{name, fmt.Sprintf("%.3f", b)}
		for _, r := range results[1:] {
			v, ok := get(r)
			if !ok {
				cells = append(cells, "-", "-")
				continue
			}
			ratio := "-"
			if b != 0 {
				ratio = fmt.Sprintf("%.2fx", v/b)
			}
			cells = append(cells, fmt.Sprintf("%.3f", v), ratio)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	for i, p := range base.Phases {
		row(p.Name+" "+p.Unit, func(r *Result) (float64, bool) {
			if i < len(r.Phases) && r.Phases[i].Name == p.Name {
				return r.Phases[i].Value, true
			}
			return 0, false
		})
	}
	if base.Score != nil {
		row("score bw GiB/s", func(r *Result) (float64, bool) { return r.Score.BW, r.Score != nil })
		row("score md kIOPS", func(r *Result) (float64, bool) { return r.Score.MD, r.Score != nil })
		row("score total", func(r *Result) (float64, bool) { return r.Score.Total, r.Score != nil })
	}
	if base.Training != nil {
		row("training utilization", func(r *Result) (float64, bool) {
			if r.Training == nil {
				return 0, false
			}
			return r.Training.Utilization, true
		})
		row("training GiB/s", func(r *Result) (float64, bool) {
			if r.Training == nil {
				return 0, false
			}
			return r.Training.GiBps, true
		})
	}
	if base.Checkpoint != nil {
		row("checkpoint stall s (lower is better)", func(r *Result) (float64, bool) {
			if r.Checkpoint == nil {
				return 0, false
			}
			return r.Checkpoint.StallSeconds, true
		})
		row("checkpoint durable s (lower is better)", func(r *Result) (float64, bool) {
			if r.Checkpoint == nil {
				return 0, false
			}
			return r.Checkpoint.DurableSeconds, true
		})
		row("restore s (lower is better)", func(r *Result) (float64, bool) {
			if r.Checkpoint == nil {
				return 0, false
			}
			return r.Checkpoint.RestoreSeconds, true
		})
	}
	return tw.Flush()
}

// ProgressBar returns a Progress function that draws a one-line bar on w
// (a terminal) and ends the line when a phase completes.
func ProgressBar(w io.Writer) func(phase string, done, total int64) {
	var mu sync.Mutex
	return func(phase string, done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		const width = 30
		frac := 0.0
		if total > 0 {
			frac = min(float64(done)/float64(total), 1)
		}
		n := int(frac * width)
		fmt.Fprintf(w, "\r%-20s [%s%s] %3.0f%% %d/%d", phase, strings.Repeat("#", n), strings.Repeat(".", width-n), 100*frac, done, total)
		if total > 0 && done >= total {
			fmt.Fprint(w, "\r\033[K")
		}
	}
}
