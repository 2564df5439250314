package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/cli"
)

func newLayout(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "layout",
		Short: "Show or set how files are striped over storage targets",
	}
	var getArgs []string
	get := &cobra.Command{
		Use:    "get PATH",
		Short:  "Show a file's layout or a directory's default layout",
		Args:   exactArgs(1),
		PreRun: func(_ *cobra.Command, a []string) { getArgs = a },
	}
	get.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		if err := e.LayoutGet(ctx, getArgs[0]); err != nil {
			return err
		}
		return e.AbsorbShow(ctx, getArgs[0])
	})

	var count, replicas int
	var size, pool string
	var extents []string
	var setArgs []string
	var absorb string
	set := &cobra.Command{
		Use:   "set PATH [--stripe-count N] [--stripe-size SIZE] [--replicas R] [--pool P] [--extent END:COUNT[:SIZE[:POOL]]...]",
		Short: "Set a directory's default layout (or an empty file's layout)",
		Long: "New files below the directory are striped over N targets in stripes of SIZE bytes\n" +
			"(a multiple of 64K, e.g. 1M), each chunk kept in R copies on different storage nodes\n" +
			"(1 to 3), on the targets of pool P only (sluice pool; --pool \"\" clears it). Directories\n" +
			"made below inherit it. Existing files keep their layout.\n\n" +
			"--extent, given 2 to 8 times, makes the layout progressive (PFL, ADR 0021): each extent\n" +
			"covers the file up to END (eof in the last) on COUNT targets (0: all of its pool) in\n" +
			"stripes of SIZE (default 1M), from pool POOL (default: the directory's), e.g.\n" +
			"  --extent 64M:1::nvme --extent 1G:4::nvme --extent eof:0:4M:hdd\n" +
			"A plain --stripe-count/--stripe-size set later replaces it.",
		Args:   exactArgs(1),
		PreRun: func(_ *cobra.Command, a []string) { setArgs = a },
	}
	set.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		if set.Flags().Changed("absorb") {
			m, err := client.ParseAbsorbMode(absorb)
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			if err := e.Client.SetAbsorb(ctx, setArgs[0], m); err != nil {
				return err
			}
		}
		setPool := set.Flags().Changed("pool")
		if len(extents) > 0 {
			if set.Flags().Changed("stripe-count") || set.Flags().Changed("stripe-size") {
				return fmt.Errorf("%w: layout set: --extent takes each extent's count and size; not with --stripe-count or --stripe-size", errUsage)
			}
			if setPool {
				if err := e.LayoutSetPool(ctx, setArgs[0], pool); err != nil {
					return err
				}
			}
			l := client.Layout{Replicas: replicas}
			for _, x := range extents {
				c, err := cli.ParseExtent(x)
				if err != nil {
					return fmt.Errorf("%w: %v", errUsage, err)
				}
				l.Components = append(l.Components, c)
			}
			return e.LayoutSet(ctx, setArgs[0], l)
		}
		if !set.Flags().Changed("stripe-count") && !set.Flags().Changed("stripe-size") && !set.Flags().Changed("replicas") {
			switch {
			case setPool:
				return e.LayoutSetPool(ctx, setArgs[0], pool)
			case set.Flags().Changed("absorb"):
				return nil
			}
			return fmt.Errorf("%w: layout set needs --stripe-count, --stripe-size, --replicas, --pool or --absorb", errUsage)
		}
		if setPool {
			// The pool first: stripe counts are checked against it.
			if err := e.LayoutSetPool(ctx, setArgs[0], pool); err != nil {
				return err
			}
		}
		cur, err := e.Client.GetLayout(ctx, setArgs[0])
		if err != nil {
			return err
		}
		stripeSize := cur.StripeSize
		if set.Flags().Changed("stripe-size") {
			if stripeSize, err = cli.ParseSize(size); err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
		}
		stripeCount := cur.StripeCount
		if set.Flags().Changed("stripe-count") {
			stripeCount = count
		}
		l := client.Layout{StripeSize: stripeSize, StripeCount: stripeCount, Replicas: cur.Replicas}
		if set.Flags().Changed("replicas") {
			if replicas < 1 || replicas > 3 {
				return fmt.Errorf("%w: --replicas must be 1, 2 or 3", errUsage)
			}
			l.Replicas = replicas
		}
		return e.LayoutSet(ctx, setArgs[0], l)
	})
	set.Flags().IntVar(&replicas, "replicas", 1, "copies of each chunk, on different storage nodes (1 to 3)")
	set.Flags().IntVar(&count, "stripe-count", 0, "number of targets to stripe over (0: the default, all up to 4)")
	set.Flags().StringVar(&size, "stripe-size", "", "stripe size, e.g. 1M (a multiple of 64K)")
	set.Flags().StringVar(&absorb, "absorb", "", "checkpoint absorb policy of a directory: on (writes are acknowledged from the writer's --staging-dir and drain in the background; renames wait for the drain), off, or inherit (docs/checkpoint.md)")
	set.Flags().StringVar(&pool, "pool", "", "place new files on the targets of this pool only (\"\": on all)")
	set.Flags().StringArrayVar(&extents, "extent", nil, "a progressive layout's extent END:COUNT[:SIZE[:POOL]] (2 to 8, in order; END eof in the last)")
	cmd.AddCommand(get, set)
	return cmd
}
