package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
	"github.com/sluice-fs/sluice/internal/server"
)

func newRebalance(g *globals) *cobra.Command {
	var a cli.RebalanceArgs
	var band float64
	var rate, maxBytes string
	cmd := &cobra.Command{
		Use:   "rebalance [--band PCT] [--rate R] [--max-bytes B] [--dry-run]",
		Short: "Move chunks from full targets to empty ones until their fill is within a band",
		Long: "Adds up the bytes each target holds, plans chunk moves (largest first, from the\n" +
			"fullest target to the emptiest one the file does not use) that bring every\n" +
			"target's fill within --band points of the mean, and carries them out as online\n" +
			"migrations (sluice migrate), one file at a time, reading at most --rate bytes per\n" +
			"second. Files of one replica outside pools are moved; the others stay.",
		Args: cobra.NoArgs,
	}
	cmd.RunE = g.runBackground(func(ctx context.Context, e *cli.Env) error {
		if band <= 0 || band > 100 {
			return fmt.Errorf("%w: --band must be between 0 and 100 (percentage points)", errUsage)
		}
		a.Band = band / 100
		var err error
		if a.Opts.Rate, err = cli.ParseSize(rate); err != nil {
			return fmt.Errorf("%w: --rate: %v", errUsage, err)
		}
		if maxBytes != "" {
			if a.MaxBytes, err = cli.ParseSize(maxBytes); err != nil {
				return fmt.Errorf("%w: --max-bytes: %v", errUsage, err)
			}
		}
		return e.Rebalance(ctx, a)
	})
	f := cmd.Flags()
	f.Float64Var(&band, "band", 10, "width of the fill band around the mean, in percentage points")
	f.StringVar(&rate, "rate", "32M", "bytes per second each migration reads at most (0: no cap)")
	f.StringVar(&maxBytes, "max-bytes", "", "move at most this many bytes in this run (default: no limit)")
	f.BoolVar(&a.DryRun, "dry-run", false, "print the plan, move nothing")
	f.BoolVarP(&a.Quiet, "quiet", "q", false, "print the fills and the total only")
	return cmd
}

// rebalanceFlags registers --rebalance-every, --rebalance-band and
// --rebalance-rate (sluice serve, sluice meta).
func rebalanceFlags(cmd *cobra.Command, o *server.RebalanceOptions) {
	o.Band, o.Rate = 0.1, 32<<20
	f := cmd.Flags()
	f.DurationVar(&o.Every, "rebalance-every", 0, "run the rebalancer in this process, a pass every this long (0: off; sluice rebalance, docs/placement.md)")
	f.Var(bandValue{&o.Band}, "rebalance-band", "the rebalancer's fill band around the mean, in percentage points")
	f.Var(sizeValue{&o.Rate}, "rebalance-rate", "bytes per second each of the rebalancer's migrations reads at most in its first copy (0: no cap)")
}

// bandValue is a band flag given in percentage points, kept as a fraction.
type bandValue struct{ f *float64 }

func (v bandValue) String() string { return strconv.FormatFloat(*v.f*100, 'g', -1, 64) }
func (v bandValue) Type() string   { return "percent" }
func (v bandValue) Set(s string) error {
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || p <= 0 || p > 100 {
		return fmt.Errorf("%q is not between 0 and 100 (percentage points)", s)
	}
	*v.f = p / 100
	return nil
}

// stagingMaxHelp is the help of --staging-max (mount, serve, bench).
const stagingMaxHelp = "with a --staging-dir: the most bytes staged and not yet drained that it holds; a write past it waits for the drain, e.g. 64G (default: three quarters of the space available there at start; it shrinks while the disk fills; docs/checkpoint.md)"

// stagingReserveHelp is the help of --staging-reserve (mount, serve, bench).
const stagingReserveHelp = "with a --staging-dir in memory (/dev/shm): bytes of staging files to allocate at start, in the background, so that the first checkpoint is written into existing pages as later ones are, e.g. 4G (memory taken while the client runs; at most 16 GiB and a quarter of the file system; docs/checkpoint.md)"

// sizeValue is a byte count flag such as 64M.
type sizeValue struct{ n *int64 }

func (v sizeValue) String() string { return strconv.FormatInt(*v.n, 10) }
func (v sizeValue) Type() string   { return "size" }
func (v sizeValue) Set(s string) error {
	n, err := cli.ParseSize(s)
	if err != nil {
		return err
	}
	*v.n = n
	return nil
}
