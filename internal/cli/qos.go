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
	// ClusterRate is bytes per second in the whole cluster, ClusterBurst
	// bytes (default: one second of ClusterRate).
	ClusterRate, ClusterBurst string
}

// QosSet changes a class's weight or a job's limits. Every value is
// checked before anything changes.
func (e *Env) QosSet(ctx context.Context, o QosSetOptions) error {
	switch {
	case o.Class != "" && o.Job != "":
		return errs.New(errs.Invalid, "qos set: give --class or --job, not both")
	case o.Class != "":
		if o.Weight < 0 || o.Weight > 1<<20 || o.Rate != "" || o.Burst != "" || o.MetaRate != "" || o.MetaBurst != "" || o.ClusterRate != "" || o.ClusterBurst != "" {
			return errs.New(errs.Invalid, "qos set --class needs --weight W (0 to %d; 0 restores the default) and no job limit flags", 1<<20)
		}
		return e.Client.SetQosWeight(ctx, o.Class, uint32(o.Weight))
	case o.Job == "":
		return errs.New(errs.Invalid, "qos set needs --class C --weight W or --job J with --rate R [--burst B], --meta-rate N [--meta-burst M], --cluster-rate R [--cluster-burst B]")
	}
	if o.Weight >= 0 || (o.Rate == "" && o.MetaRate == "" && o.ClusterRate == "") ||
		(o.Rate == "" && o.Burst != "") || (o.MetaRate == "" && o.MetaBurst != "") || (o.ClusterRate == "" && o.ClusterBurst != "") {
		return errs.New(errs.Invalid, "qos set --job needs --rate BYTES/s [--burst BYTES], --meta-rate REQUESTS/s [--meta-burst REQUESTS], --cluster-rate BYTES/s [--cluster-burst BYTES] or several, and no --weight")
	}
	var sets []func() error
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
		sets = append(sets, func() error { return e.Client.SetQosJobMetaLimit(ctx, o.Job, rate, burst) })
	}
	bytesLimit := func(rateFlag, burstFlag, rateS, burstS string) (uint64, uint64, error) {
		rate, err := ParseSize(rateS)
		if err != nil {
			return 0, 0, err
		}
		burst := rate
		if burstS != "" {
			if burst, err = ParseSize(burstS); err != nil {
				return 0, 0, err
			}
		}
		if rate == 0 || burst == 0 {
			return 0, 0, errs.New(errs.Invalid, "qos set --job: %s and %s must be above 0 (sluice qos rm --job removes the limits)", rateFlag, burstFlag)
		}
		return uint64(rate), uint64(burst), nil
	}
	if o.Rate != "" {
		rate, burst, err := bytesLimit("--rate", "--burst", o.Rate, o.Burst)
		if err != nil {
			return err
		}
		sets = append(sets, func() error { return e.Client.SetQosJobLimit(ctx, o.Job, rate, burst) })
	}
	if o.ClusterRate != "" {
		rate, burst, err := bytesLimit("--cluster-rate", "--cluster-burst", o.ClusterRate, o.ClusterBurst)
		if err != nil {
			return err
		}
		sets = append(sets, func() error { return e.Client.SetQosJobClusterLimit(ctx, o.Job, rate, burst) })
	}
	for _, set := range sets {
		if err := set(); err != nil {
			return err
		}
	}
	return nil
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
	if len(s.ClusterJobs) > 0 {
		// A table of its own, so that the one above keeps its columns.
		fmt.Fprintln(tw, "\nJOB\tCLUSTER-RATE/s\tCLUSTER-BURST")
		for _, l := range s.ClusterJobs {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", l.Job, l.Rate, l.Burst)
		}
	}
	return tw.Flush()
}
