package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// QosSetOptions are the flags of `sluice qos set`: either a class and its
// weight, or a job and its rate and burst (sizes as ParseSize reads them)
// on the targets, its metadata rate and burst, or both.
type QosSetOptions struct {
	Class     string
	Weight    int64 // -1: not given
	Job       string
	Rate      string // bytes per second
	Burst     string // bytes; default: one second of Rate
	MetaRate  string // namespace requests per second on the metadata service
	MetaBurst string // requests; default: a tenth of a second of MetaRate, at least 1
}

// QosSet changes a class's weight or a job's limit.
func (e *Env) QosSet(ctx context.Context, o QosSetOptions) error {
	switch {
	case o.Class != "" && o.Job != "":
		return errs.New(errs.Invalid, "qos set: give --class or --job, not both")
	case o.Class != "":
		if o.Weight < 0 || o.Weight > 1<<20 || o.Rate != "" || o.Burst != "" || o.MetaRate != "" || o.MetaBurst != "" {
			return errs.New(errs.Invalid, "qos set --class needs --weight W (0 to %d; 0 restores the default) and no --rate, --burst, --meta-rate or --meta-burst", 1<<20)
		}
		return e.Client.SetQosWeight(ctx, o.Class, uint32(o.Weight))
	case o.Job != "":
		if o.Weight >= 0 || (o.Rate == "" && o.MetaRate == "") || (o.Rate == "" && o.Burst != "") || (o.MetaRate == "" && o.MetaBurst != "") {
			return errs.New(errs.Invalid, "qos set --job needs --rate BYTES/s [--burst BYTES], --meta-rate REQUESTS/s [--meta-burst REQUESTS] or both, and no --weight")
		}
		if o.MetaRate != "" {
			rate, err := strconv.ParseUint(o.MetaRate, 10, 63)
			if err != nil {
				return errs.New(errs.Invalid, "qos set --meta-rate %q: want a number of requests per second", o.MetaRate)
			}
			burst := max(rate/10, 1)
			if o.MetaBurst != "" {
				if burst, err = strconv.ParseUint(o.MetaBurst, 10, 63); err != nil {
					return errs.New(errs.Invalid, "qos set --meta-burst %q: want a number of requests", o.MetaBurst)
				}
			}
			if rate == 0 || burst == 0 {
				return errs.New(errs.Invalid, "qos set --job: --meta-rate and --meta-burst must be above 0 (sluice qos rm --job removes the limits)")
			}
			if o.Rate != "" {
				// Check the data limit before changing anything.
				if _, err := ParseSize(o.Rate); err != nil {
					return err
				}
			}
			if err := e.Client.SetQosJobMetaLimit(ctx, o.Job, rate, burst); err != nil {
				return err
			}
		}
		if o.Rate == "" {
			return nil
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
	return errs.New(errs.Invalid, "qos set needs --class C --weight W or --job J --rate R [--burst B] [--meta-rate N [--meta-burst M]]")
}

// QosRemove lifts a job's limits.
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
	// One row per limited job: its limit on each target (bytes) and on
	// the metadata service (requests), "-" where it has none.
	type limits struct{ data, meta *client.QosJobLimit }
	byJob := map[string]*limits{}
	var jobs []string
	get := func(job string) *limits {
		l := byJob[job]
		if l == nil {
			l = &limits{}
			byJob[job] = l
			jobs = append(jobs, job)
		}
		return l
	}
	for i := range s.Jobs {
		get(s.Jobs[i].Job).data = &s.Jobs[i]
	}
	for i := range s.MetaJobs {
		get(s.MetaJobs[i].Job).meta = &s.MetaJobs[i]
	}
	slices.Sort(jobs)
	fmt.Fprintln(tw, "\nJOB\tRATE/s\tBURST\tMETA-RATE/s\tMETA-BURST")
	cell := func(l *client.QosJobLimit) string {
		if l == nil {
			return "-\t-"
		}
		return fmt.Sprintf("%d\t%d", l.Rate, l.Burst)
	}
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", j, cell(byJob[j].data), cell(byJob[j].meta))
	}
	return tw.Flush()
}
