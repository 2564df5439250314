package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newStage(g *globals) *cobra.Command {
	var o cli.StageOptions
	var rate string
	var args []string
	cmd := &cobra.Command{
		Use:   "stage PATH... | --from-file LIST | --from-profile RECORDING [--rate R] [--wait]",
		Short: "Restore released files ahead of a job, in the order given",
		Long: "Restore released files from the object tier to the targets ahead of a job, starting\n" +
			"them in the order given (arguments, then LIST's lines, then the files a recording of the\n" +
			"I/O profiler read, in the order it first read them: an epoch's order for the next epoch).\n" +
			"It returns when all are staged. With --wait it returns 0 only once every file is on the\n" +
			"targets: restores that failed are retried, files released again are restored again, and\n" +
			"at --wait-timeout (or Ctrl-C) the files still not there are listed. Its counts are\n" +
			"exported by the metadata service as sluice_stage_*{job}.",
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		if rate != "" {
			r, err := cli.ParseSize(rate)
			if err != nil || r <= 0 {
				return fmt.Errorf("%w: stage: --rate %q: want bytes per second, e.g. 500M", errUsage, rate)
			}
			o.Rate = r
		}
		return e.Stage(ctx, args, o)
	})
	f := cmd.Flags()
	f.StringVar(&o.FromFile, "from-file", "", "file of paths to stage, one per line")
	f.StringVar(&o.FromProfile, "from-profile", "", "a recording of sluice profile record: stage the files it read, in the order it read them")
	f.StringVar(&o.ProfileDir, "profile-dir", "", "with --from-profile: only the files under this directory (default: the recording's --dir)")
	f.BoolVar(&o.DryRun, "dry-run", false, "print the files in the order they would be staged, and stage nothing")
	f.StringVar(&o.Follow, "follow", "", "keep ahead of this job's readers (their $SLUICE_QOS_JOB): --depth files ahead of the furthest file they reached, doubled at each miss")
	f.IntVar(&o.Depth, "depth", 8, "with --follow: files restored ahead of the readers at first")
	f.IntVar(&o.MaxDepth, "max-depth", 256, "with --follow: the most files ahead")
	f.DurationVar(&o.FollowIdle, "follow-idle", 10*time.Second, "with --follow: once all is staged, stop after the readers read nothing new for this long")
	f.StringVar(&rate, "rate", "", "bytes per second restored at most (e.g. 500M; default no cap)")
	f.IntVarP(&o.Parallel, "parallel", "P", 4, "files restored at once")
	f.BoolVar(&o.Wait, "wait", false, "return only once every file is on the targets (retrying failed restores); list those that are not and exit 1")
	f.DurationVar(&o.WaitTimeout, "wait-timeout", 0, "with --wait: give up after this long (default: wait until interrupted)")
	f.StringVar(&o.Job, "job", "", "the job label of the staging metrics sluice_stage_*{job} (default: --follow's job)")
	return cmd
}
