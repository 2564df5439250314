package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newLn(g *globals) *cobra.Command {
	var symbolic bool
	var args []string
	cmd := &cobra.Command{
		Use:    "ln [-s] TARGET LINK",
		Short:  "Make a hard link, or a symbolic link with -s",
		Args:   exactArgs(2),
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.Ln(ctx, args[0], args[1], symbolic) })
	cmd.Flags().BoolVarP(&symbolic, "symbolic", "s", false, "make a symbolic link")
	return cmd
}
