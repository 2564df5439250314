package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
	"github.com/sluice-fs/sluice/internal/fsx"
)

func newFsx(g *globals) *cobra.Command {
	var (
		seed                          uint64
		ops, files                    int
		maxSize, maxIO                string
		verbose                       bool
		noMmap, noCopyRange, noDirect bool
		noAllocate                    bool
	)
	cmd := &cobra.Command{
		Use:   "fsx [--seed N] [--ops N] DIR | sluice:/DIR",
		Short: "Run the randomized data-integrity exerciser on a directory",
		Long: "Writes, reads, truncates, fallocates (grow, keep-size, punch-hole, zero-range), syncs,\n" +
			"re-opens (and on a local or mounted DIR: mmap with msync, copy_file_range, O_DIRECT\n" +
			"reads) at random offsets and sizes on a few files\n" +
			"in DIR, checking every byte read against an in-memory reference. sluice:/DIR runs\n" +
			"through the client library against --server. A failure prints the seed, the\n" +
			"operation, where the wrong bytes came from and the last operations; the same\n" +
			"--seed with --ops set to the failing operation's number + 1 replays it.",
		Args: exactArgs(1),
	}
	cmd.Flags().Uint64Var(&seed, "seed", 0, "seed (default: a fresh one, printed)")
	cmd.Flags().IntVar(&ops, "ops", 100000, "operations to run")
	cmd.Flags().IntVar(&files, "files", 3, "files written at once")
	cmd.Flags().StringVar(&maxSize, "max-size", "16M", "largest file size")
	cmd.Flags().StringVar(&maxIO, "max-io", "4M", "largest write, read or copy")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every operation")
	cmd.Flags().BoolVar(&noMmap, "no-mmap", false, "no mmap reads and writes")
	cmd.Flags().BoolVar(&noCopyRange, "no-copy-range", false, "no copy_file_range")
	cmd.Flags().BoolVar(&noDirect, "no-direct", false, "no O_DIRECT reads")
	cmd.Flags().BoolVar(&noAllocate, "no-fallocate", false, "no fallocate (for a file system without its modes)")
	cmd.RunE = func(c *cobra.Command, args []string) error {
		ms, err := cli.ParseSize(maxSize)
		if err != nil {
			return fmt.Errorf("%w: --max-size: %v", errUsage, err)
		}
		mio, err := cli.ParseSize(maxIO)
		if err != nil {
			return fmt.Errorf("%w: --max-io: %v", errUsage, err)
		}
		if !c.Flags().Changed("seed") {
			seed = fsx.FreshSeed()
		}
		cfg := fsx.Config{Seed: seed, Ops: ops, Files: files, MaxSize: ms, MaxIO: int(mio), NoMmap: noMmap, NoCopyRange: noCopyRange, NoDirect: noDirect, NoAllocate: noAllocate}
		if verbose {
			cfg.Log = os.Stdout
		}
		cfg.Progress = os.Stderr
		fmt.Fprintf(os.Stderr, "sluice fsx: seed %d, %d operations on %d files in %s\n", seed, ops, files, args[0])
		ctx := c.Context()
		if dir, ok := strings.CutPrefix(args[0], "sluice:"); ok {
			e, done, err := g.env(ctx)
			if err != nil {
				return err
			}
			defer done()
			return runFsx(ctx, &fsx.Client{C: e.Client, Dir: dir, Ctx: ctx}, cfg, os.Stdout)
		}
		return runFsx(ctx, fsx.Dir(args[0]), cfg, os.Stdout)
	}
	return cmd
}

func runFsx(ctx context.Context, t fsx.Target, cfg fsx.Config, out io.Writer) error {
	st, err := fsx.Run(ctx, t, cfg)
	fmt.Fprintf(out, "sluice fsx: seed %d: %v\n", cfg.Seed, st)
	var f *fsx.Failure
	if errors.As(err, &f) {
		fmt.Fprint(out, f.Error())
		return fmt.Errorf("fsx: seed %d failed at operation %d", cfg.Seed, f.Op.N)
	}
	return err
}
