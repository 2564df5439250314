package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newStatus(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the file system and its storage targets: health and fill level",
		Args:  cobra.NoArgs,
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.Status(ctx) })
	return cmd
}
