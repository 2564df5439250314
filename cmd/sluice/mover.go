package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/cli"
	"github.com/sluice-fs/sluice/internal/mover"
)

func newTierPolicy(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Set, show or remove directories' tier policies (what the mover archives and releases)",
	}
	var p mover.Policy
	var args []string
	set := &cobra.Command{
		Use:    "set DIR [--backend NAME] [--archive-after D] [--release-after D] [--release-high PCT --release-low PCT]",
		Short:  "Set a directory's tier policy; files below inherit it (no flags: a policy that does nothing, stopping the parent's)",
		Args:   exactArgs(1),
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	set.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		if set.Flags().Changed("release-high") != set.Flags().Changed("release-low") {
			return fmt.Errorf("%w: tier policy set: --release-high and --release-low come together", errUsage)
		}
		return e.TierPolicySet(ctx, args[0], p)
	})
	f := set.Flags()
	f.StringVar(&p.Backend, "backend", "", "tier backend archives go to (default: the only one registered)")
	f.DurationVar(&p.ArchiveAfter, "archive-after", 0, "archive files whose data has not changed for this long (0: never)")
	f.DurationVar(&p.ReleaseAfter, "release-after", 0, "release archived files not used for this long (0: never)")
	f.IntVar(&p.High, "release-high", 0, "release archived files, least recently used first, when the targets are this full (percent; 0: never)")
	f.IntVar(&p.Low, "release-low", 0, "... until they would be this full (percent)")
	get := &cobra.Command{
		Use:    "get PATH...",
		Short:  "Show the tier policy that applies to each path and the directory it comes from",
		Args:   minArgs(1),
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	get.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.TierPolicyGet(ctx, args) })
	rm := &cobra.Command{
		Use:    "rm DIR",
		Short:  "Remove a directory's own tier policy (its parent's applies again)",
		Args:   exactArgs(1),
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	rm.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.TierPolicyRm(ctx, args[0]) })
	cmd.AddCommand(set, get, rm)
	return cmd
}

func newMover(g *globals) *cobra.Command {
	var o cli.MoverOptions
	var maxArchive, archiveRate string
	cmd := &cobra.Command{
		Use:   "mover [--once] [--every D] [--root DIR]",
		Short: "Run the object tier's mover: archive and release files as their directories' policies say",
		Long: "Run the object tier's mover: walk the tree, and archive and release files as their\n" +
			"directories' tier policies say (sluice tier policy). With --once it makes one pass and\n" +
			"prints each move; otherwise it makes a pass every --every until stopped. Any number of\n" +
			"nodes may run one (moves are idempotent transactions of the metadata service).",
		Args: cobra.NoArgs,
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		if archiveRate != "" {
			n, err := cli.ParseSize(archiveRate)
			if err != nil || n <= 0 {
				return fmt.Errorf("%w: mover: --archive-rate %q: want bytes per second, e.g. 200M", errUsage, archiveRate)
			}
			o.Limits.ArchiveRate = n
		}
		if maxArchive != "" {
			n, err := cli.ParseSize(maxArchive)
			if err != nil || n < 0 {
				return fmt.Errorf("%w: mover: --max-archive %q: want a size, e.g. 10G", errUsage, maxArchive)
			}
			o.Limits.ArchiveBytes = n
		}
		if o.Limits.ReleaseRate < 0 {
			return fmt.Errorf("%w: mover: --release-rate must not be negative", errUsage)
		}
		if !o.Once && o.Every <= 0 {
			return fmt.Errorf("%w: mover: --every must be positive", errUsage)
		}
		return e.Mover(ctx, o)
	})
	f := cmd.Flags()
	f.BoolVar(&o.Once, "once", false, "make one pass, print what it did and exit")
	f.DurationVar(&o.Every, "every", defaultMoverEvery, "time between passes")
	f.StringVar(&o.Root, "root", "/", "tree to walk")
	f.BoolVar(&o.DryRun, "dry-run", false, "print what a pass would do and move nothing (with --once)")
	f.StringVar(&maxArchive, "max-archive", "", "bytes one pass archives at most (e.g. 10G; default no cap)")
	f.StringVar(&archiveRate, "archive-rate", "", "bytes per second archives start at, at most (e.g. 200M; default no cap)")
	f.IntVar(&o.Limits.Releases, "max-releases", mover.DefaultReleases, "files one pass releases at most (0: no cap)")
	f.Float64Var(&o.Limits.ReleaseRate, "release-rate", 0, "files per second releases start at, at most (default no cap)")
	f.IntVarP(&o.Parallel, "parallel", "P", 4, "archives and releases at once")
	return cmd
}

