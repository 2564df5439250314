package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newAdvise(g *globals) *cobra.Command {
	var o cli.AdviseOptions
	var checkBytes string
	cmd := &cobra.Command{
		Use:   "advise RECORDING",
		Short: "Recommend a layout and a QoS class for a recorded workload (sluice profile record)",
		Long: "advise reads a recording of the I/O profiler, predicts with a model measured on the cluster\n" +
			"(sluice advise calibrate; built in: one of the development VM) what each stripe count would\n" +
			"deliver, and recommends a change only beyond the model's noise. --apply sets the directory's\n" +
			"layout and migrates its files; --check replays the recorded workload on copies of its files\n" +
			"with both layouts and prints the measured gain beside the predicted one. See docs/profile.md.",
		Args: exactArgs(1),
	}
	f := cmd.Flags()
	f.StringVar(&o.Dir, "dir", "", "the workload's directory (default: the recording's --dir)")
	f.StringVar(&o.Model, "model", "", "a model written by sluice advise calibrate (default: the built-in one)")
	f.BoolVar(&o.Apply, "apply", false, "apply the layout advice: set the directory's layout and migrate its files")
	f.BoolVar(&o.Check, "check", false, "replay the recorded workload with the current and the advised layout and measure the gain")
	f.BoolVar(&o.JSON, "json", false, "print the advice as JSON")
	f.StringVar(&checkBytes, "check-bytes", "256MiB", "bytes a --check replay moves at most")
	f.StringVar(&o.Scratch, "scratch", "/.sluice-advise-check", "directory for the --check replay's copies (removed after)")
	cmd.RunE = func(c *cobra.Command, args []string) error {
		n, err := cli.ParseSize(checkBytes)
		if err != nil {
			return err
		}
		o.CheckBytes = n
		return g.runBackground(func(ctx context.Context, e *cli.Env) error { return e.Advise(ctx, args[0], o) })(c, args)
	}

	var co cli.CalibrateOptions
	var size string
	cal := &cobra.Command{Use: "calibrate --out FILE", Short: "Measure what each stripe count delivers here (the advisor's model)", Args: exactArgs(0)}
	cf := cal.Flags()
	cf.StringVar(&co.Out, "out", "", "file to write the model to (JSON)")
	cf.StringVar(&co.Scratch, "scratch", "/.sluice-calibrate", "directory for the measurement files (removed after)")
	cf.StringVar(&size, "size", "32MiB", "bytes each stream writes and reads in a sequential measurement")
	cf.DurationVar(&co.CellTime, "cell-time", 500*time.Millisecond, "how long each random-I/O measurement runs")
	cf.IntVar(&co.Runs, "runs", 2, "measurements of each cell (their spread is the model's noise)")
	cf.BoolVarP(&co.Quiet, "quiet", "q", false, "no progress lines")
	cf.BoolVar(&co.Mount, "mount", false, "also measure sequential writes through two FUSE mounts made here, with and without the kernel's write-back cache (for the writeback-cache advice; needs FUSE and root)")
	cf.StringVar(&co.Base, "base", "", "keep the cells of this model instead of measuring them again (with --mount: add mount cells to it)")
	cf.StringArrayVar(&co.Pools, "pool", nil, "measure this pool's targets (stripe counts up to its size; repeat for each pool the advice may choose between) instead of all targets as one")
	cal.RunE = func(c *cobra.Command, args []string) error {
		n, err := cli.ParseSize(size)
		if err != nil {
			return err
		}
		co.Size = n
		return g.run(func(ctx context.Context, e *cli.Env) error { return e.Calibrate(ctx, co) })(c, args)
	}
	cmd.AddCommand(cal)
	return cmd
}
