package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newMkdir(g *globals) *cobra.Command {
	var parents bool
	var args []string
	cmd := &cobra.Command{
		Use:    "mkdir [-p] PATH...",
		Short:  "Create directories",
		Args:   minArgs(1),
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.Mkdir(ctx, args, parents) })
	cmd.Flags().BoolVarP(&parents, "parents", "p", false, "create missing parents; no error if it exists")
	return cmd
}
