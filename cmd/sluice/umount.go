package main

import (
	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/fusefs"
)

func newUmount() *cobra.Command {
	var lazy bool
	cmd := &cobra.Command{
		Use:   "umount [--lazy=false] MOUNTPOINT",
		Short: "Unmount a Sluice FUSE mount, also one whose process crashed",
		Long: "umount unmounts MOUNTPOINT. A live mount process then exits cleanly; the\n" +
			"mount of a crashed process is removed (the next mount frees the files that\n" +
			"were unlinked while open). If the mount is busy it is detached lazily unless\n" +
			"--lazy=false. Non-root users need fusermount3 (Debian package fuse3).",
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return fusefs.Unmount(args[0], lazy)
		},
	}
	cmd.Flags().BoolVarP(&lazy, "lazy", "l", true, "detach a busy mount lazily instead of failing")
	return cmd
}
