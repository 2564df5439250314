package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newCp(g *globals) *cobra.Command {
	var recursive, progress, quiet bool
	var args []string
	cmd := &cobra.Command{
		Use:   "cp [-r] SRC... DST",
		Short: "Copy files between local paths and Sluice (sluice:/path)",
		Long: "Copy files like cp(1). Sluice paths are written sluice:/path, others are local:\n" +
			"  sluice cp -r ./dataset sluice:/datasets/\n  sluice cp sluice:/ckpt/model.pt ./\n" +
			"A progress bar is shown on a terminal for copies of 64 MiB or more.",
		Args:   minArgs(2),
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		if cmd.Flags().Changed("progress") || quiet {
			show := progress && !quiet
			e.Progress = &show
		}
		return e.Copy(ctx, args[:len(args)-1], args[len(args)-1], recursive)
	})
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "copy directories recursively")
	cmd.Flags().BoolVar(&progress, "progress", false, "always show a progress bar")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "never show a progress bar")
	return cmd
}
