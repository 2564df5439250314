package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newMv(g *globals) *cobra.Command {
	var args []string
	cmd := &cobra.Command{
		Use:    "mv SRC DST",
		Short:  "Rename or move a file or directory (atomic)",
		Args:   exactArgs(2),
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.Mv(ctx, args[0], args[1]) })
	return cmd
}
