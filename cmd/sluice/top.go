package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/internal/cli"
)

func newTop() *cobra.Command {
	var o cli.TopOptions
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show live operation rates and throughput of a server (from its admin port)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cli.Top(cmd.Context(), os.Stdout, o)
		},
	}
	cmd.Flags().StringVar(&o.Admin, "admin", "127.0.0.1:9401", "the server's admin address (sluice serve --http)")
	cmd.Flags().DurationVarP(&o.Interval, "interval", "i", time.Second, "time between refreshes")
	cmd.Flags().IntVarP(&o.Count, "count", "n", 0, "refreshes before exiting (0: until interrupted)")
	return cmd
}
