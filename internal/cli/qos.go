package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/sluice-fs/sluice/internal/errs"
)

// QosSetOptions are the flags of `sluice qos set`: either a class and its
// weight, or a job and its rate and burst (sizes as ParseSize reads them).
type QosSetOptions struct {
	Class  string
	Weight int64 // -1: not given
	Job    string
	Rate   string // bytes per second
	Burst  string // bytes; default: one second of Rate
}

// QosSet changes a class's weight or a job's limit.
func (e *Env) QosSet(ctx context.Context, o QosSetOptions) error {
	switch {
	case o.Class != "" && o.Job != "":
		return errs.New(errs.Invalid, "qos set: give --class or --job, not both")
	case o.Class != "":
		if o.Weight < 0 || o.Weight > 1<<20 || o.Rate != "" || o.Burst != "" {
			return errs.New(errs.Invalid, "qos set --class needs --weight W (0 to %d; 0 restores the default) and no --rate or --burst", 1<<20)
		}
		return e.Client.SetQosWeight(ctx, o.Class, uint32(o.Weight))
	case o.Job != "":
		if o.Weight >= 0 || o.Rate == "" {
			return errs.New(errs.Invalid, "qos set --job needs --rate BYTES/s [--burst BYTES] and no --weight")
		}
		rate, err := ParseSize(o.Rate)
		if err != nil {
			return err
		}
		burst := rate
		if o.Burst != "" {
			if burst, err = ParseSize(o.Burst); err != nil {
				return err
			}
		}
		if rate == 0 || burst == 0 {
			return errs.New(errs.Invalid, "qos set --job: rate and burst must be above 0 (sluice qos rm --job removes a limit)")
		}
		return e.Client.SetQosJobLimit(ctx, o.Job, uint64(rate), uint64(burst))
	}
	return errs.New(errs.Invalid, "qos set needs --class C --weight W or --job J --rate R [--burst B]")
}

// QosRemove lifts a job's limit.
func (e *Env) QosRemove(ctx context.Context, job string) error {
	if job == "" {
		return errs.New(errs.Invalid, "qos rm needs --job J")
	}
	return e.Client.RemoveQosJobLimit(ctx, job)
}

// QosList prints the classes' weights and the jobs' limits.
func (e *Env) QosList(ctx context.Context) error {
	s, err := e.Client.QosSettings(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASS\tWEIGHT")
	for _, c := range s.Classes {
		fmt.Fprintf(tw, "%s\t%d\n", c, s.Weights[c])
	}
	fmt.Fprintln(tw, "\nJOB\tRATE/s\tBURST")
	for _, j := range s.Jobs {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", j.Job, j.Rate, j.Burst)
	}
	return tw.Flush()
}
