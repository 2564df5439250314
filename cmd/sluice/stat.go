package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newStat(g *globals) *cobra.Command {
	var args []string
	cmd := &cobra.Command{
		Use:    "stat PATH...",
		Short:  "Show a file's attributes and layout",
		Args:   minArgs(1),
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.Stat(ctx, args) })
	return cmd
}
