package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/cli"
)

func newAudit(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List and verify the audit trail of namespace changes",
		Long: "The metadata service records permission, owner and layout changes, removals and\n" +
			"renames in a hash-chained audit trail (docs/audit.md).",
	}
	var path, since string
	var asJSON bool
	ls := &cobra.Command{
		Use:   "ls [--path P] [--since T] [--json]",
		Short: "List audit entries, oldest first",
		Args:  exactArgs(0),
	}
	ls.RunE = g.run(func(ctx context.Context, e *cli.Env) error {
		q := client.AuditQuery{Path: path}
		if since != "" {
			t, err := cli.ParseSince(since, time.Now())
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			q.Since = t
		}
		return e.AuditLs(ctx, q, asJSON)
	})
	ls.Flags().StringVar(&path, "path", "", "only entries about this path (or inside this directory)")
	ls.Flags().StringVar(&since, "since", "", "only entries since this time (RFC 3339, 2006-01-02) or duration ago (24h)")
	ls.Flags().BoolVar(&asJSON, "json", false, "print JSON lines (one object per entry, for SIEM tools)")
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit trail's hash chain; exit status 1 and the first bad entry if broken",
		Args:  exactArgs(0),
	}
	verify.RunE = g.run(func(ctx context.Context, e *cli.Env) error { return e.AuditVerify(ctx) })
	cmd.AddCommand(ls, verify)
	return cmd
}
