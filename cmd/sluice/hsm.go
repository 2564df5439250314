package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newHsm(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hsm",
		Short: "Move files between the targets and the object tier (archive, release, restore)",
	}
	for _, a := range []struct{ name, short string }{
		{cli.HsmArchive, "Copy files to a tier backend (one object each); they become archived"},
		{cli.HsmRelease, "Free the target space of archived files; reads fetch them from the tier"},
		{cli.HsmRestore, "Bring released files back to the targets"},
		{cli.HsmState, "Show files' HSM states: resident, archived, released or dirty"},
		{cli.HsmRemove, "Drop the archived copy of files (not released ones)"},
	} {
		var recursive bool
		var backend string
		parallel := 8
		var args []string
		sub := &cobra.Command{
			Use:    a.name + " [-r] PATH...",
			Short:  a.short,
			Args:   minArgs(1),
			PreRun: func(_ *cobra.Command, x []string) { args = x },
		}
		sub.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
			return e.Hsm(ctx, a.name, args, recursive, backend, parallel)
		})
		sub.Flags().BoolVarP(&recursive, "recursive", "r", false, "every regular file below directories")
		sub.Flags().IntVarP(&parallel, "parallel", "P", parallel, "files handled at once")
		if a.name == cli.HsmArchive {
			sub.Flags().StringVar(&backend, "backend", "", "tier backend (default: the only one registered)")
		}
		cmd.AddCommand(sub)
	}
	return cmd
}
