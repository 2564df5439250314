package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newCheckpoint(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "List, verify and prune checkpoint directories (docs/checkpoint.md)",
		Long: "A checkpoint is a directory holding a commit marker (--marker, default .metadata as\n" +
			"PyTorch DCP writes it). PATH is a checkpoint or a directory of checkpoints.",
	}
	var marker string
	var args []string
	pre := func(_ *cobra.Command, a []string) { args = a }
	ls := &cobra.Command{Use: "ls PATH", Short: "List checkpoints, oldest first: committed, draining or incomplete", Args: exactArgs(1), PreRun: pre}
	ls.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.CheckpointLs(ctx, args[0], marker) })
	verify := &cobra.Command{Use: "verify PATH", Short: "Read every file of every committed checkpoint, checking each block's checksum", Args: exactArgs(1), PreRun: pre}
	verify.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.CheckpointVerify(ctx, args[0], marker) })
	var keep int
	var dryRun bool
	prune := &cobra.Command{Use: "prune --keep N PATH", Short: "Remove all but the newest N committed checkpoints (incomplete ones stay)", Args: exactArgs(1), PreRun: pre}
	prune.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		return e.CheckpointPrune(ctx, args[0], marker, keep, dryRun)
	})
	prune.Flags().IntVar(&keep, "keep", 0, "committed checkpoints to keep (required)")
	prune.MarkFlagRequired("keep")
	prune.Flags().BoolVarP(&dryRun, "dry-run", "n", false, "only print what would be removed")
	for _, c := range []*cobra.Command{ls, verify, prune} {
		c.Flags().StringVar(&marker, "marker", cli.DefaultMarker, "the file that commits a checkpoint directory")
	}
	cmd.AddCommand(ls, verify, prune)
	return cmd
}
