package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newProfile(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "The I/O profiler: record a job's accesses and summarise its workload",
		Long: "Clients that name a job (--qos-job, $SLUICE_QOS_JOB) record what their applications ask of\n" +
			"Sluice while a recording of the job runs: opens, reads and writes with offsets and sizes,\n" +
			"syncs, closes and namespace operations, each timed. See docs/profile.md.",
	}
	var o cli.ProfileRecordOptions
	rec := &cobra.Command{Use: "record --job NAME [--dir D] [--duration T]", Short: "Record a job's I/O for a while", Args: exactArgs(0)}
	f := rec.Flags()
	f.StringVar(&o.Job, "job", "", "the job to record (its clients' $SLUICE_QOS_JOB or --qos-job)")
	f.StringVar(&o.Name, "name", "", "the recording's name (default: the job and the time)")
	f.StringVar(&o.Dir, "dir", "", "report only the files under this directory (default: all)")
	f.DurationVar(&o.Duration, "duration", time.Minute, "how long to record")
	f.Uint64Var(&o.MaxRecords, "max-records", 0, "the most records to keep (default 5,000,000)")
	f.BoolVar(&o.Detach, "detach", false, "start the recording and return at once")
	f.BoolVarP(&o.Quiet, "quiet", "q", false, "no progress lines")
	rec.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.ProfileRecord(ctx, o) })

	var ro cli.ProfileReportOptions
	rep := &cobra.Command{Use: "report NAME", Short: "Summarise a recorded workload", Args: exactArgs(1)}
	rep.Flags().StringVar(&ro.Dir, "dir", "", "only the files under this directory (default: the recording's --dir)")
	rep.Flags().BoolVar(&ro.JSON, "json", false, "print the summary as JSON")
	rep.RunE = func(cmd *cobra.Command, args []string) error {
		return g.run(func(ctx context.Context, e *cli.Env) error { return e.ProfileReport(ctx, args[0], ro) })(cmd, args)
	}

	ls := &cobra.Command{Use: "ls", Short: "List the recordings", Args: exactArgs(0)}
	ls.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.ProfileList(ctx) })
	stop := &cobra.Command{Use: "stop NAME", Short: "End a recording now", Args: exactArgs(1)}
	stop.RunE = func(cmd *cobra.Command, args []string) error {
		return g.run(func(ctx context.Context, e *cli.Env) error { return e.Client.ProfileStop(ctx, args[0]) })(cmd, args)
	}
	rm := &cobra.Command{Use: "rm NAME", Short: "Delete a recording and its records", Args: exactArgs(1)}
	rm.RunE = func(cmd *cobra.Command, args []string) error {
		return g.run(func(ctx context.Context, e *cli.Env) error { return e.Client.ProfileRemove(ctx, args[0]) })(cmd, args)
	}
	cmd.AddCommand(rec, rep, ls, stop, rm)
	return cmd
}
