package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newDamaged(g *globals) *cobra.Command {
	var args []string
	cmd := &cobra.Command{
		Use:   "damaged [PATH]",
		Short: "List the files with data on chains that have no live serving replica",
		Long: "Walks PATH (default /) and lists the regular files with bytes on a chain whose last\n" +
			"serving replica is on a dead node (or whose one target is down), with those chains:\n" +
			"reading them fails until a replica returns.",
		Args:   cobra.MaximumNArgs(1),
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		root := "/"
		if len(args) == 1 {
			root = args[0]
		}
		return e.Damaged(ctx, root)
	})
	return cmd
}
