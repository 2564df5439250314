package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newLs(g *globals) *cobra.Command {
	var long bool
	var args []string
	cmd := &cobra.Command{
		Use:    "ls [-l] [PATH...]",
		Short:  "List directories",
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.Ls(ctx, args, long) })
	cmd.Flags().BoolVarP(&long, "long", "l", false, "long listing: mode, links, owner, size, time")
	return cmd
}
