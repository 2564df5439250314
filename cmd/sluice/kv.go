package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/cli"
)

func newKV(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kv",
		Short: "The KV-cache store: write-once values on the storage targets (docs/kvcache.md)",
	}
	var args []string
	pre := func(_ *cobra.Command, a []string) { args = a }

	var capacity string
	var ttl time.Duration
	var replicas int
	create := &cobra.Command{Use: "create STORE --capacity SIZE [--ttl DUR] [--replicas R]", Short: "Create a store over every target", Args: exactArgs(1), PreRun: pre}
	create.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		c, err := cli.ParseSize(capacity)
		if err != nil {
			return fmt.Errorf("%w: --capacity: %v", errUsage, err)
		}
		return e.KVCreate(ctx, args[0], client.KVConfig{Capacity: c, TTL: ttl, Replicas: replicas})
	})
	create.Flags().StringVar(&capacity, "capacity", "", "bytes of values the store holds, e.g. 100G (required)")
	create.MarkFlagRequired("capacity")
	create.Flags().DurationVar(&ttl, "ttl", 0, "how long a value lives after its put (0: until evicted)")
	create.Flags().IntVar(&replicas, "replicas", 1, "targets holding each value (1 to 3)")

	put := &cobra.Command{Use: "put STORE KEY FILE", Short: "Store a local file ('-': stdin) under KEY (write-once)", Args: exactArgs(3), PreRun: pre}
	put.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.KVPut(ctx, args[0], args[1], args[2]) })
	get := &cobra.Command{Use: "get STORE KEY [FILE]", Short: "Write KEY's value to FILE (default '-': stdout)", Args: cobra.RangeArgs(2, 3), PreRun: pre}
	get.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		dst := "-"
		if len(args) == 3 {
			dst = args[2]
		}
		return e.KVGet(ctx, args[0], args[1], dst)
	})
	ls := &cobra.Command{Use: "ls STORE", Short: "List keys: size, put time, key", Args: exactArgs(1), PreRun: pre}
	ls.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.KVLs(ctx, args[0]) })
	rm := &cobra.Command{Use: "rm STORE KEY...", Short: "Delete keys", Args: minArgs(2), PreRun: pre}
	rm.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.KVRm(ctx, args[0], args[1:]) })
	stats := &cobra.Command{Use: "stats STORE", Short: "Show a store's configuration, usage and counters", Args: exactArgs(1), PreRun: pre}
	stats.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.KVStats(ctx, args[0]) })
	cmd.AddCommand(create, put, get, ls, rm, stats)
	return cmd
}