// defaultMoverEvery is the time between passes of `sluice mover`.
const defaultMoverEvery = time.Minute

func newTierImport(g *globals) *cobra.Command {
	var prefix string
	var parallel int
	var checksums, keepChanged, del, dryRun, quiet bool
	var args []string
	cmd := &cobra.Command{
		Use:   "import NAME[/PREFIX] DIR [--prefix P] [--checksums] [--keep-changed] [--delete] [--dry-run]",
		Short: "Make the objects of a tier backend (an existing bucket) released files under DIR, without copying them",
		Long: "Make each object of tier backend NAME whose key starts with PREFIX (or --prefix) a released file\n" +
			"under DIR (DIR/KEY-WITHOUT-PREFIX): reads fetch it from the bucket and restore it, like any\n" +
			"released file. Only the listing is copied (size, mtime, ETag): reads are pinned to the\n" +
			"object's ETag, and the first restore takes the block checksums; --checksums reads every\n" +
			"object once to take them at import. Sluice never deletes or writes over an imported object.\n" +
			"Existing files are not replaced; run it again to pick up new objects (files imported before\n" +
			"are counted, not redone). A re-run also makes the released files of objects that changed in\n" +
			"the bucket since the new objects (size, mtime, ETag); restored ones keep their bytes, are\n" +
			"counted and become dirty (their copy is gone); --keep-changed leaves them all as they are.\n" +
			"Files an import made that are files of their own since (written and archived again) are\n" +
			"kept and counted. --delete also removes the released files an earlier import made of\n" +
			"objects that are gone from the bucket now (each confirmed gone by a HEAD; those past the\n" +
			"last listed key only once the whole listing was read); restored ones keep their bytes and\n" +
			"become dirty; other files are never removed; directories below DIR those removals leave\n" +
			"empty are removed too. --dry-run changes nothing and prints what would be imported and\n" +
			"(with --delete) which files would be removed.",
		Args:   exactArgs(2),
		PreRun: func(_ *cobra.Command, a []string) { args = a },
	}
	cmd.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		name := args[0]
		if n, p, ok := strings.Cut(name, "/"); ok {
			// NAME/PREFIX: the prefix joined to the backend's name.
			if prefix != "" {
				return fmt.Errorf("%w: tier import: a prefix in %q and --prefix", errUsage, name)
			}
			name, prefix = n, p
		}
		return e.TierImport(ctx, name, prefix, args[1], client.ImportOptions{Parallel: parallel, Checksums: checksums, KeepChanged: keepChanged, Delete: del, DryRun: dryRun}, quiet)
	})
	f := cmd.Flags()
	f.StringVar(&prefix, "prefix", "", "import only the keys that start with this (below the backend's own prefix); it is not part of the files' names")
	f.IntVarP(&parallel, "parallel", "P", 8, "objects imported at once")
	f.BoolVar(&checksums, "checksums", false, "read every object once to take its checksums (CRC32C of each MiB, SHA-256) instead of trusting the listing's ETag")
	f.BoolVar(&keepChanged, "keep-changed", false, "leave the files of objects that changed in the bucket since an earlier import as they are")
	f.BoolVar(&del, "delete", false, "remove the released files an earlier import made of objects that are gone from the bucket")
	f.BoolVar(&dryRun, "dry-run", false, "change nothing: print the objects that would be imported and, with --delete, the files that would be removed")
	f.BoolVarP(&quiet, "quiet", "q", false, "print only the summary")
	return cmd
}
