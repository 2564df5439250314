package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newMigrate(g *globals) *cobra.Command {
	var a cli.MigrateArgs
	var size, rate string
	var extents []string
	var lease time.Duration
	cmd := &cobra.Command{
		Use:   "migrate [--stripe-count N] [--stripe-size SIZE] [--extent END:COUNT[:SIZE[:POOL]]...] [--replicas R] [--pool P] [-r] PATH...",
		Short: "Move files' data to a new layout while they stay in use",
		Long: "Copies each file's data to a new layout (stripe count, stripe size, replicas, pool;\n" +
			"flags not given keep the file's value) and switches the file to it in one metadata\n" +
			"transaction. Readers and writers keep going: writes wait for the switch only while\n" +
			"what changed during the copy is copied again; every copied byte is checked against\n" +
			"the original before the switch. A migration that fails or is killed leaves the old\n" +
			"layout in place; its half-copy is collected (docs/placement.md, ADR 0020).\n" +
			"--extent (2 to 8 times, as in sluice layout set) migrates to a progressive layout; a\n" +
			"progressive file keeps its extents unless --stripe-count or --stripe-size is given.",
		Args:   cobra.MinimumNArgs(1),
		PreRun: func(_ *cobra.Command, args []string) { a.Paths = args },
	}
	cmd.RunE = g.runBackground(func(ctx context.Context, e *cli.Env) error {
		var err error
		if cmd.Flags().Changed("stripe-size") {
			if a.Spec.StripeSize, err = cli.ParseSize(size); err != nil {
				return fmt.Errorf("%w: --stripe-size: %v", errUsage, err)
			}
		}
		if rate != "" {
			if a.Opts.Rate, err = cli.ParseSize(rate); err != nil {
				return fmt.Errorf("%w: --rate: %v", errUsage, err)
			}
		}
		if cmd.Flags().Changed("replicas") && (a.Spec.Replicas < 1 || a.Spec.Replicas > 3) {
			return fmt.Errorf("%w: --replicas must be 1, 2 or 3", errUsage)
		}
		for _, x := range extents {
			c, err := cli.ParseExtent(x)
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			a.Spec.Components = append(a.Spec.Components, c)
		}
		a.Opts.Lease = lease
		return e.Migrate(ctx, a)
	})
	f := cmd.Flags()
	f.IntVar(&a.Spec.StripeCount, "stripe-count", 0, "number of chains to stripe over (default: the file's)")
	f.StringVar(&size, "stripe-size", "", "stripe size, e.g. 1M, a multiple of 64K (default: the file's)")
	f.IntVar(&a.Spec.Replicas, "replicas", 0, "copies of each chunk, 1 to 3 (default: the file's)")
	f.StringArrayVar(&extents, "extent", nil, "a progressive layout's extent END:COUNT[:SIZE[:POOL]] (2 to 8, in order; END eof in the last)")
	f.StringVar(&a.Spec.Pool, "pool", "", "place the new layout on this pool's targets (default: all targets)")
	f.BoolVarP(&a.Recursive, "recursive", "r", false, "migrate every regular file below the directories named")
	f.StringVar(&rate, "rate", "", "read at most this many bytes per second per file, e.g. 200M (default: no cap)")
	f.DurationVar(&lease, "lease", 0, "abort the migration if this process is silent for this long (default 30s)")
	f.BoolVarP(&a.Quiet, "quiet", "q", false, "print only the total")
	f.BoolVarP(&a.Verbose, "verbose", "v", false, "print each phase of each file as it starts")
	f.StringVar(&a.PauseAt, "pause-at", "", "for tests: stop each migration before this phase until killed")
	f.MarkHidden("pause-at")
	return cmd
}
