package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newPool(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Manage pools: named sets of storage targets that layouts place files on",
		Long: "A pool names a set of targets (for example nvme or hdd). A directory whose layout names\n" +
			"a pool (sluice layout set DIR --pool P) has its new files placed on those targets only.",
	}
	var args []string
	keep := func(_ *cobra.Command, a []string) { args = a }
	withIDs := func(fn func(e *cli.Env, ctx context.Context, name string, ids []uint32) error) func(*cobra.Command, []string) error {
		return g.run(func(ctx context.Context, e *cli.Env) error {
			ids, err := cli.ParseTargetIDs(args[1:])
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			return fn(e, ctx, args[0], ids)
		})
	}
	create := &cobra.Command{
		Use: "create NAME [TARGET...]", Short: "Make a pool, of the given target IDs (maybe none)",
		Args: cobra.MinimumNArgs(1), PreRun: keep,
	}
	create.RunE = withIDs((*cli.Env).PoolCreate)
	add := &cobra.Command{
		Use: "add NAME TARGET...", Short: "Add targets to a pool",
		Args: cobra.MinimumNArgs(2), PreRun: keep,
	}
	add.RunE = withIDs((*cli.Env).PoolAdd)
	remove := &cobra.Command{
		Use:   "remove NAME [TARGET...]",
		Short: "Take targets out of a pool (their files stay); with no targets, delete the pool",
		Args:  cobra.MinimumNArgs(1), PreRun: keep,
	}
	remove.RunE = withIDs((*cli.Env).PoolRemove)
	ls := &cobra.Command{Use: "ls", Short: "List the pools with their targets, capacity and fill", Args: exactArgs(0)}
	ls.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.PoolList(ctx) })
	cmd.AddCommand(create, add, remove, ls)
	return cmd
}
