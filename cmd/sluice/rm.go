package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newRm(g *globals) *cobra.Command {
	var recursive bool
	var args []string
	cmd := &cobra.Command{
		Use:    "rm [-r] PATH...",
		Short:  "Remove files and directories",
		Args:   minArgs(1),
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.Rm(ctx, args, recursive) })
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "remove directories and their contents")
	return cmd
}
